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


def run_headrace(build: Callable, samples: Sequence[np.ndarray], *, seed: int = 1, num_threads: int = 1,
                 iterations: int = 1) -> list[list[np.ndarray]]:
    """Feed `samples` as one batch to `build(node)` and return, per output, the list of output samples."""

    @pipeline_def(batch_size=len(samples), num_threads=num_threads, device_id=None, seed=seed)
    def pipe():
        return tuple(_as_list(build(fn.external_source(name="x"))))

    p = pipe()
    results = []
    for _ in range(iterations):
        outs = p.run(x=[np.asarray(s) for s in samples])
        results.append([[np.array(o.at(i)) for i in range(len(o))] for o in outs])
    p.close()
    return results[0] if iterations == 1 else results


def run_dali(build: Callable, samples: Sequence[np.ndarray], *, seed: int = 1) -> list[list[np.ndarray]]:
    """The same, in DALI's CPU build (`build` receives DALI's `fn` as its second argument)."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    batch = [np.ascontiguousarray(s) for s in samples]

    @dali_pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=seed)
    def pipe():
        return tuple(_as_list(build(dfn.external_source(source=lambda: batch), dfn)))

    p = pipe()
    p.build()
    outs = p.run()
    return [[np.array(o.at(i)) for i in range(len(o))] for o in outs]
