"""The GPU training pipeline gives the same bits whenever the look-ahead starts (before the decode, after it, or
never), with any thread count and with the readers on the pool or not. (Against the CPU pipeline the hardware
decoder's pixels may differ from libjpeg-turbo's: tests/test_gpu_decode.py states that tolerance; the crop windows
and flips, drawn on the host, are compared exactly in tests/test_batch_draws.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from headrace.demo import resnet50_train


def _batches(root, device: str, threads: int, count: int = 3, options: dict | None = None,
             batch_size: int = 8) -> list[np.ndarray]:
    pipe = resnet50_train(data_dir=str(root), device=device, batch_size=batch_size, num_threads=threads,
                          device_id=0 if device == "gpu" else None, seed=7, executor_options=options)
    pipe.build()
    out = []
    for _ in range(count):
        images, labels = pipe.run()
        images = images.as_cpu() if images.device == "gpu" else images
        out.append(np.stack([np.asarray(images.at(i)) for i in range(len(images))]))
        out.append(np.stack([np.asarray(labels.at(i)) for i in range(len(labels))]))
    pipe.close()
    return out


@pytest.mark.gpu
def test_gpu_pipeline_bits_do_not_depend_on_the_look_ahead(image_folder):
    reference = None
    for mode, threads, parallel_reads in (("before", 1, False), ("before", 4, True), ("after", 3, False),
                                          ("off", 2, False)):
        gpu = _batches(image_folder, "gpu", threads, options={"lookahead": mode, "parallel_reads": parallel_reads})
        reference = reference or gpu
        for a, b in zip(reference, gpu, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=f"look-ahead {mode}")


def _decoders(pipe) -> list:
    return [kernel.decoder for kernel in pipe._executor.gpu.kernels() if hasattr(kernel, "launch_ahead")]


@pytest.mark.gpu
def test_next_batch_decodes_in_the_decode_lane_ahead(tmp_path):
    """The look-ahead hands batch i+1's decode (64 images or more) to the decoder's lane, a thread and stream of its
    own, before batch i+1 is asked for; the batches are the same bits as with no look-ahead, also when memory is
    released or the pipeline closed while such a decode may be under way."""
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=160, num_classes=2, size=(48, 64), seed=4)
    reference = _batches(tmp_path, "gpu", 2, count=4, options={"lookahead": "off"}, batch_size=64)
    pipe = resnet50_train(data_dir=str(tmp_path), device="gpu", batch_size=64, num_threads=2, device_id=0, seed=7,
                          executor_options={"coalesce_batches": 1})  # batch by batch: each decoded ahead
    pipe.build()
    (decoder,) = _decoders(pipe)
    got = []
    for iteration in range(4):
        images, labels = pipe.run()
        if iteration == 1:
            pipe.release_memory()  # the decoders go once the lanes are done; the next batches make new ones
        got += [np.stack([np.asarray(images.as_cpu().at(i)) for i in range(len(images))]),
                np.stack([np.asarray(labels.at(i)) for i in range(len(labels))])]
    assert decoder.lane_count() == 1  # hw_decoder_load 0.65: one lane, ahead
    assert decoder.decoded_ahead >= 4  # every batch run so far (the prefetcher may have run more)
    pipe.close()  # with later batches' decodes handed to the lanes, maybe under way
    for a, b in zip(reference, got, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.gpu
def test_a_large_batch_decodes_in_two_lanes_with_the_same_bits(tmp_path):
    """With every image on the hardware decoder (hw_decoder_load 1), a batch of 64 or more decodes as two parts on
    two decoders at once; each image's pixels are those of a pipeline whose batches are too small to split."""
    from headrace import fn, pipeline_def, types
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=128, num_classes=2, size=(48, 64), seed=3)

    def decoded(batch_size: int, lookahead: str) -> tuple[list[np.ndarray], list]:
        @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0, seed=5,
                      executor_options={"lookahead": lookahead})
        def pipe():
            jpegs, _ = fn.readers.file(file_root=str(tmp_path), random_shuffle=False)
            return fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=1.0)

        p = pipe()
        p.build()
        images = []
        for _ in range(128 // batch_size):
            (out,) = p.run()
            host = out.as_cpu()
            images += [np.asarray(host.at(i)) for i in range(len(host))]
        decoders = [k.decoder for k in p._executor.gpu.kernels() if hasattr(k, "launch_ahead")]
        lanes = decoders[0].lane_count()
        p.close()
        return images, lanes

    small, small_lanes = decoded(32, "before")
    assert small_lanes == 1
    for lookahead in ("before", "off"):
        large, lanes = decoded(128, lookahead)
        assert lanes == 2
        assert len(large) == len(small) == 128
        for i, (a, b) in enumerate(zip(small, large, strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"image {i}, look-ahead {lookahead}")


@pytest.mark.gpu
def test_batches_go_whole_to_lane_zero_until_the_second_decoder_is_made(tmp_path, monkeypatch):
    """The lanes make their decoders at build; a batch decoded while lane 1's decoder is still being made goes
    whole to lane 0 instead of waiting for it, and later batches split over both. The bits do not change."""
    import threading
    import time

    from headrace import fn, pipeline_def, types
    from headrace.data.synthetic import make_image_folder
    from headrace_kernels.gpu import decode

    make_image_folder(tmp_path, num_images=128, num_classes=2, size=(48, 64), seed=6)
    second_may_start = threading.Event()
    warm_up, split = decode.MixedDecoder._warm_up, decode.split
    lanes_asked: list[int] = []  # the lanes each batch was split over, in order

    def slow_second_warm_up(self, decoder, capacity, stream):
        if decoder is not self._decoder:  # lane 1's decoder, made on its thread
            second_may_start.wait(60)
        return warm_up(self, decoder, capacity, stream)

    def counting_split(count, lanes):
        lanes_asked.append(lanes)
        return split(count, lanes)

    monkeypatch.setattr(decode.MixedDecoder, "_warm_up", slow_second_warm_up)
    monkeypatch.setattr(decode, "split", counting_split)

    def decoded(lookahead: str, batches: int) -> list[np.ndarray]:
        @pipeline_def(batch_size=128, num_threads=2, device_id=0, seed=5, executor_options={"lookahead": lookahead})
        def pipe():
            jpegs, _ = fn.readers.file(file_root=str(tmp_path), random_shuffle=False)
            return fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=1.0)

        p = pipe()
        p.build()
        (decoder,) = [k.decoder for k in p._executor.gpu.kernels() if hasattr(k, "launch_ahead")]
        images = []
        for iteration in range(batches):
            if iteration == 1:  # lane 1's decoder may now be made
                second_may_start.set()
                deadline = time.monotonic() + 60
                while decoder.ready_lanes() < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
            (out,) = p.run()
            host = out.as_cpu()
            images += [np.asarray(host.at(i)) for i in range(len(host))]  # random crops: shapes differ
        p.close()
        return images

    got = decoded("before", 8)  # the prefetcher and the look-ahead may have split a few batches before the event
    assert lanes_asked[0] == 1 and lanes_asked[-1] == 2, lanes_asked
    for i, (a, b) in enumerate(zip(decoded("off", 8), got, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"image {i}")


@pytest.mark.gpu
def test_threads_kept_near_the_gpu_give_the_same_bits(tmp_path):
    """cpu_affinity='gpu': the pipeline's threads (the lanes among them) run on the GPU's NUMA node's CPUs where the
    machine lists them (else where they were), with the same batches."""
    import os
    import threading

    from headrace.data.synthetic import make_image_folder
    from headrace_kernels.gpu.affinity import gpu_cpus

    make_image_folder(tmp_path, num_images=160, num_classes=2, size=(48, 64), seed=4)
    reference = _batches(tmp_path, "gpu", 2, count=3, batch_size=64)
    seen = {}

    def note(*_):
        seen[threading.current_thread().name] = os.sched_getaffinity(0)

    pipe = resnet50_train(data_dir=str(tmp_path), device="gpu", batch_size=64, num_threads=2, device_id=0, seed=7,
                          executor_options={"cpu_affinity": "gpu"})
    pipe.build()
    got = []
    for _ in range(3):
        images, labels = pipe.run()
        images = images.as_cpu()
        got.append(np.stack([np.asarray(images.at(i)) for i in range(len(images))]))
        got.append(np.stack([np.asarray(labels.at(i)) for i in range(len(labels))]))
    (decoder,) = _decoders(pipe)
    lanes = list(decoder._lanes)
    assert lanes and all(lane.cpus == gpu_cpus(0) for lane in lanes)
    for lane in lanes:
        lane.submit(note).result()
    expected = gpu_cpus(0) or os.sched_getaffinity(0)
    assert seen and all(cpus == expected for cpus in seen.values()), (seen, expected)
    pipe.close()
    for a, b in zip(reference, got, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.gpu
def test_a_fed_pipeline_warms_its_decoder_up_from_build_on_its_lane(tmp_path, monkeypatch):
    """A fed pipeline (external_source without source, as a served one) makes and warms up its decoder on the decode
    lane's thread from build() on, while the caller readies the first batch, not in the first run; its images are
    those that a pipeline reading the same files decodes."""
    import threading
    import time
    from pathlib import Path

    from headrace import fn, pipeline_def, types
    from headrace.data.synthetic import make_image_folder
    from headrace_kernels.gpu import decode

    make_image_folder(tmp_path, num_images=64, num_classes=1, size=(48, 64), seed=8)
    files = sorted(p for p in Path(tmp_path).rglob("*.jpg"))
    warmed_in: list[str] = []
    warm_up = decode.MixedDecoder._warm_up

    def noting(self, decoder, capacity, stream):
        warmed_in.append(threading.current_thread().name)
        return warm_up(self, decoder, capacity, stream)

    monkeypatch.setattr(decode.MixedDecoder, "_warm_up", noting)

    @pipeline_def(batch_size=64, num_threads=2, device_id=0, seed=3, prefetch_queue_depth=1)
    def fed():
        encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)
        return fn.decoders.image(encoded, device="mixed", output_type=types.RGB)

    @pipeline_def(batch_size=64, num_threads=2, device_id=0, seed=3)
    def read():
        jpegs, _ = fn.readers.file(files=[str(f) for f in files], random_shuffle=False)
        return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)

    pipe = fed()
    pipe.build()
    deadline = time.monotonic() + 60
    while not warmed_in and time.monotonic() < deadline:
        time.sleep(0.01)
    assert warmed_in and warmed_in[0] != threading.main_thread().name, warmed_in
    (images,) = pipe.run(encoded=[np.fromfile(f, np.uint8) for f in files])
    reference = read()
    reference.build()
    (expected,) = reference.run()
    images, expected = images.as_cpu(), expected.as_cpu()
    for i in range(len(files)):
        np.testing.assert_array_equal(np.asarray(images.at(i)), np.asarray(expected.at(i)), err_msg=f"image {i}")
    pipe.close()
    reference.close()
