"""device='mixed' decoders against the CPU decoder, the GPU pipeline end to end, bad files, and GPU memory.

Tolerances: the hardware / CUDA JPEG decoders and libjpeg-turbo differ in IDCT and chroma upsampling, so decoded
pixels agree in shape exactly and in value on average within 3 levels (99th percentile within 16), with
jpeg_fancy_upsampling (headrace's default); without it (DALI's default) the GPU replicates chroma rather than
interpolating it, which lies further from the CPU decode. PNG is lossless and decodes identically. Random-crop
windows come from the same per-sample stream, so crop shapes are identical."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

from headrace import Pipeline, fn, types
from headrace.data.synthetic import make_image_folder, synthetic_image
from headrace.demo import resnet50_train
from headrace.errors import SampleError
from tests.gpu_helpers import cpu_and_gpu, run_graph

pytestmark = pytest.mark.gpu


def _jpeg(image: np.ndarray, **save) -> np.ndarray:
    buffer = io.BytesIO()
    mode = "L" if image.ndim == 2 else "RGB"
    pil = Image.fromarray(image, mode)
    if save.pop("cmyk", False):
        pil = pil.convert("CMYK")
    pil.save(buffer, format=save.pop("format", "JPEG"), **save)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _random_jpegs(seed: int, count: int, heights: tuple[int, int], widths: tuple[int, int]) -> list[np.ndarray]:
    """`count` synthetic images of random sizes in [heights) x [widths), as quality-90 JPEGs (4:2:0)."""
    rng = np.random.default_rng(seed)
    return [_jpeg(synthetic_image(rng, int(rng.integers(*heights)), int(rng.integers(*widths))), quality=90)
            for _ in range(count)]


def _exif_rotated(image: np.ndarray) -> np.ndarray:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    return _jpeg(image, quality=92, exif=exif.tobytes())


def _encoded_set() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(12)
    image = synthetic_image(rng, 75, 101)
    return {
        "baseline": _jpeg(image, quality=90),
        "odd_1x1": _jpeg(synthetic_image(rng, 8, 8)[:1, :1].copy(), quality=90),
        "tall_4097x3": _jpeg(np.ascontiguousarray(np.repeat(image[:1, :3], 4097, axis=0)), quality=90),
        "gray": _jpeg(image[..., 1].copy(), quality=90),
        "progressive": _jpeg(image, quality=90, progressive=True),
        "cmyk": _jpeg(image, quality=90, cmyk=True),
        "exif_rotated": _exif_rotated(image),
        "png": _jpeg(image, format="PNG"),
        "subsampled_444": _jpeg(image, quality=95, subsampling=0),
    }


def _close(cpu: np.ndarray, gpu: np.ndarray, lossless: bool) -> None:
    assert cpu.shape == gpu.shape and cpu.dtype == gpu.dtype == np.uint8
    diff = np.abs(cpu.astype(np.int16) - gpu.astype(np.int16))
    if lossless:
        assert diff.max() == 0
    else:
        assert diff.mean() <= 3.0 and np.percentile(diff, 99) <= 16, (diff.mean(), np.percentile(diff, 99))


def _fed_decodes(batch: list, decode, setup=None, runs: int = 1, executor_options=None,
                 release: bool = False) -> list[list[np.ndarray]]:
    """`runs` batches of `decode(data)` (a mixed decoder node) over the fed `batch`, as host arrays; `setup` gets
    the built pipeline's MixedDecoder first (to check or change it)."""
    pipe = Pipeline(batch_size=len(batch), num_threads=2, device_id=0, seed=1, executor_options=executor_options)
    with pipe:
        pipe.set_outputs(decode(fn.external_source(source=lambda: batch, batch=True, dtype=types.UINT8)))
    pipe.build()
    (decoder,) = [k.decoder for k in pipe._executor.gpu.kernels() if hasattr(k, "decoder")]
    if setup is not None:
        setup(decoder)
    decoded = []
    for _ in range(runs):
        host = pipe.run()[0].as_cpu()
        decoded.append([np.asarray(host.at(i)) for i in range(len(host))])
    if release:
        pipe.release_memory()
    pipe.close()
    return decoded


