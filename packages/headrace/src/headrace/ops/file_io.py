"""Schemas of `io.file.read` (a file's bytes, named by an encoded path) and `decoders.numpy` (an array from the
bytes of a .npy file), as DALI's."""

from __future__ import annotations

import numpy as np

from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _file_bytes(a: SpecArgs) -> list[OutputSpec]:
    """The file's bytes: a 1D uint8 array."""
    return [OutputSpec(np.dtype(np.uint8), None, (-1,), "file contents")]


def _decoded_npy(a: SpecArgs) -> list[OutputSpec]:
    """The array stored in the .npy bytes: its own shape, element type `dtype` (default the file's)."""
    return [OutputSpec(numpy_dtype(a.literal("dtype")), None, None)]


register(OpSchema(
    name="io.file.read",
    doc="Reads the whole file whose path is the input, a 1D uint8 (or int8) array of the path's UTF-8 bytes (as "
        "np.frombuffer(path.encode('utf-8'), dtype=np.uint8) makes it), as DALI's. The output is the file's bytes "
        "(uint8). Only regular files of at most 2 GiB are read.",
    args=(
        Arg("dont_use_mmap", "bool", False, "Accepted for DALI compatibility; headrace reads the file with plain "
            "reads either way."),
        Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility; headrace reads through the page "
            "cache either way."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu",),
    state="none", output_spec=_file_bytes,
))

register(OpSchema(
    name="decoders.numpy",
    doc="Decodes the bytes of a .npy file (a 1D uint8 array, e.g. from io.file.read) into its array, as DALI's: "
        "its shape and element type, C or Fortran order (the output is C-ordered). Little-endian numeric and bool "
        "arrays only; `dtype` converts the values (saturating, as DALI's casts).",
    args=(
        Arg("dtype", "dtype", None, "Output element type; default the file's."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu",),
    state="none", output_spec=_decoded_npy,
))
