"""preemphasis_filter, nonsilent_region, slice, normalize and shapes against DALI's CPU build on batches of
synthetic float32 signals of several lengths and on images; bad inputs; GPU against CPU.

Tolerances: preemphasis_filter, nonsilent_region, slice and shapes are bit-exact with DALI (the same float32
operations in the same order; nonsilent_region's running sum subtracts the leaving square before adding the new
one, as DALI's build does). normalize sums its statistics in float64 where DALI sums in float32 and takes a
Newton-refined rsqrt: outputs agree to 1e-5 relative (1.5e-6 measured), integer outputs to one level. On the GPU,
normalize's sums run in another order (kernels/reduce.cu): 1e-5 again; everything else is exact."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(21)
LENGTHS = (1, 7, 300, 2049, 16000)


def _speech(n: int, begin: int, end: int, noise: float = 1e-3) -> np.ndarray:
    """Low noise with a louder tone in [begin, end)."""
    signal = RNG.standard_normal(n) * noise
    signal[begin:end] += np.sin(np.arange(end - begin) * 0.05) * RNG.uniform(0.2, 1.0)
    return signal.astype(np.float32)


AUDIO = [RNG.standard_normal(n).astype(np.float32) for n in LENGTHS]
SPEECH = [_speech(n, n // 4, n // 2) for n in (3000, 16000, 9000, 50)] + [np.zeros(4000, np.float32)]
IMAGES = [RNG.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((20, 30), (17, 9), (40, 41))]
MEL = [(RNG.standard_normal((64, n)) * 5 - 10).astype(np.float32) for n in (100, 250, 37)]


def _constant(samples):
    return lambda: list(samples)


def run(api, graph, *batches, layout: str | None = None, device: str = "cpu") -> list[list[np.ndarray]]:
    """graph(*input nodes, fn) in headrace or DALI (`api`) over one batch per input; the output samples, per
    output. `layout` is the first input's; device='gpu' moves the first input to the GPU."""
    @api.pipeline_def(batch_size=len(batches[0]), num_threads=1, device_id=None if device == "cpu" else 0, seed=3)
    def pipe():
        nodes = [api.fn.external_source(source=_constant(b), batch=True, **({"layout": layout} if layout and i == 0
                                                                                else {}))
                 for i, b in enumerate(batches)]
        if device == "gpu":
            nodes[0] = nodes[0].gpu()
        out = graph(*nodes, api.fn)
        return tuple(out) if isinstance(out, tuple | list) else (out,)

    p = pipe()
    if api is not headrace:
        p.build()
    outs = p.run()
    result = []
    for out in outs:
        if getattr(out, "device", "cpu") == "gpu" or type(out).__name__ == "TensorListGPU":
            out = out.as_cpu()
        result.append([np.array(out.at(i)) for i in range(len(out))])
    if api is headrace:
        p.close()
    return result


def _dali():
    import nvidia.dali

    return nvidia.dali


def both(graph, *batches, layout: str | None = None):
    return run(headrace, graph, *batches, layout=layout), run(_dali(), graph, *batches, layout=layout)


