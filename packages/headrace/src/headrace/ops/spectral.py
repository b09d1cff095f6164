"""Schemas of the spectral audio features, as DALI's: `spectrogram` (short-time Fourier transform of a 1D signal),
`mel_filter_bank` (triangular mel filters over the frequency axis), `to_decibels` and `mfcc` (a DCT of a mel
spectrogram). Inputs and outputs are float32; the ASR pipelines chain them as spectrogram -> mel_filter_bank ->
to_decibels (or log) -> mfcc / normalize."""

from __future__ import annotations

import numpy as np

from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_FLOAT32 = np.dtype(np.float32)
_SIZE = Limits(1, 1 << 24)  # an FFT, window or step of at most 16M samples; values outside fail where the graph is made
_COUNT = Limits(1, 1 << 16)  # mel filters / MFCCs


def _spectrogram(a: SpecArgs) -> list[OutputSpec]:
    """Float32 spectrogram: nfft // 2 + 1 frequency bins by windows, "ft" (default) or "tf" as `layout` says."""
    nfft = a.args["nfft"] or a.args["window_length"]
    bins = nfft // 2 + 1
    layout = a.args["layout"]
    return [OutputSpec(_FLOAT32, layout, (bins, -1) if layout == "ft" else (-1, bins))]


def _frequency_axis(a: SpecArgs) -> int | None:
    """The axis mel_filter_bank filters: `axes` (resolved from the layout's 'f'), else DALI's default for data
    without a layout (the second last axis, or the only one); None where it cannot be known here."""
    axes = a.args.get("axes")
    ndim = a.first.ndim
    if axes:
        return axes[0] % ndim if ndim else (axes[0] if axes[0] >= 0 else None)
    return None if ndim is None else max(ndim - 2, 0)


def _mel(a: SpecArgs) -> list[OutputSpec]:
    """Float32 mel spectrogram: the input's layout and dims with the frequency axis of `nfilter` mel bands."""
    first, axis = a.first, _frequency_axis(a)
    dims = None
    if first.dims is not None and axis is not None and axis < len(first.dims):
        dims = tuple(a.args["nfilter"] if i == axis else d for i, d in enumerate(first.dims))
    return [OutputSpec(_FLOAT32, first.layout, dims)]


def _decibels(a: SpecArgs) -> list[OutputSpec]:
    """Float32 decibels of the input, in its layout and dims."""
    return [OutputSpec(_FLOAT32, a.first.layout, a.first.dims)]


def _mfcc(a: SpecArgs) -> list[OutputSpec]:
    """Float32 MFCCs: the input's layout and dims with min(n_mfcc, extent) coefficients along `axis`."""
    first, axis = a.first, a.args["axis"]
    dims = None
    if first.dims is not None and axis < len(first.dims):
        n = first.dims[axis]
        dims = tuple((min(a.args["n_mfcc"], n) if n >= 0 else -1) if i == axis else d
                     for i, d in enumerate(first.dims))
    return [OutputSpec(_FLOAT32, first.layout, dims)]


