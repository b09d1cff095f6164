"""Run one op (or a small graph) over given samples, in headrace and, where installed, in DALI's CPU build."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from headrace import fn, pipeline_def

try:
    import nvidia.dali as _dali  # noqa: F401

    HAS_DALI = True
except ImportError:  # DALI's CPU build is optional: tests marked `dali` skip without it
    HAS_DALI = False

needs_dali = pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")


def _as_list(outputs) -> list:
    return list(outputs) if isinstance(outputs, tuple | list) else [outputs]


def run_headrace(build: Callable, samples: Sequence[np.ndarray], *more: Sequence[np.ndarray], seed: int = 1,
                 num_threads: int = 1, iterations: int = 1) -> list:
    """Feed `samples` (and each batch of `more`, to further inputs) as one batch to `build(node, ...)` and return,
    per output, the list of output samples (a list of those per iteration when iterations > 1)."""
    batches = [samples, *more]
    names = [f"x{i}" for i in range(len(batches))]

    @pipeline_def(batch_size=len(samples), num_threads=num_threads, device_id=None, seed=seed)
    def pipe():
        return tuple(_as_list(build(*[fn.external_source(name=n) for n in names])))

    p = pipe()
    results = []
    for _ in range(iterations):
        outs = p.run(**{n: [np.asarray(s) for s in b] for n, b in zip(names, batches, strict=True)})
        results.append([[np.array(o.at(i)) for i in range(len(o))] for o in outs])
    p.close()
    return results[0] if iterations == 1 else results


def _constant_source(batch: list) -> Callable[[], list]:
    return lambda: batch


def run_dali(build: Callable, samples: Sequence[np.ndarray], *more: Sequence[np.ndarray], seed: int = 1) -> list:
    """The same in DALI's CPU build; `build` receives the input nodes and then DALI's `fn`."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    batches = [[np.ascontiguousarray(s) for s in b] for b in (samples, *more)]

    @dali_pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=seed)
    def pipe():
        nodes = [dfn.external_source(source=_constant_source(b)) for b in batches]
        return tuple(_as_list(build(*nodes, dfn)))

    p = pipe()
    p.build()
    outs = p.run()
    return [[np.array(o.at(i)) for i in range(len(o))] for o in outs]