def assert_same(ours, theirs, tolerance: float = 0.0, levels: int = 0) -> None:
    for out_a, out_b in zip(ours, theirs, strict=True):
        for a, b in zip(out_a, out_b, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
            if a.dtype.kind in "iu" and levels:
                assert np.max(np.abs(a.astype(np.int64) - b), initial=0) <= levels
            elif tolerance:
                np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
            else:
                np.testing.assert_array_equal(a, b)


def _coeffs(*values):
    return [np.array(v, np.float32) for v in values]


# preemphasis_filter

@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("border", ["clamp", "zero", "reflect"])
def test_preemphasis_matches_dali(border):
    audio = AUDIO[1:] if border == "reflect" else AUDIO  # DALI reads past a 1-sample signal for 'reflect'
    assert_same(*both(lambda a, fn: fn.preemphasis_filter(a, border=border), audio))
    coeffs = _coeffs(0.5, 0.0, 0.97, -1.5, 0.25)[:len(audio)]
    assert_same(*both(lambda a, c, fn: fn.preemphasis_filter(a, preemph_coeff=c, border=border), audio, coeffs))


@needs_dali[0]
@needs_dali[1]
def test_preemphasis_types_match_dali():
    from nvidia.dali import types as dali_types

    ints = [RNG.integers(-30000, 30000, n).astype(np.int16) for n in (5, 9, 100)]
    for name in ("INT16", "UINT8", "FLOAT", "INT32", "FLOAT64"):
        ours = run(headrace, lambda a, fn, name=name: fn.preemphasis_filter(a, dtype=getattr(types, name)), ints)
        theirs = run(_dali(), lambda a, fn, name=name: fn.preemphasis_filter(
            a, dtype=getattr(dali_types, name)), ints)
        assert_same(ours, theirs)
    doubles = [RNG.standard_normal(n) for n in (5, 64)]  # computed in float64, as DALI does
    assert_same(*both(lambda a, fn: fn.preemphasis_filter(a, preemph_coeff=0.9), doubles))


def test_preemphasis_formula_and_errors():
    x = np.array([1.0, 2.0, 4.0, -1.0], np.float32)
    (out,), = run(headrace, lambda a, fn: fn.preemphasis_filter(a, preemph_coeff=0.5, border="reflect"), [x])
    np.testing.assert_array_equal(out, np.array([0.0, 1.5, 3.0, -3.0], np.float32))
    with pytest.raises(SampleError, match=r"preemphasis_filter .*sample 1.*numeric"):
        run(headrace, lambda a, fn: fn.preemphasis_filter(a), [np.ones(3, np.float32), np.ones(3, bool)])
    with pytest.raises(SchemaError, match=r"preemphasis_filter .*argument 'border'"):
        run(headrace, lambda a, fn: fn.preemphasis_filter(a, border="mirror"), [x])


# nonsilent_region

NONSILENT_CASES = [
    {},
    dict(cutoff_db=-20.0, window_length=256, reset_interval=1024),
    dict(cutoff_db=-45.0, window_length=5, reset_interval=-1),
    dict(cutoff_db=-30.0, window_length=2, reset_interval=2, reference_power=0.05),
    dict(cutoff_db=-80.0, window_length=1, reset_interval=-1, reference_power=0.3),
]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", NONSILENT_CASES)
def test_nonsilent_region_matches_dali(kwargs):
    ours, theirs = both(lambda a, fn: fn.nonsilent_region(a, **kwargs), SPEECH + AUDIO[:2])
    assert ours[0][0].dtype == np.int32 and ours[0][0].shape == ()
    assert_same(ours, theirs)


@needs_dali[0]
@needs_dali[1]
def test_nonsilent_region_random_signals_and_integers_match_dali():
    for _ in range(12):  # thresholds land anywhere: the float32 running sum must be DALI's, rounding for rounding
        window = int(RNG.choice([1, 2, 5, 64, 2048]))
        kwargs = dict(window_length=window, reset_interval=int(RNG.choice([-1, window, 4 * window])),
                      cutoff_db=float(RNG.uniform(-80, -5)))
        signals = [_speech(n, int(RNG.integers(0, n // 2)), int(RNG.integers(n // 2, n))) for n in
                   RNG.integers(50, 8000, 3)]
        assert_same(*both(lambda a, fn, kwargs=kwargs: fn.nonsilent_region(a, **kwargs), signals))
    for dtype in (np.int16, np.uint8, np.int32):
        scale = 100 if dtype == np.uint8 else 10000
        signals = [(_speech(n, n // 3, n // 2, noise=0.01) * scale).astype(dtype) for n in (3000, 5000)]
        assert_same(*both(lambda a, fn: fn.nonsilent_region(a, window_length=64, cutoff_db=-30), signals))


@needs_dali[0]
@needs_dali[1]
def test_silence_trimming_chain_matches_dali():
    """The ASR pipelines' start: nonsilent_region's outputs as slice's positional inputs, then preemphasis."""
    def graph(audio, fn):
        begin, length = fn.nonsilent_region(audio, cutoff_db=-40)
        return fn.preemphasis_filter(fn.slice(audio, begin, length, axes=[0]), preemph_coeff=0.97)

    ours, theirs = both(graph, SPEECH)
    assert ours[0][-1].size == 4000 and ours[0][1].size < SPEECH[1].size  # all silence is kept whole, as in DALI
    assert_same(ours, theirs)


def test_nonsilent_region_bad_inputs_name_op_sample_and_argument():
    def region(batch, **kwargs):
        return run(headrace, lambda a, fn: fn.nonsilent_region(a, **kwargs), batch)

    with pytest.raises(SampleError, match=r"nonsilent_region .*sample 1.*1D audio, got shape \(2, 3\)"):
        region([np.ones(4, np.float32), np.ones((2, 3), np.float32)])
    with pytest.raises(SampleError, match=r"sample 0.*argument 'reset_interval'.*multiple of window_length"):
        region([np.ones(4, np.float32)], window_length=10)
    with pytest.raises(SampleError, match=r"argument 'reference_power': must be positive"):
        region([np.ones(4, np.float32)], reference_power=0.0)
    assert [int(v[0]) for v in region([np.zeros(0, np.float32)])] == [0, 0]


# slice

@needs_dali[0]
@needs_dali[1]
def test_slice_with_positional_and_argument_inputs_matches_dali():
    begins = [np.array(b, np.int32) for b in (0, 2, 100, 500, 3000)]
    lengths = [np.array(n, np.int32) for n in (1, 5, 200, 1000, 9000)]
    assert_same(*both(lambda a, b, n, fn: fn.slice(a, b, n, axes=[0]), AUDIO, begins, lengths))
    assert_same(*both(lambda a, b, n, fn: fn.slice(a, b, n, axes=[0]), AUDIO, [b.reshape(1) for b in begins],
                      [n.reshape(1) for n in lengths]))
    rel_begin = _coeffs(*([[0.0]] + [[v] for v in RNG.uniform(0, 0.5, 4)]))
    rel_length = _coeffs(*([[1.0]] + [[v] for v in RNG.uniform(0, 0.5, 4)]))
    assert_same(*both(lambda a, b, n, fn: fn.slice(a, b, n, axes=[0]), AUDIO, rel_begin, rel_length))
    assert_same(*both(lambda a, b, n, fn: fn.slice(a, b, n, axes=[0], normalized_shape=False), AUDIO, rel_begin,
                      [np.array([v + 0.5], np.float32) for v in range(5)]))
    starts = [np.array([s], np.int32) for s in (0, 1, 50, 2000, 10)]
    assert_same(*both(lambda a, s, fn: fn.slice(a, start=s, shape=[1], axes=[0]), AUDIO, starts))
    rel_shapes = _coeffs(*([[v] for v in RNG.uniform(0, 0.5, 5)]))
    assert_same(*both(lambda a, s, fn: fn.slice(a, rel_start=[0.15], rel_shape=s, axes=[0]), AUDIO, rel_shapes))


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("policy", ["pad", "constant", "trim_to_shape", "edge", "clamp", "reflect",
                                    "reflect_1001", "reflect_101", "wrap"])
def test_slice_out_of_bounds_policies_match_dali(policy):
    assert_same(*both(lambda a, fn: fn.slice(a, start=[-45], shape=[2100], axes=[0], out_of_bounds_policy=policy,
                                             fill_values=[3.5]), AUDIO[1:4]))
    assert_same(*both(lambda a, fn: fn.slice(a, start=[-5, -7], shape=[45, 40], axis_names="HW",
                                             out_of_bounds_policy=policy, fill_values=[1, 2, 300.7]), IMAGES,
                      layout="HWC"))


@needs_dali[0]
@needs_dali[1]
def test_slice_of_images_matches_dali():
    cases = [dict(start=[2, 3], shape=[5, 4]),  # default axis_names 'WH': x first
             dict(rel_start=[0.1, 0.2], rel_end=[0.55, 0.9], axis_names="HW"),
             dict(rel_start=[0.15, 0.25], rel_shape=[0.5, 0.35], axes=[0, 1]),
             dict(start=[1, 2], end=[9, 8], axes=[0, 1]),
             dict(start=[1], shape=[2], axes=[-1]),
             dict(start=[1, 2], shape=[5, 5], axes=[0, 1], dtype="FLOAT"),
             dict(start=[16, 2], shape=[8, 5], axes=[0, 1], dtype="FLOAT16", out_of_bounds_policy="pad",
                  fill_values=[-3.7])]
    from nvidia.dali import types as dali_types

    for kwargs in cases:
        ours = run(headrace, lambda a, fn, kwargs=kwargs: fn.slice(a, **_typed(kwargs, types)), IMAGES, layout="HWC")
        theirs = run(_dali(), lambda a, fn, kwargs=kwargs: fn.slice(a, **_typed(kwargs, dali_types)), IMAGES,
                     layout="HWC")
        assert_same(ours, theirs)
    floats = [(RNG.standard_normal((9, 11, 3)) * 300).astype(np.float32) for _ in range(2)]
    floats[0][2, 3, 1], floats[0][2, 4, 1] = np.nan, 1e6
    for name in ("UINT8", "FLOAT16"):  # clamped; uint8 truncates, as DALI
        assert_same(run(headrace, lambda a, fn, name=name: fn.slice(
                        a, start=[1, 2], shape=[12, 5], axes=[0, 1], dtype=getattr(types, name),
                        out_of_bounds_policy="pad", fill_values=[-300.7]), floats),
                    run(_dali(), lambda a, fn, name=name: fn.slice(
                        a, start=[1, 2], shape=[12, 5], axes=[0, 1], dtype=getattr(dali_types, name),
                        out_of_bounds_policy="pad", fill_values=[-300.7]), floats))


def _typed(kwargs: dict, namespace) -> dict:
    return {k: getattr(namespace, v) if k == "dtype" else v for k, v in kwargs.items()}


def test_slice_fill_values_convert_as_static_cast():
    data = [np.arange(6, dtype=np.uint8)]
    (out,), = run(headrace, lambda a, fn: fn.slice(a, start=[-2], shape=[4], axes=[0], out_of_bounds_policy="pad",
                                                  fill_values=[300.7]), data)
    np.testing.assert_array_equal(out, np.array([44, 44, 0, 1], np.uint8))  # DALI's: 300 wraps to 44


def test_slice_bad_inputs_name_op_sample_and_argument():
    def cut(batch, *more, **kwargs):
        return run(headrace, lambda *nodes: nodes[-1].slice(*nodes[:-1], **kwargs), batch, *more)

    with pytest.raises(SampleError, match=r"slice .*sample 1.*reaches outside the input of shape \(7,\)"):
        cut([AUDIO[2], AUDIO[1]], start=[2], shape=[10], axes=[0])
    with pytest.raises(SampleError, match=r"sample 0.*argument 'start': needs one value per sliced axis"):
        cut([AUDIO[2]], start=[1, 2], shape=[3, 3], axes=[0])
    with pytest.raises(SampleError, match="cannot be used with the anchor and shape inputs"):
        cut([AUDIO[2]], [np.array(1, np.int32)], [np.array(2, np.int32)], start=[1], axes=[0])
    with pytest.raises(SampleError, match="must both be integers or both floats"):
        cut([AUDIO[2]], [np.array(1, np.int32)], [np.array(0.5, np.float32)], axes=[0])
    with pytest.raises(SampleError, match=r"'WH'.*give `axes`"):
        cut([AUDIO[2]], start=[1], shape=[2])
    with pytest.raises(SchemaError, match=r"slice .*rel_start and start exclude each other"):
        cut([AUDIO[2]], start=[1], rel_start=[0.5], axes=[0])
    with pytest.raises(SchemaError, match=r"slice .*argument 'dtype'"):
        cut([AUDIO[2]], start=[1], shape=[2], axes=[0], dtype=types.INT32)


# normalize

NORMALIZE_CASES = [
    dict(axes=[1]),  # the ASR pipelines': per mel band over time
    dict(axes=[1], epsilon=4e-5, ddof=1),
    {},
    dict(axes=[1], batch=True),
    dict(batch=True, scale=2.0, shift=1.0),
    dict(mean=1.0, stddev=2.0),
    dict(mean=-10.0, axes=[0]),
    dict(stddev=3.0, axes=[1], epsilon=1.0),
    dict(axes=[1], ddof=1000, shift=5.0),  # no degrees of freedom left: shift, as DALI
    dict(axes=[1], ddof=1000, epsilon=2.0),
]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", NORMALIZE_CASES)
def test_normalize_matches_dali(kwargs):
    assert_same(*both(lambda a, fn: fn.normalize(a, **kwargs), MEL), tolerance=1e-5)


@needs_dali[0]
@needs_dali[1]
def test_normalize_images_integer_outputs_and_tensor_arguments_match_dali():
    from nvidia.dali import types as dali_types

    dali = _dali()
    assert_same(*both(lambda a, fn: fn.normalize(a, axis_names="HW"), IMAGES, layout="HWC"), tolerance=1e-5)
    assert_same(*both(lambda a, fn: fn.normalize(a, axes=[0, 1], batch=True), IMAGES), tolerance=1e-5)
    for name, scale, shift in (("UINT8", 64.0, 128.0), ("INT16", 1000.0, 0.0)):
        ours_args = dict(axes=[0, 1], scale=scale, shift=shift, dtype=getattr(types, name))
        dali_args = dict(ours_args, dtype=getattr(dali_types, name))
        ours = run(headrace, lambda a, fn, k=ours_args: fn.normalize(a, **k), IMAGES)
        theirs = run(dali, lambda a, fn, k=dali_args: fn.normalize(a, **k), IMAGES)
        assert_same(ours, theirs, levels=1)
    data = [np.arange(8, dtype=np.float32).reshape(2, 4) * k for k in (1, 3)]
    means = [np.array([[1.0], [2.0]], np.float32), np.array([[3.0], [-2.0]], np.float32)]
    stddevs = [np.array([[1, 2, 0, 4]], np.float32)] * 2  # axes inferred from their shapes; 0 gives `shift`
    assert_same(*both(lambda a, m, fn: fn.normalize(a, mean=m), data, means), tolerance=1e-5)
    assert_same(*both(lambda a, m, fn: fn.normalize(a, mean=m, axes=[1]), data, means), tolerance=1e-5)
    assert_same(*both(lambda a, s, fn: fn.normalize(a, stddev=s, shift=3.0), data, stddevs), tolerance=1e-5)
    assert_same(*both(lambda a, s, fn: fn.normalize(a, stddev=s, epsilon=0.5, scale=3.0), data, stddevs),
                tolerance=1e-5)


@pytest.mark.parametrize("axes", [[0], [1], [2], [0, 1], [1, 2], [0, 2], [0, 1, 2]])
def test_normalize_over_any_axes_of_3d_samples(axes):
    """Consecutive axes take the compiled loops, the others numpy: both give the float64 formula's values, within
    float32 statistics' rounding (a reduction over axis 0 of (2, 9, 4) pools two values: up to ~1e-4 off)."""
    rng = np.random.default_rng(len(axes) * 10 + axes[0])  # the data does not depend on the tests run before
    data = [rng.normal(3.0, 2.0, shape).astype(np.float32) for shape in ((3, 5, 7), (2, 9, 4))]
    (out,) = run(headrace, lambda a, fn: fn.normalize(a, axes=axes, shift=0.5, scale=2.0), data)
    for got, sample in zip(out, data, strict=True):
        x = sample.astype(np.float64)
        expected = (x - x.mean(tuple(axes), keepdims=True)) / x.std(tuple(axes), keepdims=True) * 2.0 + 0.5
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-4)


def test_normalize_formula_and_bad_inputs():
    (out,), = run(headrace, lambda a, fn: fn.normalize(a, axes=[1], ddof=1), MEL[:1])
    expected = (MEL[0] - MEL[0].mean(1, keepdims=True)) / MEL[0].std(1, ddof=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(SampleError, match=r"normalize .*sample 1: with batch=True the samples must agree"):
        run(headrace, lambda a, fn: fn.normalize(a, axes=[1], batch=True), [np.ones((2, 4), np.float32),
                                                                            np.ones((3, 4), np.float32)])
    with pytest.raises(SampleError, match=r"sample 1: argument 'mean' has 3 values"):
        run(headrace, lambda a, m, fn: fn.normalize(a, mean=m, axes=[1]), [np.ones((2, 4), np.float32)] * 2,
            [np.ones(2, np.float32), np.ones(3, np.float32)])
    with pytest.raises(SampleError, match="argument 'axes': give at least one axis"):
        run(headrace, lambda a, fn: fn.normalize(a, axes=[]), MEL[:1])
    with pytest.raises(SchemaError, match=r"normalize .*axes and axis_names exclude each other"):
        run(headrace, lambda a, fn: fn.normalize(a, axes=[0], axis_names="H"), MEL[:1])


# shapes

@needs_dali[0]
@needs_dali[1]
def test_shapes_match_dali():
    from nvidia.dali import types as dali_types

    assert_same(*both(lambda a, fn: fn.shapes(a), IMAGES))
    assert_same(run(headrace, lambda a, fn: fn.shapes(a, dtype=types.INT32), AUDIO),
                run(_dali(), lambda a, fn: fn.shapes(a, dtype=dali_types.INT32), AUDIO))


def test_output_specs_agree_with_the_outputs():
    def graph(audio, fn):
        begin, length = fn.nonsilent_region(audio)
        cut = fn.slice(audio, begin, length, axes=[0])
        return begin, length, cut, fn.preemphasis_filter(cut, dtype=types.FLOAT16), fn.shapes(cut)

    pipe_outputs = []

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        outs = graph(headrace.fn.external_source(source=_constant(SPEECH[:2]), batch=True, dtype=types.FLOAT,
                                                 ndim=1), headrace.fn)
        pipe_outputs.extend(outs)
        return outs

    p = pipe()
    for node, batch in zip(pipe_outputs, p.run(), strict=True):
        for i in range(len(batch)):
            sample = np.asarray(batch.at(i))
            assert sample.dtype == node.spec.dtype and sample.ndim == len(node.spec.dims), (node.name, node.spec)
    p.close()
    assert [n.spec.dims for n in pipe_outputs] == [(), (), (-1,), (-1,), (1,)]


# GPU against CPU

def _cpu_and_gpu(graph, *batches, layout: str | None = None):
    return run(headrace, graph, *batches, layout=layout), run(headrace, graph, *batches, layout=layout, device="gpu")


@pytest.mark.gpu
def test_gpu_preemphasis_slice_and_shapes_equal_cpu():
    coeffs = _coeffs(0.5, 0.0, 0.97, -1.5, 0.25)
    for border in ("clamp", "zero", "reflect"):
        assert_same(*_cpu_and_gpu(lambda a, c, fn, border=border: fn.preemphasis_filter(
            a, preemph_coeff=c, border=border), AUDIO, coeffs))
    assert_same(*_cpu_and_gpu(lambda a, fn: fn.preemphasis_filter(a, dtype=types.INT16),
                              [(x * 1000).astype(np.float32) for x in AUDIO]))
    begins = [np.array(b, np.int32) for b in (0, 2, 100, 500, 3000)]
    lengths = [np.array(n, np.int32) for n in (1, 5, 200, 1000, 9000)]
    assert_same(*_cpu_and_gpu(lambda a, b, n, fn: fn.slice(a, b, n, axes=[0]), AUDIO, begins, lengths))
    for policy in ("pad", "trim_to_shape", "edge", "reflect", "reflect_101", "wrap"):
        assert_same(*_cpu_and_gpu(lambda a, fn, policy=policy: fn.slice(
            a, start=[-5, -7], shape=[45, 40], axis_names="HW", out_of_bounds_policy=policy,
            fill_values=[1, 2, 300.7]), IMAGES, layout="HWC"))
    floats = [(RNG.standard_normal((9, 11, 3)) * 300).astype(np.float32) for _ in range(2)]
    for dtype in (types.UINT8, types.FLOAT16):
        assert_same(*_cpu_and_gpu(lambda a, fn, dtype=dtype: fn.slice(
            a, start=[1, 2], shape=[12, 5], axes=[0, 1], dtype=dtype, out_of_bounds_policy="pad",
            fill_values=[-3.7]), floats))
    assert_same(*_cpu_and_gpu(lambda a, fn: fn.shapes(a).cpu(), IMAGES))


@pytest.mark.gpu
def test_gpu_nonsilent_region_equals_cpu():
    assert_same(*_cpu_and_gpu(lambda a, fn: fn.nonsilent_region(a, cutoff_db=-40), SPEECH))


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", NORMALIZE_CASES[:6] + [dict(axes=[0], dtype=types.INT16, scale=100.0)])
def test_gpu_normalize_equals_cpu(kwargs):
    assert_same(*_cpu_and_gpu(lambda a, fn: fn.normalize(a, **kwargs), MEL), tolerance=1e-5, levels=1)
