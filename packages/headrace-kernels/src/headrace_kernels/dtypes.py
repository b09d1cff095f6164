"""The element types, in one table: DALI's data type numbers (`headrace.types.DALIDataType`, the type codes of
kernels/cast.cu) to numpy dtypes and back, and the C++ type names the CUDA kernels are instantiated with."""

from __future__ import annotations

import numpy as np

# DALI data type number -> numpy dtype; the names are DALIDataType's.
NUMPY_TYPES: dict[int, np.dtype] = {number: np.dtype(t) for number, t in enumerate(
    (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
     np.float64, np.bool_))}
_NUMBERS = {dtype: number for number, dtype in NUMPY_TYPES.items()}

# numpy dtype name -> the C++ type of a kernel template argument (half_bits: kernels/common.cuh's float16 bits).
CTYPES = {"uint8": "unsigned char", "int8": "signed char", "uint16": "unsigned short", "int16": "short",
          "uint32": "unsigned int", "int32": "int", "uint64": "unsigned long long", "int64": "long long",
          "float16": "half_bits", "float32": "float", "float64": "double"}


def numpy_dtype(dtype: int) -> np.dtype:
    """The numpy dtype of a DALI data type number (a DALIDataType is one)."""
    return NUMPY_TYPES[int(dtype)]


def dali_number(dtype) -> int:
    """The DALI data type number of a numpy dtype; TypeError when DALI has none."""
    try:
        return _NUMBERS[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"numpy dtype {np.dtype(dtype)} has no headrace equivalent") from None
