"""stack, cat, reshape, transpose, pad and one_hot against numpy, and DALI's CPU operators."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace, run_with_layouts

from headrace import fn, pipeline_def, types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(2)
A = [RNG.integers(0, 100, (3, 4), dtype=np.int32), RNG.integers(0, 100, (2, 5), dtype=np.int32)]
B = [RNG.integers(0, 100, (3, 4), dtype=np.int32), RNG.integers(0, 100, (2, 5), dtype=np.int32)]


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis):
    for got, a, b in zip(run_headrace("stack", A, B, axis=axis), A, B, strict=True):
        np.testing.assert_array_equal(got, np.stack([a, b], axis=axis))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cat(axis):
    for got, a, b in zip(run_headrace("cat", A, B, A, axis=axis), A, B, strict=True):
        np.testing.assert_array_equal(got, np.concatenate([a, b, a], axis=axis))


def test_stack_and_cat_take_types_constant_and_python_numbers():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.float32(1.5), np.float32(-2)], batch=True)
        return fn.stack(x, types.Constant(7.0)), fn.cat(types.Constant([1, 2]), [3])

    stacked, joined = pipe().run()
    np.testing.assert_array_equal(stacked.as_array(), [[1.5, 7.0], [-2.0, 7.0]])
    np.testing.assert_array_equal(joined.as_array(), [[1, 2, 3], [1, 2, 3]])


def test_mismatched_inputs_are_errors():
    with pytest.raises(SampleError, match="stack: inputs have different shapes"):
        run_headrace("stack", A, [b.T for b in B])
    with pytest.raises(SampleError, match="different types"):
        run_headrace("cat", A, [b.astype(np.float32) for b in B])


def test_reshape_forms():
    images = [np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.arange(48, dtype=np.uint8).reshape(4, 3, 4)]
    for got, x in zip(run_headrace("reshape", images, shape=[-1, 4]), images, strict=True):
        np.testing.assert_array_equal(got, x.reshape(-1, 4))
    for got, x in zip(run_headrace("reshape", images, rel_shape=[0.5, 1, 2]), images, strict=True):
        np.testing.assert_array_equal(got, x.reshape(x.shape[0] // 2, 3, 8))
    for got, x in zip(run_headrace("reshape", images, src_dims=[2, -1, 0, 1]), images, strict=True):
        np.testing.assert_array_equal(got, x.reshape(4, 1, x.shape[0], 3))  # relabels extents, keeps elements
    shapes = [np.array([4, 6], np.int32), np.array([6, 8], np.int32)]
    for got, x, s in zip(run_headrace("reshape", images, arg_inputs={"shape": shapes}), images, shapes, strict=True):
        np.testing.assert_array_equal(got, x.reshape(tuple(s)))
    with pytest.raises(SampleError, match=r"shape \[5, 5\] has 25 elements; the input \(2, 3, 4\) has 24"):
        run_headrace("reshape", images, shape=[5, 5])
    for got, x in zip(run_headrace("reshape", images, layout="FHW"), images, strict=True):
        np.testing.assert_array_equal(got, x)  # a layout alone relabels the data, as DALI's reshape does


def test_transpose():
    images = [RNG.integers(0, 9, (2, 3, 4)).astype(np.float32)] * 2
    for got, x in zip(run_headrace("transpose", images, perm=[2, 0, 1]), images, strict=True):
        np.testing.assert_array_equal(got, x.transpose(2, 0, 1))
        assert got.flags.c_contiguous
    with pytest.raises(SampleError, match="not a permutation"):
        run_headrace("transpose", images, perm=[0, 0, 1])


def _pad_reference(samples, axes, fill, shape=None, align=None):
    ndim = samples[0].ndim
    axes = list(range(ndim)) if axes is None else axes
    largest = [max(s.shape[a] for s in samples) for a in axes]
    outs = []
    for s in samples:
        target = list(s.shape)
        for k, a in enumerate(axes):
            want = largest[k] if shape is None or shape[k] == -1 else shape[k]
            step = (align or [1])[k if align and len(align) > 1 else 0]
            target[a] = -(-want // step) * step
        out = np.full(target, fill, dtype=s.dtype)
        out[tuple(slice(0, n) for n in s.shape)] = s
        outs.append(out)
    return outs


@pytest.mark.parametrize("kwargs", [{}, {"axes": [1]}, {"axes": [0, 1], "align": [4, 3]}, {"shape": [6, -1]},
                                    {"align": [8]}])
def test_pad_to_the_batch_largest(kwargs):
    samples = [RNG.uniform(0, 1, (3, 4)).astype(np.float32), RNG.uniform(0, 1, (5, 2)).astype(np.float32),
               RNG.uniform(0, 1, (1, 7)).astype(np.float32)]
    got = run_headrace("pad", samples, fill_value=-1, **kwargs)
    for out, expected in zip(got, _pad_reference(samples, kwargs.get("axes"), -1, kwargs.get("shape"),
                                                 kwargs.get("align")), strict=True):
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype, fill, saturated", [(np.uint8, 300.0, 255), (np.int8, -200.0, -128),
                                                     (np.int16, -1.5, -2), (np.float64, 0.25, 0.25)])
def test_pad_fill_value_is_saturated_to_the_sample_type(dtype, fill, saturated):
    samples = [np.arange(6, dtype=dtype).reshape(2, 3), np.ones((4, 1), dtype)]
    first, second = run_headrace("pad", samples, fill_value=fill)
    assert first.dtype == second.dtype == dtype
    assert first.shape == second.shape == (4, 3)
    np.testing.assert_array_equal(first[:2], samples[0])
    np.testing.assert_array_equal(second[:, :1], samples[1])
    assert (first[2:] == saturated).all() and (second[:, 1:] == saturated).all()


def test_pad_inside_a_conditional_sees_only_its_branch():
    samples = [np.ones((2,), np.uint8), np.ones((9,), np.uint8), np.ones((4,), np.uint8), np.ones((3,), np.uint8)]

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: samples, batch=True)
        if fn.reductions.sum(x) < 5:
            x = fn.pad(x, fill_value=7)
        return x

    (out,) = pipe().run()
    # the short samples (2, 4, 3 long) are padded to 4, the largest of their branch; the 9-long one is untouched
    assert [out.at(i).shape for i in range(4)] == [(4,), (9,), (4,), (4,)]
    np.testing.assert_array_equal(out.at(0), [1, 1, 7, 7])


def test_pad_shape_smaller_than_a_sample_is_an_error():
    with pytest.raises(SampleError, match=r"shape \[2\] is smaller than the sample's extent 3"):
        run_headrace("pad", [np.zeros(3, np.float32)], shape=[2])


@pytest.mark.parametrize("labels, kwargs", [
    ([np.array(2, np.int32), np.array(0, np.int32)], {}),
    ([np.array([3], np.int32), np.array([4], np.int32)], {}),
    ([np.array([2, 1, 7], np.int32), np.array([0, 4, 4], np.int32)], {"axis": 0}),
    ([np.array([[1, 2]], np.int64), np.array([[0, 3]], np.int64)], {"dtype": types.UINT8, "on_value": 5,
                                                                     "off_value": 1}),
])
def test_one_hot(labels, kwargs):
    got = run_headrace("one_hot", labels, num_classes=5, **kwargs)
    for out, label in zip(got, labels, strict=True):
        label = label.reshape(()) if label.shape == (1,) else label
        expected = np.where(label[..., None] == np.arange(5), kwargs.get("on_value", 1.0),
                            kwargs.get("off_value", 0.0))
        expected = np.moveaxis(expected, -1, kwargs.get("axis", -1))
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == (np.uint8 if "dtype" in kwargs else np.float32)


@needs_dali[0]
@needs_dali[1]
def test_matches_dali():
    images = [RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8), RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8)]
    cases = [("stack", (images, images), {"axis": 1}), ("cat", (images, images), {"axis": 2}),
             ("reshape", (images,), {"shape": [8, -1]}), ("reshape", (images,), {"rel_shape": [0.5, 2, 1]}),
             ("reshape", (images,), {"src_dims": [2, -1, 0, 1]}), ("transpose", (images,), {"perm": [2, 0, 1]}),
             ("pad", ([np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)],), {"fill_value": -1, "axes": [1],
                                                                                    "align": [3]}),
             ("pad", ([np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)],), {"shape": [6, -1]}),
             ("one_hot", ([np.array(2, np.int32), np.array(4, np.int32)],), {"num_classes": 5}),
             ("one_hot", ([np.array([2, 1], np.int32), np.array([0, 4], np.int32)],), {"num_classes": 5, "axis": 0}),
             # labels out of range match no class; fractional ones are truncated toward zero, as DALI casts them
             ("one_hot", ([np.array([-1, 7, 5, 4], np.int32)],), {"num_classes": 5}),
             ("one_hot", ([np.array([2.7, 0.2, -0.5, -1.5, 4.99], np.float32)],), {"num_classes": 5}),
             ("one_hot", ([np.array([2.5], np.float64)],), {"num_classes": 5})]
    for op, inputs, kwargs in cases:
        for a, b in zip(run_headrace(op, *inputs, **kwargs), run_dali(op, *inputs, **kwargs), strict=True):
            assert a.dtype == b.dtype, op
            np.testing.assert_array_equal(a, b, err_msg=f"{op} {kwargs}")


def _layout_pipe(api, body, layouts: tuple[str | None, ...], data: list[np.ndarray]):
    """body(fn, *inputs) over external sources of `data` with the given layouts (None: no layout), in `api`."""

    @api.pipeline_def(batch_size=len(data), num_threads=1, device_id=None)
    def pipe():
        nodes = [api.fn.external_source(source=lambda: data, batch=True, **({"layout": la} if la else {}))
                 for la in layouts]
        out = body(api.fn, *nodes)
        return tuple(out) if isinstance(out, tuple) else out

    return pipe()


HW = [RNG.integers(0, 100, (3, 4), dtype=np.int32), RNG.integers(0, 100, (2, 5), dtype=np.int32)]
NAMED = [  # (body, input layouts): DALI honours each axis name; outputs compared with their layouts
    (lambda fn, x, y: (fn.cat(x, y, axis_name="W"), fn.cat(x, y, axis_name="H")), ("HW", "HW")),
    (lambda fn, x, y: fn.cat(x, y, axis_name="W"), ("HW", None)),  # the first input's layout decides
    (lambda fn, x, y: fn.cat(x, y, axis_name="H"), ("HW", "WH")),
    (lambda fn, x, y: (fn.stack(x, y, axis=2, axis_name="C"), fn.stack(x, y, axis=-2, axis_name="C"),
                       fn.stack(x, y, axis=1)), ("HW", "HW")),
    (lambda fn, x, y: fn.stack(x, y, axis=0, axis_name="F"), ("HW", None)),
    (lambda fn, x: (fn.one_hot(x, num_classes=100, axis_name="C"), fn.one_hot(x, num_classes=100, axis=1,
                                                                             axis_name="C"),
                    fn.one_hot(x, num_classes=100)), ("HW",)),
    (lambda fn, x: (fn.pad(x, axis_names="W"), fn.pad(x, axis_names="H", shape=[6])), ("HW",)),
]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("body, layouts", NAMED, ids=[f"named{i}" for i in range(len(NAMED))])
def test_axis_names_match_dali(body, layouts):
    from nvidia import dali

    import headrace

    ours = run_with_layouts(_layout_pipe(headrace, body, layouts, HW))
    theirs = run_with_layouts(_layout_pipe(dali, body, layouts, HW))
    assert len(ours) == len(theirs)
    for (got, got_layout), (expected, expected_layout) in zip(ours, theirs, strict=True):
        assert got_layout == expected_layout
        for a, b in zip(got, expected, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@needs_dali[0]
@needs_dali[1]
def test_stacked_scalars_and_scalar_labels_take_the_name_alone():
    """Scalars need no layout: the new axis is the whole output layout (DALI's), for stack and one_hot alike."""
    from nvidia import dali

    import headrace

    scalars = [np.array(3, np.int32), np.array(1, np.int32)]
    for body in (lambda fn, x: fn.stack(x, x, axis_name="C"),
                 lambda fn, x: fn.one_hot(x, num_classes=4, axis_name="C")):
        (samples, layout), = run_with_layouts(_layout_pipe(headrace, body, (None,), scalars))
        (expected, dali_layout), = run_with_layouts(_layout_pipe(dali, body, (None,), scalars))
        assert layout == dali_layout == "C"
        for a, b in zip(samples, expected, strict=True):
            np.testing.assert_array_equal(a, b)


BAD = [  # (body, input layouts, what headrace says): DALI refuses each too
    (lambda fn, x, y: fn.cat(x, y, axis_name="C"), ("HW", "HW"), "'C' is not an axis of the first input's layout"),
    (lambda fn, x, y: fn.cat(x, y, axis_name="W"), (None, "HW"), "not an axis of the first input's layout ''"),
    (lambda fn, x, y: fn.cat(x, y, axis=0, axis_name="W"), ("HW", "HW"), "'axis' and 'axis_name' cannot be used"),
    (lambda fn, x, y: fn.cat(x, y, axis_name="WH"), ("HW", "HW"), "'axis_name' must be a single character"),
    (lambda fn, x, y: fn.cat(x, y, axis=2), ("HW", "HW"), "cat: axis 2"),
    (lambda fn, x, y: fn.stack(x, y, axis_name="C"), (None, "HW"), "axis_name 'C' names the new axis"),
    (lambda fn, x, y: fn.stack(x, y, axis_name=""), ("HW", "HW"), "'axis_name' must be a single character"),
    (lambda fn, x, y: fn.stack(x, y, axis=-3), ("HW", "HW"), r"stack: axis -3 is out of range \[-2, 2\]"),
    (lambda fn, x, y: fn.one_hot(x, num_classes=3, axis_name="C"), (None, None), "which must have 2 letters"),
    (lambda fn, x, y: fn.one_hot(x, num_classes=3, axis=-2), ("HW", None), r"axis -2 is out of range \[-1, 2\]"),
    (lambda fn, x, y: fn.one_hot(x, num_classes=3, axis_name="CD"), ("HW", None), "must be a single character"),
    (lambda fn, x, y: fn.pad(x, axis_names="W"), (None, None), "'W' is not an axis of the input's layout ''"),
]


@pytest.mark.parametrize("body, layouts, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_axis_names_are_errors(body, layouts, message):
    import headrace

    with pytest.raises((SampleError, SchemaError), match=message):
        _layout_pipe(headrace, body, layouts, HW).run()


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("body, layouts", [b[:2] for b in BAD], ids=[f"bad{i}" for i in range(len(BAD))])
def test_dali_refuses_them_too(body, layouts):
    from nvidia import dali

    with pytest.raises(RuntimeError):
        pipe = _layout_pipe(dali, body, layouts, HW)
        pipe.build()
        pipe.run()
