"""The GPU training pipeline gives the same bits whenever the look-ahead starts (before the decode, after it, or
never), with any thread count and with the readers on the pool or not. (Against the CPU pipeline the hardware
decoder's pixels may differ from libjpeg-turbo's: tests/test_gpu_decode.py states that tolerance; the crop windows
and flips, drawn on the host, are compared exactly in tests/test_batch_draws.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from headrace.demo import resnet50_train


def _batches(root, device: str, threads: int, count: int = 3, options: dict | None = None) -> list[np.ndarray]:
    pipe = resnet50_train(data_dir=str(root), device=device, batch_size=8, num_threads=threads,
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
