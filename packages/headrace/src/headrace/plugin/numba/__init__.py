"""DALI's numba plugin path: `from headrace.plugin.numba.fn.experimental import numba_function`, the `fn` namespace
as an attribute (`plugin.numba.fn.experimental.numba_function`) and the legacy operator class `NumbaFunction`."""

from collections.abc import Callable
from typing import Any

from headrace import ops
from headrace.plugin.numba import fn
from headrace.plugin.numba.fn import experimental  # noqa: F401 - `fn.experimental` as an attribute, as DALI's


class NumbaFunction(ops.experimental.NumbaFunction):
    """DALI's `nvidia.dali.plugin.numba.NumbaFunction`, with its positional arguments: `NumbaFunction(run_fn,
    out_types, in_types, outs_ndim, ins_ndim, setup_fn=None, device="cpu", batch_processing=False)(*inputs)`."""

    def __init__(self, run_fn: Callable, out_types: list, in_types: list, outs_ndim: list, ins_ndim: list,
                 setup_fn: Callable | None = None, device: str = "cpu", batch_processing: bool = False,
                 blocks: list | None = None, threads_per_block: list | None = None, **kwargs: Any):
        given = {"setup_fn": setup_fn, "blocks": blocks, "threads_per_block": threads_per_block}
        super().__init__(run_fn=run_fn, out_types=out_types, in_types=in_types, outs_ndim=outs_ndim,
                         ins_ndim=ins_ndim, device=device, batch_processing=batch_processing,
                         **{k: v for k, v in given.items() if v is not None}, **kwargs)


__all__ = ["NumbaFunction", "fn"]
