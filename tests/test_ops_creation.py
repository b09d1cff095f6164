"""zeros, ones, full and their `_like` forms against DALI's CPU operators (exact: values, types, shapes, layouts),
their errors, and the GPU kernels against the CPU ones (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_with_layouts

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(7)
DATA = [RNG.integers(0, 100, (2, 3), dtype=np.uint16), RNG.integers(0, 100, (4, 1), dtype=np.uint16)]
FILLS = [np.array([[1.5, -2.5, 300.7]], np.float32), np.array([[7.0], [-1.2]], np.float32)]


def _source(samples: list[np.ndarray]):
    """A batch source without parameters (DALI reads a parameter as a request for batch information)."""
    return lambda: list(samples)


def _run(api, graph, feeds: dict[str, list[np.ndarray]], batch_size: int = 2,
         device_id: int | None = None) -> list[tuple[list, str]]:
    """graph(fn, nodes) in a pipeline of `api` (headrace or nvidia.dali), its external sources fed `feeds`; returns
    each output's (samples, layout)."""

    @api.pipeline_def(batch_size=batch_size, num_threads=1, device_id=device_id, seed=1)
    def pipe():
        nodes = {name: api.fn.external_source(source=_source(samples), batch=True,
                                              **({"layout": "HW"} if name == "data" else {}))
                 for name, samples in feeds.items()}
        out = graph(api.fn, nodes)
        return tuple(out) if isinstance(out, list | tuple) else out

    return run_with_layouts(pipe())


def _headrace(graph, feeds=None, batch_size=2):
    import headrace

    return _run(headrace, graph, feeds or {}, batch_size)


def _dali(graph, feeds=None, batch_size=2):
    from nvidia import dali

    return _run(dali, graph, feeds or {}, batch_size)


def _same(ours, theirs) -> None:
    for (a_samples, a_layout), (b_samples, b_layout) in zip(ours, theirs, strict=True):
        assert a_layout == b_layout
        for a, b in zip(a_samples, b_samples, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(a, b)


FEEDS = {"data": DATA, "fill": FILLS, "scalar": [np.array(5, np.int16), np.array(-3, np.int16)]}
GRAPHS = {
    "zeros": lambda fn, n: [fn.zeros(), fn.zeros(shape=[2, 3]), fn.zeros(shape=4, dtype=types.FLOAT16),
                            fn.zeros(shape=[0, 2], dtype=types.BOOL)],
    "ones": lambda fn, n: [fn.ones(), fn.ones(shape=[2, 3, 1], layout="HWC"), fn.ones(shape=[3], dtype=types.UINT8),
                           fn.ones(shape=[2], dtype=types.FLOAT)],
    "like": lambda fn, n: [fn.zeros_like(n["data"]), fn.ones_like(n["data"]),
                           fn.ones_like(n["data"], dtype=types.FLOAT), fn.zeros_like(n["data"], dtype=types.INT8)],
    "full": lambda fn, n: [fn.full(n["fill"], shape=[2, 3]), fn.full(n["fill"], shape=[4, 2, 3]),
                           fn.full(n["scalar"], shape=[3, 2]), fn.full(n["scalar"])],
    "full_like": lambda fn, n: [fn.full_like(n["same"], n["fill"]), fn.full_like(n["data"], n["scalar"])],
}
USES = {"zeros": (), "ones": (), "like": ("data",), "full": ("fill", "scalar"),
        "full_like": ("same", "data", "fill", "scalar")}


def _feeds(name: str) -> dict[str, list[np.ndarray]]:
    feeds = dict(FEEDS, same=[DATA[0], DATA[0].reshape(3, 2).T.copy()])  # (2, 3) samples: every fill broadcasts
    return {k: feeds[k] for k in USES[name]}


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_matches_dali(name):
    _same(_headrace(GRAPHS[name], _feeds(name)), _dali(GRAPHS[name], _feeds(name)))


@needs_dali[0]
@needs_dali[1]
def test_per_sample_shapes_match_dali():
    feeds = {"shape": [np.array([2, 3], np.int32), np.array([1, 4], np.int32)],
             "fill": [np.array([[1.0], [2.0]], np.float32), np.array([[9.0]], np.float32)]}

    def graph(fn, n):
        return [fn.zeros(shape=n["shape"]), fn.ones(shape=n["shape"], dtype=types.INT64),
                fn.full(n["fill"], shape=n["shape"])]

    _same(_headrace(graph, feeds), _dali(graph, feeds))


def test_values_types_and_shapes():
    (zeros, _), (ones, layout) = _headrace(lambda fn, n: [fn.zeros(shape=[2, 2]),
                                                          fn.ones(shape=[1, 2], layout="AB")])
    assert zeros[0].dtype == np.int32 and not zeros[0].any() and zeros[0].shape == (2, 2)
    assert ones[0].dtype == np.int32 and (ones[0] == 1).all() and layout == "AB"
    ((filled, _),) = _headrace(lambda fn, n: fn.full(n["fill"], shape=[2, 3]), {"fill": FILLS[:1] * 2})
    np.testing.assert_array_equal(filled[0], np.tile(FILLS[0], (2, 1)))  # (1, 3) fill, 2 rows
    ((like, like_layout),) = _headrace(lambda fn, n: fn.full_like(n["data"], n["fill"]),
                                       {"data": [DATA[0]] * 2, "fill": FILLS[:1] * 2})
    # float to uint16: rounded half away from zero, saturated at 0
    np.testing.assert_array_equal(like[0], np.tile(np.array([2, 0, 301], np.uint16), (2, 1)))
    assert like_layout == "HW"


def test_bad_arguments_name_op_sample_and_argument():
    with pytest.raises(SampleError, match=r"full .*sample 1.*\(1, 2\) does not broadcast to the output shape "
                                          r"\(2, 3\)"):
        _headrace(lambda fn, n: fn.full(n["fill"], shape=[2, 3]),
                  {"fill": [np.ones((1, 3), np.float32), np.ones((1, 2), np.float32)]})
    with pytest.raises(SampleError, match=r"zeros .*sample 0.*'shape' \[2, -1\] has a negative extent"):
        _headrace(lambda fn, n: fn.zeros(shape=[2, -1]))
    with pytest.raises(SampleError, match=r"ones .*'layout' 'HWC' has 3 dimensions, but 'shape' \[2, 2\] has 2"):
        _headrace(lambda fn, n: fn.ones(shape=[2, 2], layout="HWC"))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_gpu_matches_cpu(name):
    import headrace

    def graph(device):
        def build(fn, n):
            if name in ("zeros", "ones"):  # no input to follow onto the GPU: the device is asked for
                make = getattr(fn, name)
                outs = [make(device=device), make(shape=[2, 3], device=device),
                        make(shape=[3], dtype=types.UINT8, device=device)]
            else:
                outs = GRAPHS[name](fn, {k: v.gpu() if device == "gpu" else v for k, v in n.items()})
            return [o.cpu() for o in outs] if device == "gpu" else outs
        return build

    cpu = _run(headrace, graph("cpu"), _feeds(name), device_id=0)
    gpu = _run(headrace, graph("gpu"), _feeds(name), device_id=0)
    _same(gpu, cpu)