def _assert_same(a_runs: list[list[np.ndarray]], b_runs: list[list[np.ndarray]]) -> None:
    for a_run, b_run in zip(a_runs, b_runs, strict=True):
        for a, b in zip(a_run, b_run, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("output_type", [types.RGB, types.GRAY, types.BGR])
def test_mixed_decode_matches_cpu(output_type):
    encoded = _encoded_set()
    batch = list(encoded.values())
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.decoders.image(
        d, device="mixed" if dev == "gpu" else "cpu", output_type=output_type), upload=False)
    for name, a, b in zip(encoded, cpu, gpu, strict=True):
        _close(a, b, lossless=name == "png")
    assert cpu[list(encoded).index("exif_rotated")].shape[:2] == (101, 75)  # orientation applied


@pytest.mark.parametrize("hw_decoder_load", [0.0, 0.65, 1.0])
def test_mixed_random_crop_windows_match_cpu(hw_decoder_load):
    # the EXIF-rotated file included: both devices draw its window in the displayed (turned) frame
    batch = _random_jpegs(3, 24, (60, 300), (60, 300)) + list(_encoded_set().values())

    def graph(d, dev):
        return fn.decoders.image_random_crop(d, device="mixed" if dev == "gpu" else "cpu",
                                             hw_decoder_load=hw_decoder_load, name="decode", seed=77)

    cpu, gpu = cpu_and_gpu(batch, graph, upload=False)
    for a, b in zip(cpu, gpu, strict=True):
        _close(a, b, lossless=False)


@pytest.mark.parametrize("threshold", [0, 10_000])
def test_hybrid_huffman_threshold_reaches_the_cuda_decoder_and_still_matches_cpu(threshold):
    # hw_decoder_load 0: every image goes to the CUDA decoder, whose Huffman decoding moves to the GPU for images
    # above the threshold (all of them at 0); the decoder must take the option and decode as closely as before
    from headrace_kernels.gpu.decode import decoder_options

    assert decoder_options({"hybrid_huffman_threshold": threshold}) == \
        f"nvjpeg_cuda_decoder:hybrid_huffman_threshold={threshold}"
    assert decoder_options({"hybrid_huffman_threshold": 1_000_000}) == ""  # the decoder's own default
    batch = _random_jpegs(5, 12, (60, 300), (60, 300))

    def graph(d, dev):
        return fn.decoders.image(d, device="mixed" if dev == "gpu" else "cpu", hw_decoder_load=0.0,
                                 hybrid_huffman_threshold=threshold)

    cpu, gpu = cpu_and_gpu(batch, graph, upload=False)
    for a, b in zip(cpu, gpu, strict=True):
        _close(a, b, lossless=False)


def test_preallocation_hints_reach_the_hardware_decoder_and_change_no_pixel():
    batch = _random_jpegs(6, 16, (200, 400), (200, 500))
    decoded = {}
    for hints in ({}, {"preallocate_width_hint": 500, "preallocate_height_hint": 400}):
        def check(decoder, hints=hints):
            assert ("preallocate_batch_size=16" in decoder.options) == bool(hints)
        decoded[bool(hints)] = _fed_decodes(batch, lambda data, hints=hints: fn.decoders.image(
            data, device="mixed", hw_decoder_load=1.0, **hints), check)
    _assert_same(decoded[False], decoded[True])


@pytest.mark.parametrize("hw_decoder_load", [0.0, 1.0])
def test_fancy_upsampling_off_replicates_chroma_and_on_matches_cpu(hw_decoder_load):
    # 4:2:0 JPEGs (Pillow's default at quality 90) on the CUDA decoder (load 0) and the hardware one (load 1):
    # jpeg_fancy_upsampling=True interpolates chroma as the CPU decoder does; False (DALI's default) replicates
    # it, which moves pixels at colour edges: further from the CPU decode, beyond _close's bounds on these images
    batch = _random_jpegs(7, 8, (120, 300), (120, 300))
    cpu = run_graph(batch, lambda d, dev: fn.decoders.image(d), "cpu")
    distance = {}
    for fancy in (True, False):
        gpu = run_graph(batch, lambda d, dev, fancy=fancy: fn.decoders.image(
            d, device="mixed", hw_decoder_load=hw_decoder_load, jpeg_fancy_upsampling=fancy), "gpu", upload=False)
        if fancy:
            for a, b in zip(cpu, gpu, strict=True):
                _close(a, b, lossless=False)
        distance[fancy] = np.mean([np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()
                                   for a, b in zip(cpu, gpu, strict=True)])
    if hw_decoder_load == 1.0:
        assert distance[True] < distance[False], distance
    else:  # nvImageCodec 0.9's CUDA decoder decodes these exactly as the CPU one, whichever is asked
        assert distance[True] <= distance[False], distance


