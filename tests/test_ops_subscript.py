"""DataNode indexing and slicing (`_tensor_subscript`): against DALI's CPU build (values, shapes, layouts; exact),
against numpy's basic indexing (exact), per-sample indices, errors, output specs, the pipeline file, and the GPU
kernel against the CPU one."""

from __future__ import annotations

import numpy as np
import pytest
from oprun import needs_dali

from headrace import Pipeline, SampleError, SchemaError, fn, pipeline_def, types
from headrace.graph import newaxis

RNG = np.random.default_rng(11)
IMAGES = [RNG.integers(0, 256, shape, dtype=np.uint8) for shape in ((40, 36, 3), (31, 50, 3), (33, 17, 3))]
INDICES = [np.array(v, np.int32) for v in (1, -1, 0)]

# (description, expression): each is valid for every sample of IMAGES, in DALI and in numpy.
EXPRESSIONS = [
    ("x[5:25, 10:-5]", lambda x: x[5:25, 10:-5]),
    ("x[:, :, 1]", lambda x: x[:, :, 1]),
    ("x[-1]", lambda x: x[-1]),
    ("x[2:30:3, ::2]", lambda x: x[2:30:3, ::2]),
    ("x[::-1, 3:0:-2]", lambda x: x[::-1, 3:0:-2]),
    ("x[-100:100, 1]", lambda x: x[-100:100, 1]),
    ("x[10:2]", lambda x: x[10:2]),
    ("x[1, 2, 0]", lambda x: x[1, 2, 0]),
    ("x[:, :]", lambda x: x[:, :]),
    ("x[np.int64(3), -2:]", lambda x: x[np.int64(3), -2:]),
    ("x[np.array(2), np.uint8(1):]", lambda x: x[np.array(2), np.uint8(1):]),
]


def _numpy_index(expr, sample: np.ndarray) -> np.ndarray:
    return expr(sample)


def _run(lib: str, build, *batches, layout: str | None = "HWC") -> list[tuple[list[np.ndarray], str]]:
    """build(x, *per-sample inputs) in headrace or DALI's CPU build over one batch: (samples, layout) per output."""
    if lib == "dali":
        from nvidia.dali import fn as lib_fn
        from nvidia.dali import pipeline_def as lib_pipeline_def
    else:
        lib_fn, lib_pipeline_def = fn, pipeline_def

    def source(batch):
        return lambda: batch

    @lib_pipeline_def(batch_size=len(batches[0]), num_threads=1, device_id=None)
    def pipe():
        nodes = [lib_fn.external_source(source=source(b), **({"layout": layout} if k == 0 and layout else {}))
                 for k, b in enumerate(batches)]
        out = build(*nodes)
        return tuple(out) if isinstance(out, tuple) else (out,)

    p = pipe()
    p.build()
    outs = p.run()
    return [([np.array(o.at(i)) for i in range(len(o))], o.layout() or "") for o in outs]


@pytest.mark.parametrize("expr", [e for _, e in EXPRESSIONS], ids=[d for d, _ in EXPRESSIONS])
def test_indexing_matches_numpy(expr):
    (samples, _), = _run("headrace", expr, IMAGES)
    for got, image in zip(samples, IMAGES, strict=True):
        want = _numpy_index(expr, image)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.dali
