"""DALI-compatible type names: data types, image types, interpolation types, layouts and `Constant`."""

from __future__ import annotations

from headrace.enums import (  # noqa: F401 - the DALI names, re-exported
    CHW,
    HWC,
    NCHW,
    NHWC,
    DALIDataType,
    DALIImageType,
    DALIInterpType,
    from_numpy_dtype,
    to_numpy_dtype,
)
from headrace.graph import DataNode, constant_node

globals().update(DALIDataType.__members__)
globals().update(DALIImageType.__members__)
globals().update(DALIInterpType.__members__)


def Constant(value, shape=None, dtype=None, device: str = "cpu", layout: str | None = None) -> DataNode:  # noqa: N802
    """A constant tensor as a graph node, like `nvidia.dali.types.Constant` (Python ints default to INT32, floats to
    FLOAT; a numpy value keeps its integer type)."""
    return constant_node(value, shape, dtype, device, layout)