@pytest.mark.parametrize("hw_decoder_load", [1.0, 0.65])
def test_encoded_bytes_in_pinned_memory_change_no_pixel(hw_decoder_load):
    # batches of 128 go to the decode lanes (split over two at load 1): each lane's stream holds the pinned block
    batch = _random_jpegs(8, 128, (100, 300), (100, 300))
    decoded = {}
    for pinned in (False, True):
        decoded[pinned] = _fed_decodes(
            batch, lambda data: fn.decoders.image_random_crop(data, device="mixed", hw_decoder_load=hw_decoder_load),
            lambda decoder, pinned=pinned: setattr(decoder, "pinned_input", pinned), runs=3)
    _assert_same(decoded[False], decoded[True])


@pytest.mark.parametrize("load", [1.0, 0.65])
def test_nvimgcodecs_buffers_from_the_pool_change_no_pixel(load):
    batch = _random_jpegs(7, 16, (200, 400), (200, 500))
    decoded = {}
    for memory in ("nvimgcodec", "pool"):
        def check(decoder, memory=memory):
            assert decoder.pooled == (memory == "pool")
        runs = _fed_decodes(batch, lambda data: fn.decoders.image(data, device="mixed", hw_decoder_load=load), check,
                            runs=3, executor_options={"decoder_memory": memory},
                            release=True)  # the pool's unused memory goes back (cuMemPoolTrimTo)
        decoded[memory] = runs[-1:]
    _assert_same(decoded["nvimgcodec"], decoded["pool"])


def test_the_pool_counts_nvimgcodecs_buffers():
    """With decoder_memory='pool', DecoderMemory.reserved() counts nvImageCodec's own buffers (what gpu_vs_dali.py
    reports of them), and closing the decoders gives them back."""
    from headrace_kernels.nvimgcodec_memory import DecoderMemory

    batch = _random_jpegs(7, 16, (200, 400), (200, 500))
    pipe = Pipeline(batch_size=len(batch), num_threads=2, device_id=0, seed=1,
                    executor_options={"decoder_memory": "pool"})
    with pipe:
        pipe.set_outputs(fn.decoders.image(fn.external_source(source=lambda: batch, batch=True, dtype=types.UINT8),
                                           device="mixed"))
    pipe.build()
    pipe.run()[0].as_cpu()
    held = DecoderMemory.reserved()[0]
    pipe.close()
    assert held > 0 and DecoderMemory.reserved()[0] < held


def test_training_pipeline_on_gpu_matches_cpu(image_folder):
    cpu = resnet50_train(data_dir=str(image_folder), batch_size=8, seed=5)
    gpu = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, seed=5)
    for _ in range(6):  # crosses the epoch boundary (37 images)
        (ci, cl), (gi, gl) = cpu.run(), gpu.run()
        assert gi.device == "gpu" and gi.layout() == "CHW"
        np.testing.assert_array_equal(cl.as_array(), gl.as_array())
        a, b = ci.as_array().astype(np.float32), gi.as_cpu().as_array().astype(np.float32)
        assert a.shape == b.shape == (8, 3, 224, 224) and gi.dtype == np.float16
        assert np.abs(a - b).mean() <= 0.06  # ~3 levels / std, from the JPEG decoders
    cpu.close()
    gpu.close()


def test_pipeline_file_round_trip_keeps_devices(image_folder, tmp_path):
    pipe = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, seed=2)
    path = tmp_path / "gpu.json"
    pipe.serialize(path)
    loaded = Pipeline.load(path)
    a, b = pipe.run()[0].as_cpu().as_array(), loaded.run()[0].as_cpu().as_array()
    np.testing.assert_array_equal(a, b)
    pipe.close()
    loaded.close()


