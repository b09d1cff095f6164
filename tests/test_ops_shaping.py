"""expand_dims, squeeze, reinterpret, cast_like, element_extract and lookup_table against DALI's CPU operators
(exact: values, types, shapes, layouts), their errors, and the GPU kernels against the CPU ones (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_with_layouts

from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(5)


def _source(samples):
    """A batch source without parameters (DALI reads a parameter as a request for batch information)."""
    return lambda: list(samples)


def run_graph(api, graph, inputs: list[list[np.ndarray]], layout: str | None = None,
              device_id: int | None = None) -> list[tuple[list[np.ndarray], str]]:
    """graph(fn, *nodes) in a pipeline of `api` (headrace or nvidia.dali), node k fed inputs[k] (the first with
    `layout`); each output's (samples, layout), headrace's layout read from its graph where a batch lacks it."""

    @api.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=device_id, seed=1)
    def pipe():
        nodes = [api.fn.external_source(source=_source(s), batch=True, **({"layout": layout} if layout and not k
                                                                          else {}))
                 for k, s in enumerate(inputs)]
        out = graph(api.fn, *nodes)
        return tuple(out) if isinstance(out, list | tuple) else out

    return run_with_layouts(pipe())


def _headrace(graph, inputs, layout=None):
    import headrace

    return run_graph(headrace, graph, inputs, layout)


def _dali(graph, inputs, layout=None):
    from nvidia import dali

    return run_graph(dali, graph, inputs, layout)


def _same(ours, theirs) -> None:
    assert len(ours) == len(theirs)
    for (a_samples, a_layout), (b_samples, b_layout) in zip(ours, theirs, strict=True):
        assert a_layout == b_layout
        for a, b in zip(a_samples, b_samples, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(a, b)


MATRICES = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(12, dtype=np.int16).reshape(4, 3)]
UNITS = [RNG.normal(size=(1, 3, 1)).astype(np.float32), RNG.normal(size=(1, 5, 1)).astype(np.float32)]
IMAGES = [RNG.integers(0, 256, (2, 4, 3), dtype=np.uint8), RNG.integers(0, 256, (3, 4, 3), dtype=np.uint8)]
SEQUENCES = [RNG.integers(0, 256, (3, 2, 4), dtype=np.uint8), RNG.integers(0, 256, (4, 3, 4), dtype=np.uint8)]

# (name, graph, inputs, layout of the first input)
CASES = [
    ("expand_dims-front", lambda fn, x: fn.expand_dims(x, axes=[0]), [MATRICES], "HW"),
    ("expand_dims-named", lambda fn, x: fn.expand_dims(x, axes=[0], new_axis_names="F"), [MATRICES], "HW"),
    ("expand_dims-two", lambda fn, x: fn.expand_dims(x, axes=[2, 0], new_axis_names="CF"), [MATRICES], "HW"),
    ("expand_dims-scalar-axis", lambda fn, x: fn.expand_dims(x, axes=2, new_axis_names="C"), [MATRICES], "HW"),
    ("squeeze-axes", lambda fn, x: fn.squeeze(x, axes=[0, 2]), [UNITS], "FWC"),
    ("squeeze-names", lambda fn, x: fn.squeeze(x, axis_names="FC"), [UNITS], "FWC"),
    ("squeeze-to-scalar", lambda fn, x: fn.squeeze(x, axes=[0, 1]), [[np.ones((1, 1), np.uint8) * 7] * 2], "HW"),
    ("reinterpret-dtype", lambda fn, x: fn.reinterpret(x, dtype=types.UINT16),
     [[RNG.integers(0, 256, (2, 3, 4), dtype=np.uint8)] * 2], "HWC"),
    ("reinterpret-float-bits", lambda fn, x: fn.reinterpret(x, dtype=types.INT32), [UNITS], "FWC"),
    ("reinterpret-shape", lambda fn, x: fn.reinterpret(x, shape=[-1, 3]), [IMAGES], "HWC"),
    ("reinterpret-shape-layout", lambda fn, x: fn.reinterpret(x, shape=[4, -1], layout="AB"), [IMAGES], "HWC"),
    ("reinterpret-same-ndim", lambda fn, x: fn.reinterpret(x, shape=[4, -1, 1]), [IMAGES], "HWC"),
    ("reinterpret-rel", lambda fn, x: fn.reinterpret(x, rel_shape=[0.5, -1]), [IMAGES], "HWC"),
    ("reinterpret-rel-rounding", lambda fn, x: fn.reinterpret(x, rel_shape=[0.35, -1]),
     [[np.arange(40, dtype=np.uint8).reshape(10, 4)]], None),
    ("reinterpret-rel-extra-axis", lambda fn, x: fn.reinterpret(x, rel_shape=[1, 1, 1, -1]), [IMAGES], None),
    ("reinterpret-src-dims", lambda fn, x: fn.reinterpret(x, src_dims=[-1, 2, 1, 0]),
     [[np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]], None),
    ("reinterpret-src-dims-drop", lambda fn, x: fn.reinterpret(x, src_dims=[2, 1]),
     [[np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]], None),
    ("reinterpret-src-rel", lambda fn, x: fn.reinterpret(x, src_dims=[-1, 1, 0], rel_shape=[-1, 0.5, 2]),
     [[np.arange(600, dtype=np.uint8).reshape(300, 2, 1)]], "HWC"),
    ("reinterpret-layout", lambda fn, x: fn.reinterpret(x, layout="ABC"), [IMAGES], "HWC"),
    ("reinterpret-dtype-shape", lambda fn, x: fn.reinterpret(x, dtype=types.UINT16, shape=[12]),
     [[IMAGES[0]]], "HWC"),
    ("reinterpret-empty", lambda fn, x: fn.reinterpret(x, dtype=types.UINT16), [[np.zeros((2, 0), np.uint8)]], "HW"),
    ("reinterpret-shape-input", lambda fn, x, s: fn.reinterpret(x, s),
     [[IMAGES[0], IMAGES[1]], [np.array([6, 4], np.int32), np.array([-1, 2], np.int32)]], None),
    ("cast_like", lambda fn, x, y: fn.cast_like(x, y),
     [[np.array([1.5, -2.5, 300.7, np.nan], np.float32)] * 2, [np.zeros(1, np.uint8), np.zeros(2, np.uint8)]], None),
    ("cast_like-half", lambda fn, x, y: fn.cast_like(x, y),
     [[np.array([1.6, -2.5, 7e4], np.float32)], [np.zeros(1, np.float16)]], None),
    ("element_extract", lambda fn, x: fn.element_extract(x, element_map=[2, 0]), [SEQUENCES], "FHW"),
    ("element_extract-one", lambda fn, x: fn.element_extract(x, element_map=1), [SEQUENCES], None),
    ("lookup_table-doc", lambda fn, x: fn.lookup_table(x, keys=[0, 2, 3, 4, 5, 3],
                                                       values=[0.2, 0.4, 0.5, 0.6, 0.7, 0.1], default_value=0.99),
     [[np.array([1, 4, 1, 0, 100, 2, 3, 4, -1, 5, 6], np.int32)]], None),
    ("lookup_table-uint8", lambda fn, x: fn.lookup_table(x, keys=[0, 2], values=[10, 300.6], dtype=types.UINT8),
     [[np.arange(4, dtype=np.uint8).reshape(2, 2)]], "HW"),
    ("lookup_table-int64", lambda fn, x: fn.lookup_table(x, keys=[0, 65535], values=[1, 2]),
     [[np.array([0, 65535, 65536, 2**40, -3], np.int64)]], None),
    ("lookup_table-int8", lambda fn, x: fn.lookup_table(x, keys=[1], values=[5], default_value=-2, dtype=types.INT8),
     [[np.array([1, -128, 127], np.int8)]], None),
    ("lookup_table-round", lambda fn, x: fn.lookup_table(x, keys=[1], values=[2.5], default_value=-3.5,
                                                         dtype=types.INT32), [[np.array([1, 0], np.uint16)]], None),
    ("lookup_table-empty", lambda fn, x: fn.lookup_table(x), [[np.array([0, 1], np.int32)]], None),
]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("graph, inputs, layout", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_dali(graph, inputs, layout):
    _same(_headrace(graph, inputs, layout), _dali(graph, inputs, layout))


def test_per_sample_squeeze_axes():
    # DALI documents per-sample axes but its CPU build refuses them ("Missing argument axes"): numpy is the reference
    data = [RNG.normal(size=(1, 3)), RNG.normal(size=(4, 1))]
    axes = [np.array([0], np.int32), np.array([1], np.int32)]
    ((out, _),) = _headrace(lambda fn, x, a: fn.squeeze(x, axes=a), [data, axes])
    for got, sample, axis in zip(out, data, (0, 1), strict=True):
        np.testing.assert_array_equal(got, np.squeeze(sample, axis=axis))


def test_reinterpret_views_the_bytes():
    ((out, _),) = _headrace(lambda fn, x: fn.reinterpret(x, dtype=types.UINT32, shape=[2]),
                            [[np.array([1.0, -2.0], np.float32)]])
    np.testing.assert_array_equal(out[0], np.array([1.0, -2.0], np.float32).view(np.uint32))


@pytest.mark.parametrize("graph, inputs, error", [
    (lambda fn, x: fn.expand_dims(x, axes=[1, 1]), [MATRICES], r"expand_dims .*sample 0.*'axes' \[1, 1\] repeats"),
    (lambda fn, x: fn.expand_dims(x, axes=[3]), [MATRICES], r"'axes' \[3\]: 3 is not an axis of the 3-dimensional"),
    (lambda fn, x: fn.expand_dims(x, axes=[0, 1], new_axis_names="C"), [MATRICES],
     r"'new_axis_names' 'C' names 1 axes, 'axes' \[0, 1\] has 2"),
    (lambda fn, x: fn.squeeze(x, axes=[1]), [UNITS], r"squeeze .*sample 0.*shape \(1, 3, 1\) has an extent other"),
    (lambda fn, x: fn.squeeze(x, axes=[-1]), [UNITS], r"'axes' \[-1\]: -1 is not an axis of a sample of shape"),
    (lambda fn, x: fn.reinterpret(x, dtype=types.UINT16), [[np.zeros((2, 3), np.uint8)]],
     r"reinterpret .*sample 0.*'dtype'.*\(2, 3\).*not a multiple of the new type's 2 bytes"),
    (lambda fn, x: fn.reinterpret(x, shape=[5]), [[np.zeros(4, np.uint8)]], r"'shape': shape \[5\] .* 5 bytes"),
    (lambda fn, x: fn.reinterpret(x, shape=[2, 2], layout="HWC"), [[np.zeros(4, np.uint8)]],
     r"'layout' 'HWC' has 3 letters; the output has 2 dimensions"),
    (lambda fn, x: fn.element_extract(x, element_map=[3]), [SEQUENCES], r"element_extract .*sample 0.*3 is not an el"),
    (lambda fn, x: fn.element_extract(x, element_map=[0]), [[np.zeros(3, np.uint8)]], r"needs sequences"),
    (lambda fn, x: fn.lookup_table(x, keys=[1], values=[1.0]), [[np.zeros(2, np.float32)]],
     r"lookup_table .*sample 0.*integer inputs"),
    (lambda fn, x: fn.lookup_table(x, keys=[1, 2], values=[1.0]), [[np.zeros(2, np.int32)]],
     r"'keys' \(2\) and 'values' \(1\) must have the same length"),
])
def test_bad_samples_name_op_sample_and_argument(graph, inputs, error):
    with pytest.raises(SampleError, match=error):
        _headrace(graph, inputs)


def test_bad_arguments_are_refused_while_building():
    with pytest.raises(SchemaError, match=r"lookup_table .*'keys'.*<= 65535"):
        _headrace(lambda fn, x: fn.lookup_table(x, keys=[70000], values=[1.0]), [[np.zeros(1, np.int32)]])
    with pytest.raises(SchemaError, match=r"squeeze .*give the axes to remove"):
        _headrace(lambda fn, x: fn.squeeze(x), [UNITS])
    with pytest.raises(SchemaError, match=r"reinterpret .*mutually exclusive"):
        _headrace(lambda fn, x: fn.reinterpret(x, shape=[3], rel_shape=[1.0]), [UNITS])
    with pytest.raises(SchemaError, match=r"squeeze .*'Z'.*not in the input's layout 'FWC'"):
        _headrace(lambda fn, x: fn.squeeze(x, axis_names="Z"), [UNITS], "FWC")
    with pytest.raises(SampleError, match=r"reinterpret changes nothing"):
        _headrace(lambda fn, x: fn.reinterpret(x), [UNITS])


@pytest.mark.gpu
@pytest.mark.parametrize("graph, inputs, layout", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gpu_matches_cpu(graph, inputs, layout):
    import headrace

    def on_gpu(fn, *nodes):
        outs = graph(fn, *(n.gpu() for n in nodes))
        return [o.cpu() for o in (outs if isinstance(outs, list | tuple) else [outs])]

    cpu = run_graph(headrace, graph, inputs, layout, device_id=0)
    gpu = run_graph(headrace, on_gpu, inputs, layout, device_id=0)
    _same(gpu, cpu)


def test_pipeline_file_round_trip(tmp_path):
    from headrace import Pipeline, fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=12)
    def pipe():
        x = fn.external_source(name="x", layout="FHW")  # fed: a file keeps no Python source
        second, first = fn.element_extract(x, element_map=[1, 0])
        return (second, fn.reinterpret(first, dtype=types.INT16, shape=[-1]), fn.squeeze(fn.expand_dims(
            first, axes=[0], new_axis_names="F"), axis_names="F"), fn.lookup_table(first, keys=[3, 7], values=[1, 2]),
                fn.cast_like(first, second))

    first = pipe()
    first.serialize(tmp_path / "pipe.json")
    second = Pipeline.load(tmp_path / "pipe.json")
    for a, b in zip(first.run(x=SEQUENCES), second.run(x=SEQUENCES), strict=True):
        assert a.layout() == b.layout()
        for i in range(2):
            np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))
    first.close()
    second.close()
