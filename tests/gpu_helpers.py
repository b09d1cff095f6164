"""Helpers of the GPU tests: run the same one-op graph on the CPU and on the GPU over the same batch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from headrace import Pipeline, fn


def run_graph(batch: list[np.ndarray], graph: Callable, device: str, seed: int = 3, upload: bool = True) -> list:
    """graph(data, device) on one external batch (uploaded first for the GPU unless `upload` is False); returns the
    output samples as numpy arrays."""
    pipe = Pipeline(batch_size=len(batch), num_threads=2, device_id=0, seed=seed)
    with pipe:
        data = fn.external_source(source=lambda: batch, name="data")
        out = graph(data.gpu() if device == "gpu" and upload else data, device)
        pipe.set_outputs(out)
    (result,) = pipe.run()
    if result.device == "gpu":
        result = result.as_cpu()
    samples = [np.asarray(result.at(i)) for i in range(len(result))]
    pipe.close()
    return samples


def cpu_and_gpu(batch: list[np.ndarray], graph: Callable, seed: int = 3, upload: bool = True) -> tuple[list, list]:
    return run_graph(batch, graph, "cpu", seed), run_graph(batch, graph, "gpu", seed, upload)


def max_level_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """The largest absolute difference over all samples (shapes must match exactly)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape, (x.shape, y.shape)
        assert x.dtype == y.dtype, (x.dtype, y.dtype)
        if x.size:
            a, b = x.astype(np.float64), y.astype(np.float64)
            finite = np.isfinite(a) & np.isfinite(b)
            # infinities and NaNs must sit in the same places with the same values; they never count as "close"
            np.testing.assert_array_equal(a[~finite], b[~finite])
            if finite.any():
                worst = max(worst, float(np.max(np.abs(a[finite] - b[finite]))))
    return worst


def host_array(batch) -> np.ndarray:
    """A returned batch (CPU or GPU) as one host array of its samples."""
    batch = batch.as_cpu() if batch.device == "gpu" else batch
    return np.stack([np.asarray(batch.at(i)) for i in range(len(batch))])


def batch_outputs(pipe, count: int) -> list:
    """`count` batches of `pipe`: per batch, each output as one host array, or the message of the SampleError the
    batch failed with."""
    from headrace.errors import SampleError

    out = []
    for _ in range(count):
        try:
            out.append([host_array(batch) for batch in pipe.run()])
        except SampleError as exc:
            out.append(str(exc))
    return out


def assert_same_batches(reference: list, got: list) -> None:
    """Two `batch_outputs` lists are the same bits (and the same failures)."""
    assert len(reference) == len(got)
    for number, (a, b) in enumerate(zip(reference, got, strict=True)):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b, f"batch {number}"
            continue
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape, f"batch {number}"
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8), err_msg=f"batch {number}")


def folder_with_a_bad_jpeg(root) -> None:
    """24 small JPEGs in two class folders under `root`, the tenth of them (sorted) not a JPEG."""
    from headrace.data.synthetic import make_image_folder

    make_image_folder(root, num_images=24, num_classes=2, size=(48, 64), seed=5)
    sorted(root.rglob("*.jpg"))[9].write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG" * 8)


def decode_batches(root, executor_options: dict, count: int = 6) -> list:
    """`batch_outputs` of a mixed decode + resize of the images under `root` (batches of 4), with these executor
    options."""
    from headrace import pipeline_def, types

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=2, executor_options=executor_options)
    def decode():
        jpegs, labels = fn.readers.file(file_root=str(root), name="Reader")
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
        return fn.resize(images, resize_x=32, resize_y=32), labels

    pipe = decode()
    pipe.build()
    out = batch_outputs(pipe, count)
    pipe.close()
    return out


def rn50_batches(folder, executor_options: dict, check=None, count: int = 6) -> list:
    """`batch_outputs` of the RN50 training pipeline on the GPU over `folder` (batches of 8), with these executor
    options; `check(pipe)` runs on the built pipeline first."""
    from headrace.demo import resnet50_train

    pipe = resnet50_train(data_dir=str(folder), device="gpu", batch_size=8, num_threads=2, device_id=0, seed=7,
                          executor_options=executor_options)
    pipe.build()
    if check is not None:
        check(pipe)
    out = batch_outputs(pipe, count)
    pipe.close()
    return out
