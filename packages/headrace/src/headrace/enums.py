"""The enums behind `headrace.types` (data, image and interpolation types, layout names) and their numpy mapping, in a
module that imports nothing of the graph, so that the graph and the schemas can use them (types.py adds `Constant`,
which builds a node)."""

from __future__ import annotations

import enum

import numpy as np

from headrace_kernels import dtypes


class DALIDataType(enum.IntEnum):
    """Element types, numbered as in DALI so that ported code and files agree."""

    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11


class DALIImageType(enum.IntEnum):
    """Colour spaces a decoder can produce."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(enum.IntEnum):
    """Resampling filters, with DALI's numbering."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


globals().update(DALIDataType.__members__)
globals().update(DALIImageType.__members__)
globals().update(DALIInterpType.__members__)

# Layout names are plain strings with DALI's values: its N-prefixed names are the layouts of a sample (types.NCHW is
# "CHW", what crop_mirror_normalize(output_layout=types.NCHW) asks for).
NHWC = "HWC"
NCHW = "CHW"
NFHWC = "FHWC"
NFCHW = "FCHW"
SAME = ""
HWC = "HWC"
CHW = "CHW"


def to_numpy_dtype(dtype: DALIDataType | int) -> np.dtype:
    """The numpy dtype of a DALI data type (headrace_kernels.dtypes holds the table)."""
    return dtypes.numpy_dtype(DALIDataType(dtype))


def from_numpy_dtype(dtype) -> DALIDataType:
    """The DALI data type of a numpy dtype; TypeError when there is none."""
    return DALIDataType(dtypes.dali_number(dtype))
