"""Schema of power_spectrum, as DALI's: the power (or magnitude) spectrum of float32 data along one axis."""

from __future__ import annotations

import numpy as np

from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _power_spectrum(a: SpecArgs) -> list[OutputSpec]:
    """Float32 spectrum: the input's layout and dims with nfft // 2 + 1 bins along `axis`."""
    first, axis, nfft = a.first, a.args["axis"], a.args["nfft"]
    dims = None
    if first.dims is not None and -len(first.dims) <= axis < len(first.dims):
        at = axis % len(first.dims)
        extent = first.dims[at]
        bins = nfft // 2 + 1 if nfft is not None else (extent // 2 + 1 if extent >= 0 else -1)
        dims = tuple(bins if i == at else d for i, d in enumerate(first.dims))
    return [OutputSpec(np.dtype(np.float32), first.layout, dims)]


register(OpSchema(
    name="power_spectrum",
    doc="Power spectrum of float32 data along `axis`, as DALI's: |rfft(x, nfft)|^power, nfft // 2 + 1 bins (the "
        "positive frequencies). The data is zero-padded to nfft, or cut to its first nfft values; nfft defaults to "
        "the extent of the axis.",
    args=(
        Arg("axis", "int", -1, "Axis to transform; negative counts from the end (default the last).",
            limits=Limits(-64, 63)),
        Arg("nfft", "int", None, "Size of the FFT; default the data's extent along `axis`.",
            limits=Limits(1, 1 << 24)),
        Arg("power", "int", 2, "Exponent of the magnitude: 2 (real^2 + imag^2) or 1 (the magnitude).",
            choices=(1, 2)),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_power_spectrum,
))