@needs_dali
def test_indexing_matches_dali():
    exprs = [e for _, e in EXPRESSIONS]
    ours = _run("headrace", lambda x: tuple(e(x) for e in exprs), IMAGES)
    dali = _run("dali", lambda x: tuple(e(x) for e in exprs), IMAGES)
    for (description, _), (mine, my_layout), (theirs, their_layout) in zip(EXPRESSIONS, ours, dali, strict=True):
        assert my_layout == their_layout, (description, my_layout, their_layout)
        for a, b in zip(mine, theirs, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype, description
            np.testing.assert_array_equal(a, b, err_msg=description)


@pytest.mark.dali
@needs_dali
def test_per_sample_indices_and_bounds_match_dali():
    """A DataNode (one integer per sample) as an index, a range's bounds and its step."""
    steps = [np.array(v, np.int32) for v in (2, -1, 3)]

    def build(x, at, step):
        return x[at], x[:, at], x[at:], x[1:-2:step, at:at + 5]

    ours = _run("headrace", build, IMAGES, INDICES, steps)
    dali = _run("dali", build, IMAGES, INDICES, steps)
    for (mine, my_layout), (theirs, their_layout) in zip(ours, dali, strict=True):
        assert my_layout == their_layout
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    (indexed, _), = _run("headrace", lambda x, at: x[:, at], IMAGES, INDICES)
    for got, image, at in zip(indexed, IMAGES, INDICES, strict=True):
        np.testing.assert_array_equal(got, image[:, int(at)])


@pytest.mark.dali
@needs_dali
def test_index_computed_from_the_shape_matches_dali():
    """DALI's documented pattern: an INT64 index computed from `shape()` of 1-D samples (bytes of different sizes)."""
    raw = [np.arange(n, dtype=np.uint8) * 3 for n in (5, 12, 1)]

    def build(x):
        length = x.shape()[0]
        return x[length // 2], x[length - 1], x[:length // 2], length

    ours = _run("headrace", build, raw, layout=None)
    dali = _run("dali", build, raw, layout=None)
    for (mine, _), (theirs, _) in zip(ours, dali, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    assert [int(v) for v in ours[1][0]] == [int(r[-1]) for r in raw]


@pytest.mark.dali
@needs_dali
def test_newaxis_and_none_match_dali():
    """DALI's newaxis inserts a unit axis (named or not: unnamed clears the layout); None is a full range."""
    from nvidia.dali import newaxis as dali_newaxis

    def build(axis):
        return lambda x: (x[axis], x[axis("N"), 1], x[1, axis], x[None, 2], x[:, axis("A"), 0])

    ours = _run("headrace", build(newaxis), IMAGES)
    dali = _run("dali", build(dali_newaxis), IMAGES)
    for (mine, my_layout), (theirs, their_layout) in zip(ours, dali, strict=True):
        assert my_layout == their_layout
        for a, b in zip(mine, theirs, strict=True):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def test_ellipsis_is_numpy_s():
    """`...` (DALI has none) stands for the axes the other subscripts leave out."""
    exprs = [lambda x: x[..., 1], lambda x: x[2, ..., 0], lambda x: x[...], lambda x: x[1:, ..., ::-1]]
    outs = _run("headrace", lambda x: tuple(e(x) for e in exprs), IMAGES)
    for expr, (samples, _) in zip(exprs, outs, strict=True):
        for got, image in zip(samples, IMAGES, strict=True):
            np.testing.assert_array_equal(got, expr(image))
    assert [layout for _, layout in outs] == ["HW", "W", "HWC", "HWC"]


@pytest.mark.parametrize("expr, match", [
    (lambda x: x[40], "index 40 .*out of range for axis 0 of length 40"),
    (lambda x: x[:, -51], "out of range for axis 1"),
    (lambda x: x[::0], "step cannot be zero"),
    (lambda x: x[:, :, :, :], "too many indices"),
    (lambda x: x[1, 2, 3, 0], "too many indices"),
])
def test_bad_indices_are_sample_errors(expr, match):
    with pytest.raises(SampleError, match=match) as info:
        _run("headrace", expr, IMAGES)
    assert "_tensor_subscript" in str(info.value)


@pytest.mark.parametrize("expr, match", [
    (lambda x: x[1.5], "integer or a DataNode"),
    (lambda x: x["a"], "integer or a DataNode"),
    (lambda x: x[[0, 1]], "integer or a DataNode"),
    (lambda x: x[True], "integer or a DataNode"),
    (lambda x: x[0.5:2], "range's lo"),
    (lambda x: x[..., ...], "only one"),
    (lambda x: x[..., newaxis], "newaxis after"),
    (lambda x: x[newaxis("A"), newaxis], "every newaxis"),
    (lambda x: x[(0,) * 33], "at most 32"),
])
def test_bad_subscripts_fail_at_definition(expr, match):
    with pytest.raises(SchemaError, match=match):
        _run("headrace", expr, IMAGES)


def test_a_datanode_is_not_iterable():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(name="x")
        return list(x)

    with pytest.raises(TypeError, match="not iterable"):
        pipe()


def test_a_float_or_gpu_index_is_refused():
    with pytest.raises(SampleError, match="'at_0'.*expected int"):
        _run("headrace", lambda x, at: x[at], IMAGES, [np.array(1.5, np.float32)] * 3)
    with pytest.raises(SampleError, match="'at_0'"):
        _run("headrace", lambda x, at: x[at], IMAGES, [np.array([1, 2], np.int32)] * 3)
    with pytest.raises(SchemaError, match="argument inputs live on the CPU"):
        _run("headrace", lambda x, at: x[at.gpu()], IMAGES, INDICES)


def test_output_specs_agree_with_the_data():
    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(name="x", ndim=3, layout="HWC", dtype=types.UINT8)
        at = fn.external_source(name="at")
        return x[5:25, 10:-5], x[:, :, 1], x[-1], x[at], x[2:30:3, ::2], x[..., 0], x[newaxis("N")]

    p = pipe()
    specs = [o.spec for o in p.outputs]
    assert [s.layout for s in specs] == ["HWC", "HW", "WC", "WC", "HWC", "HW", "NHWC"]
    for spec, out in zip(specs, p.run(x=IMAGES, at=INDICES), strict=True):
        assert out.layout() == spec.layout
        for i in range(len(out)):
            sample = np.asarray(out.at(i))
            assert sample.dtype == spec.dtype and sample.ndim == len(spec.dims)
            assert all(want in (-1, got) for want, got in zip(spec.dims, sample.shape, strict=True))
    assert specs[0].dims == (-1, -1, -1) and specs[1].dims == (-1, -1) and specs[6].dims == (1, -1, -1, -1)


def test_fixed_extents_are_known_while_building():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(name="x", ndim=3, layout="HWC", dtype=types.UINT8)
        return fn.crop(x, crop=(10, 12))[2:-1:2, ::-3, 1]

    assert pipe().outputs[0].spec.dims == (4, 4)


def test_round_trip_through_the_pipeline_file():
    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(name="x", layout="HWC")
        at = fn.external_source(name="at")
        return x[5:25, 10:-5], x[at, ::2], x[..., 1]

    original = pipe()
    text = original.serialize()
    loaded = Pipeline.load(text)
    assert loaded.serialize() == text
    for a, b in zip(original.run(x=IMAGES, at=INDICES), loaded.run(x=IMAGES, at=INDICES), strict=True):
        assert a.layout() == b.layout()
        for i in range(len(a)):
            np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))


@pytest.mark.gpu
def test_gpu_matches_cpu():
    from tests.gpu_helpers import cpu_and_gpu

    for expr in [e for _, e in EXPRESSIONS] + [lambda x: x[..., 2], lambda x: x[newaxis, 1]]:
        cpu, gpu = cpu_and_gpu(IMAGES, lambda data, device, e=expr: e(data))
        for a, b in zip(cpu, gpu, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_gpu_per_sample_index_and_errors():
    batch = IMAGES

    def graph(data, device):
        at = fn.external_source(source=lambda: INDICES)
        return data[at, 1:]

    from tests.gpu_helpers import cpu_and_gpu

    cpu, gpu = cpu_and_gpu(batch, graph)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)
    from tests.gpu_helpers import run_graph

    with pytest.raises(SampleError, match="out of range"):
        run_graph(batch, lambda data, device: data[:, 49], "gpu")


@pytest.mark.parametrize("change, error, match", [
    ({"at_0": 1}, "PipelineFileError", "both an index"),
    ({"num_subscripts": 99}, "PipelineFileError", "num_subscripts"),
    ({"at_5": 1}, "SampleError", "'at_5' is beyond"),
])
def test_a_bad_subscript_node_in_a_pipeline_file_is_refused(change, error, match):
    import json

    import headrace

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(name="x")[1:, 2]

    content = json.loads(pipe().serialize())
    for node in content["nodes"]:
        if node["op"] == "_tensor_subscript":
            node["args"].update(change)
    with pytest.raises(getattr(headrace, error), match=match):
        Pipeline.load(json.dumps(content)).run(x=[np.zeros((4, 4))])
