"""Run one op over given samples, in headrace and (where installed) in DALI's CPU build, for the op tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np
import pytest

HAS_DALI = importlib.util.find_spec("nvidia") is not None and importlib.util.find_spec("nvidia.dali") is not None
needs_dali = [pytest.mark.dali, pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")]


def _resolve(namespace, path: str):
    for part in path.split("."):
        namespace = getattr(namespace, part)
    return namespace


def _constant_source(samples: Sequence[np.ndarray]):
    """A batch source with no parameters (DALI reads a parameter as a request for batch info)."""
    return lambda: list(samples)


def _build(api, op: str, inputs: Sequence[Sequence[np.ndarray]], arg_inputs: dict | None, layout: str | None,
           kwargs: dict):
    fn = api.fn
    batch = len(inputs[0])

    @api.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_constant_source(samples), batch=True,
                                    **({"layout": layout} if layout and i == 0 else {}))
                 for i, samples in enumerate(inputs)]
        args = {name: fn.external_source(source=_constant_source(samples), batch=True)
                for name, samples in (arg_inputs or {}).items()}
        return _resolve(fn, op)(*nodes, **args, **kwargs)

    return pipe()


def run_headrace(op: str, *inputs: Sequence[np.ndarray], arg_inputs: dict | None = None, layout: str | None = None,
                 **kwargs) -> list[np.ndarray]:
    """The op's output samples for `inputs` (one list of samples per op input)."""
    import headrace

    pipe = _build(headrace, op, inputs, arg_inputs, layout, kwargs)
    (out,) = pipe.run()
    pipe.close()
    return [np.array(out.at(i)) for i in range(len(out))]


def run_dali(op: str, *inputs: Sequence[np.ndarray], arg_inputs: dict | None = None, layout: str | None = None,
             **kwargs) -> list[np.ndarray]:
    """The same through NVIDIA DALI's CPU operators."""
    from nvidia import dali

    pipe = _build(dali, op, inputs, arg_inputs, layout, kwargs)
    pipe.build()
    (out,) = pipe.run()
    return [np.array(out.at(i)) for i in range(len(out))]


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def assert_specs_agree(pipe, **feed) -> None:
    """Every output's declared spec (element type, dims, layout) against what the CPU pipeline gives."""
    for out, batch in zip(pipe.outputs, pipe.run(**feed), strict=True):
        assert out.spec.dtype == batch.dtype, (out.op.schema.name, out.spec, batch.dtype)
        for i in range(len(batch)):
            shape = np.asarray(batch.at(i)).shape
            assert len(shape) == len(out.spec.dims), (out.op.schema.name, out.spec, shape)
            assert all(d in (-1, s) for d, s in zip(out.spec.dims, shape, strict=True)), (out.spec, shape)
        assert not batch.layout() or batch.layout() == out.spec.layout, (out.spec, batch.layout())
    pipe.close()


def run_with_layouts(p) -> list[tuple[list[np.ndarray], str]]:
    """One run of a defined pipeline of either library: each output's (samples, layout), headrace's layout read from
    its graph where a batch lacks it, and headrace's declared output specs checked against the samples."""
    if hasattr(p, "build"):
        p.build()
    outs = p.run()
    headrace = not callable(getattr(p, "outputs", None))
    specs = [node.spec.layout for node in p.outputs] if headrace else [None] * len(outs)
    result = [([np.array(o.at(i)) for i in range(len(o))], o.layout() or spec or "")
              for o, spec in zip(outs, specs, strict=True)]
    if headrace:  # what the graph said of each output is what came
        for node, (samples, _) in zip(p.outputs, result, strict=True):
            spec_agrees(node.spec, samples)
    if hasattr(p, "close"):
        p.close()
    return result


def spec_agrees(spec, samples: list[np.ndarray]) -> None:
    """An output spec (dtype, dims with -1 where they vary) against the samples a CPU run gave."""
    for sample in samples:
        assert spec.dtype is None or sample.dtype == spec.dtype, (spec, sample.dtype)
        if spec.dims is not None:
            fits = all(d in (-1, n) for d, n in zip(spec.dims, sample.shape, strict=False))
            assert len(spec.dims) == sample.ndim and fits, (spec, sample.shape)


def cpu_kernel_outputs(op: str, inputs: list[list[np.ndarray]], args_list: list[dict]) -> list[list[np.ndarray]]:
    """The CPU kernel of `op` called sample by sample (sample i's stream: default_rng(i)): a list of samples per
    output (the reference the GPU kernels' host halves are compared with)."""
    from headrace_kernels.registry import get_cpu_kernel

    class Context:
        def __init__(self, index: int):
            self.rng = np.random.default_rng(index)

    kernel = get_cpu_kernel(op)
    results = [kernel([inp[i] for inp in inputs], args_list[i], Context(i)) for i in range(len(inputs[0]))]
    results = [r if isinstance(r, tuple) else (r,) for r in results]
    return [[np.asarray(r[k]) for r in results] for k in range(len(results[0]))] if results else []


def run_once(p):
    """One run of a defined pipeline of either library (built first, closed after where it can be): its one output
    batch."""
    p.build()
    (out,) = p.run()
    if hasattr(p, "close"):
        p.close()
    return out
