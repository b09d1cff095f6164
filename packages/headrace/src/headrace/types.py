"""DALI-compatible type names: data types, image types, interpolation types, layouts and `Constant`."""

from __future__ import annotations

import enum

import numpy as np


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

# Layout names are plain strings, as in DALI ("HWC", "CHW", ...).
NHWC = "NHWC"
NCHW = "NCHW"
HWC = "HWC"
CHW = "CHW"

_NUMPY_OF = {
    DALIDataType.UINT8: np.uint8,
    DALIDataType.UINT16: np.uint16,
    DALIDataType.UINT32: np.uint32,
    DALIDataType.UINT64: np.uint64,
    DALIDataType.INT8: np.int8,
    DALIDataType.INT16: np.int16,
    DALIDataType.INT32: np.int32,
    DALIDataType.INT64: np.int64,
    DALIDataType.FLOAT16: np.float16,
    DALIDataType.FLOAT: np.float32,
    DALIDataType.FLOAT64: np.float64,
    DALIDataType.BOOL: np.bool_,
}
_DALI_OF = {np.dtype(v): k for k, v in _NUMPY_OF.items()}


def to_numpy_dtype(dtype: DALIDataType | int) -> np.dtype:
    """The numpy dtype of a DALI data type."""
    return np.dtype(_NUMPY_OF[DALIDataType(dtype)])


def from_numpy_dtype(dtype) -> DALIDataType:
    """The DALI data type of a numpy dtype."""
    try:
        return _DALI_OF[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"numpy dtype {np.dtype(dtype)} has no headrace equivalent") from None


def _default_constant_type(value, array: np.ndarray) -> DALIDataType:
    """DALI's rule: a numpy value keeps its integer or bool type (float64 becomes FLOAT); Python ints are INT32,
    floats FLOAT."""
    if array.dtype == np.bool_:
        return DALIDataType.BOOL
    from_numpy = isinstance(value, np.ndarray | np.generic)
    if np.issubdtype(array.dtype, np.integer):
        return from_numpy_dtype(array.dtype) if from_numpy else DALIDataType.INT32
    if from_numpy and array.dtype == np.float16:
        return DALIDataType.FLOAT16
    return DALIDataType.FLOAT


def Constant(value, shape=None, dtype=None, device: str = "cpu", layout: str | None = None):  # noqa: N802
    """A constant tensor as a graph node, like `nvidia.dali.types.Constant` (Python ints default to INT32, floats to
    FLOAT; a numpy value keeps its integer type)."""
    from headrace import fn

    array = np.asarray(value)
    dtype = DALIDataType(dtype) if dtype is not None else _default_constant_type(value, array)
    shape = list(shape) if shape is not None else list(array.shape)
    values = [float(v) for v in array.ravel().tolist()]
    return fn.constant(fdata=values, shape=shape, dtype=dtype, layout=layout or "", device=device)