@pytest.mark.parametrize("bad", [b"", b"not an image at all" * 50])
def test_corrupt_file_in_a_gpu_batch_names_file_and_op(tmp_path, bad):
    root = make_image_folder(tmp_path / "data", num_images=12, num_classes=2, size=(60, 80), seed=3)
    broken = root / "class_001" / "img_broken.jpg"
    broken.write_bytes(bad)
    pipe = resnet50_train(data_dir=str(root), device="gpu", batch_size=13, seed=1)
    with pytest.raises(SampleError) as info:
        pipe.run()
    message = str(info.value)
    assert "img_broken.jpg" in message and "decoders.image_random_crop" in message
    assert info.value.op == "decoders.image_random_crop" and info.value.source.endswith("img_broken.jpg")
    pipe.close()


def test_gpu_memory_is_flat_over_epochs_and_released(image_folder):
    import cupy as cp

    pipe = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=16, seed=3)
    epoch = -(-37 // 16)

    def run_epochs(n):
        for _ in range(n * epoch):
            images, _ = pipe.run()
            del images
        stage = pipe._executor.gpu
        # both looks with the prefetching thread at rest: else a cold process (slower batches) is looked at with
        # fewer batches in flight, or the batch it computes meanwhile takes what the release frees
        _wait_until_prefetched(pipe, stage)
        return stage.ctx.held_bytes

    after_two = run_epochs(2)
    after_eight = run_epochs(6)
    # the pool is reused, not grown: crop sizes vary per batch, so allow 10% + 16 MiB of fragmentation
    assert after_eight <= after_two * 1.1 + (16 << 20), (after_two, after_eight)
    stage = pipe._executor.gpu
    free_before, held_before = cp.cuda.runtime.memGetInfo()[0], stage.ctx.held_bytes
    pipe.release_memory()
    # only blocks still referenced remain (the look-ahead's next batch among them), with at most the free tails of
    # the pool's split blocks that they keep (CuPy returns a block to the device only once wholly free), and one
    # free block per per-batch purpose that the prefetching thread may have used since the release
    per_batch = sum(entry.block_bytes for entry in stage.ctx.memory.per_batch.values())
    assert stage.ctx.held_bytes - stage.ctx.used_bytes <= per_batch + (1 << 20)
    # what the pools gave back reached the device; up to 32 MiB of the decoder library's own buffers may be taken
    # since
    released = held_before - stage.ctx.held_bytes
    assert released > 0
    assert cp.cuda.runtime.memGetInfo()[0] - free_before >= released - (32 << 20)
    images, _ = pipe.run()  # still runs after a release
    assert images.as_cpu().as_array().shape == (16, 3, 224, 224)
    pipe.close()


def _wait_until_prefetched(pipe, stage, timeout: float = 30.0) -> None:
    """Wait until the prefetching thread has filled its queue and allocates no more: its queue full and the stage's
    pool unchanged over three looks 0.2 s apart (it computes one batch beyond the queue, then waits to put it)."""
    deadline, looks = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        stage.ctx.stream.synchronize()
        looks = [*looks[-2:], (pipe._prefetcher.queue.full(), stage.ctx.held_bytes)]
        if len(looks) == 3 and looks[0][0] and len(set(looks)) == 1:
            return
        time.sleep(0.2)
    raise AssertionError(f"the prefetching thread did not settle in {timeout} s: {looks}")


def test_mixed_decoder_after_a_gpu_round_trip():
    """A decoder whose input comes back from the GPU (`.gpu().cpu()`) still decodes (its host half runs late)."""
    encoded = _encoded_set()
    batch = [encoded["baseline"], encoded["gray"]]
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.decoders.image(d.cpu() if dev == "gpu" else d,
                                                                    device="mixed" if dev == "gpu" else "cpu"))
    for a, b in zip(cpu, gpu, strict=True):
        _close(a, b, lossless=False)


def test_warm_up_makes_the_decoder_before_the_first_batch(image_folder):
    warm = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, seed=5)
    warm.warm_up()
    decoders = [k.decoder for k in warm._executor.gpu.kernels() if hasattr(k, "decoder")]
    assert decoders and all(d._warmed and d._decoder is not None for d in decoders)
    cold = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, seed=5)
    np.testing.assert_array_equal(warm.run()[0].as_cpu().as_array(), cold.run()[0].as_cpu().as_array())
    warm.close()
    cold.close()