register(OpSchema(
    name="spectrogram",
    doc="Spectrogram of a 1D float32 signal (shape (n,), (n, 1) or (1, n)), as DALI's: windows of `window_length` "
        "samples every `window_step`, multiplied by `window_fn` (default DALI's Hann window "
        "0.5 * (1 - cos(2 * pi * (t + 0.5) / window_length))), zero-padded at the end to `nfft` and transformed; "
        "the output has nfft // 2 + 1 bins of |X|^power. With `center_windows` the signal is padded by "
        "window_length // 2 on both sides (mirrored without repeating the edge sample, or zeros) and there are "
        "n // window_step + 1 windows; without, (n - window_length) // window_step + 1 windows (rounded towards "
        "zero, as in DALI) inside the signal.",
    args=(
        Arg("nfft", "int", None, "Size of the FFT; default window_length. Must be at least window_length.",
            limits=_SIZE),
        Arg("window_length", "int", 512, "Window size in samples.", limits=_SIZE),
        Arg("window_step", "int", 256, "Step between windows in samples.", limits=_SIZE),
        Arg("window_fn", "float", None, "Samples of the window function (window_length values); default a Hann "
            "window.", list_of=True),
        Arg("power", "int", 2, "Exponent of the magnitude: 1 (amplitude) or 2 (power).", choices=(1, 2)),
        Arg("center_windows", "bool", True, "Pad the signal so that windows are centered at multiples of "
            "window_step."),
        Arg("reflect_padding", "bool", True, "With center_windows: mirror the signal at its ends (else pad with "
            "zeros)."),
        Arg("layout", "str", "ft", "Output layout: 'ft' (frequency-major) or 'tf' (time-major).",
            choices=("ft", "tf")),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_spectrogram,
))

register(OpSchema(
    name="mel_filter_bank",
    doc="Mel spectrogram from a spectrogram, as DALI's (and librosa's `filters.mel`): `nfilter` triangular filters "
        "evenly spaced on the mel scale between freq_low and freq_high over the frequency axis, whose nfft is "
        "2 * (bins - 1). The frequency axis is the input layout's 'f'; without a layout, the second last axis (the "
        "only one of 1D data).",
    args=(
        Arg("nfilter", "int", 128, "Number of mel filters.", limits=_COUNT),
        Arg("sample_rate", "float", 44100.0, "Sampling rate of the audio signal.", limits=Limits(0, 1 << 30)),
        Arg("freq_low", "float", 0.0, "The lowest frequency.", limits=Limits(0, 1 << 30)),
        Arg("freq_high", "float", 0.0, "The highest frequency; 0 means sample_rate / 2. At most sample_rate.",
            limits=Limits(0, 1 << 30)),
        Arg("normalize", "bool", True, "Scale each filter by 2 / (its band width in Hz), so that its integral is 1 "
            "(librosa's norm='slaney'); else each filter peaks at 1."),
        Arg("mel_formula", "str", "slaney", "Hz to mel: 'slaney' (linear below 1 kHz, logarithmic above, librosa's "
            "default) or 'htk' (2595 * log10(1 + f / 700)).", choices=("slaney", "htk")),
        Arg("axes", "int", None, "headrace: the frequency axis as an index, filled from the input's layout ('f'); "
            "give it only for data without a layout whose frequencies are not on the default axis.", list_of=True,
            list_len=(1, 1)),
        Arg("axis_names", "str", None, "headrace: the frequency axis as a layout letter (default 'f')."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_mel, default_axis_names="f",
))

register(OpSchema(
    name="to_decibels",
    doc="Decibels of a magnitude, as DALI's: multiplier * log10(max(min_ratio, x / reference)) with "
        "min_ratio = 10 ** (cutoff_db / multiplier); without `reference`, each sample's maximum (at least 0) is "
        "the reference.",
    args=(
        Arg("multiplier", "float", 10.0, "Factor of the logarithm: 10 for power, 20 for amplitude."),
        Arg("reference", "float", None, "Reference magnitude (not 0); default each sample's maximum."),
        Arg("cutoff_db", "float", -200.0, "The lowest ratio in dB: smaller values saturate there."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_decibels,
))

register(OpSchema(
    name="mfcc",
    doc="Mel-frequency cepstral coefficients of a mel spectrogram, as DALI's: a DCT (types 1 to 4 as Wikipedia "
        "defines them, without scipy's factor 2; orthonormal with `normalize`, librosa's norm='ortho') along "
        "`axis`, keeping the first min(n_mfcc, extent) coefficients, then liftered with "
        "1 + (lifter / 2) * sin(pi * (i + 1) / lifter) when lifter is not 0.",
    args=(
        Arg("axis", "int", 0, "Axis of the transform (the mel axis of 'ft' data).", limits=Limits(0, 63)),
        Arg("dct_type", "int", 2, "DCT type: 1, 2, 3 or 4.", choices=(1, 2, 3, 4)),
        Arg("lifter", "float", 0.0, "Cepstral liftering coefficient; 0 for none."),
        Arg("n_mfcc", "int", 20, "Number of coefficients.", limits=_COUNT),
        Arg("normalize", "bool", False, "Use the orthonormal DCT basis (not with dct_type 1)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_mfcc,
))
