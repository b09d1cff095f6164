"""Whole-batch random draws (headrace_kernels.philox) against the per-sample streams they replace: numpy's
Generator(Philox(key=[seed, index])) draw for draw, so the GPU stage's batched host half, the executor's batched
coin flips and the CPU kernels give the same bits. Also the fixed-size resize plan, the chunked file reads and the
mixed decoder's host half (runs without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headrace import fn, pipeline_def, types
from headrace.schema import get_schema
from headrace_kernels.cpu import random_ops
from headrace_kernels.philox import batch_crop_windows, batch_doubles
from headrace_kernels.rng import sample_rng
from headrace_kernels.windows import fixed_resize_size, random_crop_window, resize_plan


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), first=st.integers(0, 2**48), count=st.integers(1, 40),
       per_sample=st.integers(1, 11))
def test_batch_doubles_are_the_per_sample_streams(seed, first, count, per_sample):
    got = batch_doubles(seed, first, count, per_sample)
    expected = np.stack([sample_rng(seed, first + i).random(per_sample) for i in range(count)])
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), first=st.integers(0, 2**48),
       sizes=st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 5000)), min_size=1, max_size=48),
       area=st.lists(st.floats(0.001, 1.0), min_size=2, max_size=2).map(sorted),
       aspect=st.lists(st.floats(0.1, 10.0), min_size=2, max_size=2).map(sorted),
       attempts=st.integers(0, 12))
def test_batch_crop_windows_are_random_crop_window(seed, first, sizes, area, aspect, attempts):
    heights = np.array([h for h, _ in sizes])
    widths = np.array([w for _, w in sizes])
    got = batch_crop_windows(heights, widths, area, aspect, attempts, seed, first)
    expected = [random_crop_window(h, w, area, aspect, attempts, sample_rng(seed, first + i))
                for i, (h, w) in enumerate(sizes)]
    assert [tuple(row) for row in got.tolist()] == expected


def test_batch_crop_windows_with_rejected_bounded_draws():
    """Extents near 2**31 make Lemire's method reject often: the batched draws must redraw as numpy does."""
    n = 2000
    heights, widths = np.full(n, 2**31 + 5), np.full(n, 3)
    got = batch_crop_windows(heights, widths, [1e-4, 1e-3], [0.5, 2.0], 10, 9, 0)
    expected = [random_crop_window(2**31 + 5, 3, [1e-4, 1e-3], [0.5, 2.0], 10, sample_rng(9, i)) for i in range(n)]
    assert [tuple(row) for row in got.tolist()] == expected


def test_batch_crop_windows_rejects_bad_sizes():
    with pytest.raises(ValueError, match="positive"):
        batch_crop_windows(np.array([0]), np.array([5]), [0.1, 1.0], [0.75, 1.33], 10, 1, 0)


@pytest.mark.parametrize("shape", [None, [3], [2, 5]])
@pytest.mark.parametrize("probability", [0.0, 0.3, 1.0])
def test_coin_flip_batch_kernel_is_the_per_sample_kernel(shape, probability):
    schema = get_schema("random.coin_flip")
    args = schema.resolve({"probability": probability, "shape": shape})

    class Ctx:
        def __init__(self, index):
            self.rng = sample_rng(77, index)

    got = random_ops.coin_flip_batch(args, 77, 1000, 24)
    for i, value in enumerate(got):
        expected = random_ops.coin_flip([], args, Ctx(1000 + i))
        assert value.dtype == expected.dtype and value.shape == expected.shape
        np.testing.assert_array_equal(value, expected)


@pytest.mark.parametrize("kwargs", [{}, {"shape": [3]}, {"shape": [2, 5], "range": [0.5, 1.5]},
                                    {"range": [-7.0, 300.0], "dtype": types.UINT8}, {"range": [1.0, 1.0000001]},
                                    {"range": [0.0, 1e-30], "dtype": types.FLOAT16}, {"values": [1.0, 4.0, 9.0]},
                                    {"shape": [4], "range": [-1.0, 1.0], "dtype": types.FLOAT64}])
def test_uniform_batch_kernel_is_the_per_sample_kernel(kwargs):
    args = get_schema("random.uniform").resolve(kwargs)

    class Ctx:
        def __init__(self, index):
            self.rng = sample_rng(91, index)

    got = random_ops.uniform_batch(args, 91, 5000, 33)
    for i, value in enumerate(got):
        expected = random_ops.uniform([], args, Ctx(5000 + i))
        assert np.asarray(value).dtype == np.asarray(expected).dtype and np.shape(value) == np.shape(expected)
        np.testing.assert_array_equal(value, expected)


