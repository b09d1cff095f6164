"""DALI-compatible type names: data types, image types, interpolation types, layouts and `Constant`."""

from __future__ import annotations

import numpy as np

from headrace.enums import (  # noqa: F401 - the DALI names, re-exported
    CHW,
    HWC,
    NCHW,
    NFCHW,
    NFHWC,
    NHWC,
    SAME,
    DALIDataType,
    DALIImageType,
    DALIInterpType,
    from_numpy_dtype,
    to_numpy_dtype,
)
from headrace.errors import SchemaError
from headrace.graph import DataNode, DeferredConstant, ScalarConstant, constant_node, current_graph

CPU_ONLY_DEVICE_ID = -99999
"""DALI's device id of a pipeline without a GPU (headrace's Pipeline takes it as device_id=None)."""

globals().update(DALIDataType.__members__)
globals().update(DALIImageType.__members__)
globals().update(DALIInterpType.__members__)


def to_numpy_type(dali_type: DALIDataType | int) -> type:
    """The numpy scalar type of a DALI data type (`types.to_numpy_type(types.FLOAT)` is numpy.float32), as DALI's."""
    return to_numpy_dtype(dali_type).type


def to_dali_type(framework_type) -> DALIDataType:
    """The DALI data type of a numpy type or dtype (or its name), as DALI's; TypeError when there is none."""
    try:
        return from_numpy_dtype(np.dtype(framework_type))
    except (TypeError, KeyError, ValueError):
        raise TypeError(f"'{framework_type}' could not be converted into any known DALIDataType.") from None


def Constant(value, dtype=None, shape=None, layout: str | None = None,  # noqa: N802
             device: str | None = None) -> DataNode | ScalarConstant | DeferredConstant:
    """A constant tensor, like `nvidia.dali.types.Constant` (same argument order; Python ints default to INT32,
    floats to FLOAT; a numpy value keeps its integer type). Inside a pipeline definition it is a constant node; a
    scalar made outside one (no shape, layout or device) is a ScalarConstant, which becomes a scalar operand, an
    argument value or a constant node where a pipeline uses it, as in DALI; any other constant made outside one is a
    DeferredConstant, which becomes a constant node where a pipeline uses it."""
    if _in_pipeline():
        return constant_node(value, shape, dtype, device or "cpu", layout)
    if np.ndim(value) == 0 and not shape and layout is None and device is None:
        return ScalarConstant(value, dtype)
    return DeferredConstant(value, dtype, shape, layout, device)


def _in_pipeline() -> bool:
    try:
        current_graph()
    except SchemaError:
        return False
    return True


class SampleInfo:
    """What a per-sample `external_source` callable receives, as DALI's SampleInfo: the sample's index in the epoch
    and in its batch, the batch's number in the epoch and the epoch's number."""

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int, epoch_idx: int = 0):
        self.idx_in_epoch, self.idx_in_batch = idx_in_epoch, idx_in_batch
        self.iteration, self.epoch_idx = iteration, epoch_idx

    def __repr__(self) -> str:
        return (f"SampleInfo(idx_in_epoch={self.idx_in_epoch}, idx_in_batch={self.idx_in_batch}, "
                f"iteration={self.iteration}, epoch_idx={self.epoch_idx})")


class BatchInfo(int):
    """What a batch `external_source` callable receives with batch_info=True, as DALI's BatchInfo (`iteration`,
    `epoch_idx`). It is also the int of its iteration, which headrace's earlier form passed."""

    iteration: int
    epoch_idx: int

    def __new__(cls, iteration: int, epoch_idx: int = 0) -> BatchInfo:
        info = super().__new__(cls, iteration)
        info.iteration, info.epoch_idx = int(iteration), int(epoch_idx)
        return info

    def __reduce__(self):  # sent to a spawned worker: rebuilt with both fields
        return (BatchInfo, (self.iteration, self.epoch_idx))

    def __repr__(self) -> str:
        return f"BatchInfo(iteration={self.iteration}, epoch_idx={self.epoch_idx})"
