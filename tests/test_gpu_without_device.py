"""Without a GPU (CI): headrace imports, the CUDA sources ship with the package, and device='gpu' / 'mixed' raise a
DeviceError naming the node and the reason at build time."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import Pipeline, fn
from headrace.errors import DeviceError
from tests.conftest import HAS_GPU


def test_cuda_sources_ship_with_the_package():
    from headrace_kernels.gpu.runtime import kernel_source

    assert "image_store" in kernel_source("image.cu") and "cast_any" in kernel_source("cast.cu")


def test_sample_record_layout_matches_the_cuda_struct():
    import re

    from headrace_kernels.gpu.image_ops import SAMPLE
    from headrace_kernels.gpu.runtime import kernel_source

    source = kernel_source("image.cu")
    body = source[source.index("struct Sample {"):source.index("};", source.index("struct Sample {"))]
    names = []
    for match in re.finditer(r"^\s*(unsigned long long|int|float)\s+([^;]+);", body, re.MULTILINE):
        names += [name.strip().split("[")[0] for name in match.group(2).split(",")]
    assert names == list(SAMPLE.names)


@pytest.mark.skipif(HAS_GPU, reason="checks the error raised on machines without a GPU")
@pytest.mark.parametrize("device", ["gpu", "mixed"], ids=["device_g", "device_m"])
def test_gpu_device_without_gpu_raises_device_error(device):
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1)
    with pipe:
        data = fn.external_source(source=lambda: [np.zeros(4, np.uint8)] * 2)
        if device == "mixed":
            out = fn.decoders.image(data, device="mixed")
        else:
            out = fn.cast(data.gpu(), dtype=9)
        pipe.set_outputs(out)
    with pytest.raises(DeviceError) as info:
        pipe.build()
    message = str(info.value)
    assert "node '" in message and f"device '{device}'" in message
    assert "GPU" in message or "CuPy" in message


def test_gpu_crop_windows_follow_the_cpu_rule():
    """The GPU records' crop windows (computed for a whole batch at once) equal the CPU kernel's per sample."""
    from headrace_kernels.cpu.geometry_ops import _window
    from headrace_kernels.gpu.image_ops import SAMPLE, Batch, SampleFailureError, _set_crops

    rng = np.random.default_rng(2)
    for _ in range(40):
        n = 6
        heights, widths = rng.integers(1, 50, n), rng.integers(1, 50, n)
        args = {"crop": [float(rng.integers(1, 60)), float(rng.integers(1, 60))] if rng.random() < 0.5 else None,
                "crop_h": float(rng.integers(0, 40)), "crop_w": float(rng.integers(0, 40)),
                "crop_pos_x": float(rng.random()), "crop_pos_y": float(rng.random()),
                "out_of_bounds_policy": str(rng.choice(["error", "pad", "trim_to_shape"])), "fill_values": [0.0]}
        batch = Batch.__new__(Batch)
        batch.rec, batch.channels = np.zeros(n, SAMPLE), 3
        expected, error = [], None
        for i in range(n):
            try:
                view, top, left, out_h, out_w = _window(np.zeros((heights[i], widths[i], 3)), args, "crop")
                expected.append((out_h, out_w))
            except ValueError:
                error = i if error is None else error
        try:
            _set_crops(batch, [args] * n, heights.astype(np.int64), widths.astype(np.int64))
        except SampleFailureError as exc:
            assert exc.index == error
            continue
        assert error is None
        assert list(zip(batch.rec["out_h"].tolist(), batch.rec["out_w"].tolist(), strict=True)) == expected