def test_pipeline_coin_flips_match_the_per_sample_streams():
    """Through the executor (which draws the batch in one call): sample k of the run is sample_rng(node seed, k)."""
    from headrace.engine.context import node_seed

    @pipeline_def(batch_size=8, num_threads=3, device_id=None, seed=21)
    def flips():
        return fn.random.coin_flip(probability=0.5, shape=[4], name="flip")

    pipe = flips()
    pipe.build()
    seed = node_seed(21, next(n for n in pipe._executor.nodes if n.name == "flip"))
    assert pipe._executor.cpu.steps[0][1][0].batch_draw is not None
    for iteration in range(2):
        (out,) = pipe.run()
        for i in range(8):
            expected = (sample_rng(seed, iteration * 8 + i).random(4) < 0.5).astype(np.int32)
            np.testing.assert_array_equal(out.at(i), expected)


@pytest.mark.parametrize("args", [
    {"resize_x": 224, "resize_y": 224}, {"size": [300, 17]}, {"resize_x": 224, "resize_y": 224, "mode": "stretch"},
    {"resize_x": 224, "resize_y": 224, "subpixel_scale": False},
])
def test_fixed_resize_size_is_resize_plan_of_every_input(args):
    schema = get_schema("resize")
    full = schema.resolve(args)
    fixed = fixed_resize_size(full)
    assert fixed is not None
    rng = np.random.default_rng(0)
    for h, w in rng.integers(1, 4000, (300, 2)).tolist():
        assert resize_plan(h, w, full) == (*fixed, (0.0, 0.0, float(h), float(w)))


@pytest.mark.parametrize("args", [
    {"resize_x": 224.5, "resize_y": 224}, {"resize_x": 224}, {"resize_shorter": 256}, {"resize_longer": 256},
    {"resize_x": 224, "resize_y": 224, "mode": "not_smaller"}, {"resize_x": 224, "resize_y": 224, "max_size": 100},
    {"resize_x": -224, "resize_y": 224},
])
def test_fixed_resize_size_declines_input_dependent_plans(args):
    assert fixed_resize_size(get_schema("resize").resolve(args)) is None


def test_file_reader_reads_in_runs_in_order(image_folder):
    """Chunked reads through the pool give the files in the batch's order, the same bytes as a serial read."""
    from concurrent.futures import ThreadPoolExecutor

    from headrace.readers.file import FileReader

    schema = get_schema("readers.file")
    args = schema.resolve({"file_root": str(image_folder), "random_shuffle": True})
    with ThreadPoolExecutor(3) as pool:
        pooled = FileReader("r", args, 10, 5, pool)
        serial = FileReader("r", args, 10, 5, None)
        for iteration in range(5):
            (data, labels), sources = pooled.next_batch(iteration)
            (data2, labels2), sources2 = serial.next_batch(iteration)
            assert sources == sources2 and len(data) == 10
            for a, b, path in zip(data, data2, sources, strict=True):
                np.testing.assert_array_equal(a, b)
                assert a.tobytes() == open(path, "rb").read()


@pytest.mark.parametrize("c_api", [True, False])
def test_mixed_decoder_host_half_draws_the_cpu_windows(image_folder, c_api):
    """MixedDecoder.prepare (no GPU needed), through nvImageCodec's C API and its Python binding: sample i's window
    is random_crop_window of its size drawn from sample_rng(seed, first + i), and the sub code stream carries
    exactly that region (the C API's output shapes are the windows')."""
    from headrace_kernels.cpu.decode import code_stream
    from headrace_kernels.gpu.decode import MixedDecoder

    schema = get_schema("decoders.image_random_crop")
    args = schema.resolve({})
    files = sorted(image_folder.rglob("*.jpg"))[:12]
    encoded = [np.fromfile(f, np.uint8) for f in files]
    decoder = MixedDecoder(args, 0, 2, random_crop=True)
    if c_api and not decoder.c_api:
        pytest.skip("nvImageCodec's C library is not available")
    decoder.c_api = c_api
    prepared = decoder.prepare(encoded, 1234, 512)
    for i, data in enumerate(encoded):
        stream = code_stream(data)
        window = random_crop_window(stream.height, stream.width, args["random_area"], args["random_aspect_ratio"],
                                    args["num_attempts"], sample_rng(1234, 512 + i))
        assert prepared.windows[i] == window
        y, x, h, w = window
        if c_api:
            assert tuple(prepared.shapes[i]) == (h, w, 3)
            continue
        region = prepared.streams[i].view.region
        assert (tuple(region.start), tuple(region.end)) == ((y, x), (y + h, x + w))
