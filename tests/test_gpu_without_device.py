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
    from headrace_kernels.cpu.geometry_ops import crop_window
    from headrace_kernels.gpu.image_ops import SAMPLE, Batch, SampleFailureError, set_crops

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
        expected, error, anchors = [], None, []
        for i in range(n):
            try:
                image = np.arange(heights[i] * widths[i]).reshape(heights[i], widths[i], 1)  # pixel = its index
                view, top, left, out_h, out_w = crop_window(image, args, "crop")
                expected.append((out_h, out_w))
                if view.size:  # where the window starts: its first pixel's index, less the padding before it
                    anchors.append((i, int(view[0, 0, 0]) // widths[i] - top, int(view[0, 0, 0]) % widths[i] - left))
            except ValueError:
                error = i if error is None else error
        try:
            set_crops(batch, [args] * n, heights.astype(np.int64), widths.astype(np.int64), 0,
                      np.dtype(np.uint8), np.dtype(np.uint8))
        except SampleFailureError as exc:
            assert exc.index == error
            continue
        assert error is None
        assert list(zip(batch.rec["out_h"].tolist(), batch.rec["out_w"].tolist(), strict=True)) == expected
        for i, y, x in anchors:
            assert (batch.rec["crop_y"][i], batch.rec["crop_x"][i]) == (y, x)


class _HostImage:
    """What the GPU kernels' host side reads of a device image (shape, strides, dtype, pointer), without a GPU."""

    def __init__(self, height: int, width: int):
        self.shape, self.strides, self.itemsize, self.ndim = (height, width, 3), (width * 3, 3, 1), 1, 3
        self.dtype, self.ptr = np.dtype(np.uint8), 0

    @property
    def data(self):
        return self


@pytest.mark.parametrize("interp", [1, 2, 0, 3])
@pytest.mark.parametrize("sizes", [{"resize_x": 224.0, "resize_y": 224.0}, {"resize_shorter": 41.3}])
def test_gpu_resize_tables_are_the_cpu_kernels(interp, sizes):
    """The tap tables the GPU resamples with (made for a whole batch at once) are, sample by sample, the ones the
    CPU kernel uses: the ground of the GPU's bit-exactness (the GPU side is checked on a GPU machine)."""
    from headrace_kernels.cpu.geometry_ops import resample_taps
    from headrace_kernels.gpu.image_ops import MODE_COPY, Batch, set_resizes
    from headrace_kernels.windows import resize_plan

    rng = np.random.default_rng(interp)
    images = [_HostImage(int(rng.integers(1, 400)), int(rng.integers(1, 500))) for _ in range(40)]
    images.append(_HostImage(224, 224))  # a copy: no table
    args = {"interp_type": interp, "antialias": True, "subpixel_scale": True, "mode": "default", "max_size": None,
            "resize_shorter": 0.0, "resize_longer": 0.0, "size": None, "resize_x": 0.0, "resize_y": 0.0, **sizes}
    batch = Batch(images, 3, "uint8", np.dtype(np.uint8))
    set_resizes(batch, [args] * len(images), np.dtype(np.uint8))
    tables = batch.tables if isinstance(batch.tables, tuple) else batch.tables.on_host()  # device-made: as host
    which, (row_idx, row_w, col_idx, col_w), (row_start, col_start) = tables
    position = {int(i): k for k, i in enumerate(which)}
    for i, image in enumerate(images):
        out_h, out_w, region = resize_plan(image.shape[0], image.shape[1], args)
        taps = resample_taps(image.shape[0], image.shape[1], out_h, out_w, interp, True, region, np.uint8)
        if taps is None:
            assert batch.rec["mode"][i] == MODE_COPY and i not in position
            continue
        k, ty, tx = position[i], int(batch.rec["ty"][i]), int(batch.rec["tx"][i])
        (rows, rows_w), (cols, cols_w) = taps
        rs, cs = int(row_start[k]), int(col_start[k])
        np.testing.assert_array_equal(row_idx[rs:rs + out_h * ty], rows.ravel())
        np.testing.assert_array_equal(row_w[rs:rs + out_h * ty], rows_w.ravel())
        np.testing.assert_array_equal(col_idx[cs:cs + out_w * tx], cols.ravel())
        np.testing.assert_array_equal(col_w[cs:cs + out_w * tx], cols_w.ravel())
        assert (batch.rec["col_lo"][i], batch.rec["col_n"][i]) == (cols.min(), cols.max() - cols.min() + 1)


def test_resampling_rows_split_into_chunks_within_the_limit():
    from headrace_kernels.gpu.image_ops import row_chunks

    bounds, offsets = row_chunks(np.array([10, 20, 30, 5, 50, 0, 1]), 40)
    assert bounds == [0, 2, 4, 5, 7]  # 10+20 | 30+5 | 50 alone (over the limit) | 0+1
    assert offsets.tolist() == [0, 10, 0, 30, 0, 0, 0]
    assert row_chunks(np.array([], np.int64), 40)[0] == [0, 0]
    rng = np.random.default_rng(0)
    for _ in range(500):
        sizes, limit = rng.integers(0, 100, rng.integers(1, 20)), int(rng.integers(1, 200))
        bounds, offsets = row_chunks(sizes, limit)
        assert bounds[0] == 0 and bounds[-1] == len(sizes)
        for first, last in zip(bounds[:-1], bounds[1:], strict=True):
            chunk = sizes[first:last]
            assert chunk.sum() <= limit or (chunk > 0).sum() <= 1  # only a sample over the limit goes alone
            assert offsets[first:last].tolist() == np.concatenate([[0], np.cumsum(chunk)[:-1]]).tolist()


def test_the_ssd_image_chain_is_fused_into_one_kernel():
    """flip -> resize -> hsv -> brightness_contrast -> crop_mirror_normalize of the SSD300 example is replaced by
    one fused kernel, and bb_flip -> box_encoder by another; with the resize also a pipeline output, the image
    chain is not fused."""
    import sys
    from pathlib import Path

    from headrace import types
    from headrace.engine.gpu_stage import fused_chains
    from headrace.graph import Graph, building

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from ssd_pipeline import ssd300_training

    graph = Graph()
    with building(graph):
        images, boxes, labels = ssd300_training(fn, types, "/nonexistent", "/nonexistent.json", device="gpu")
    chains = [tuple(node.schema.name for node in chain) for _, chain in fused_chains(graph.nodes, [images, boxes])]
    assert sorted(chains) == [("bb_flip", "box_encoder"),
                              ("flip", "resize", "hsv", "brightness_contrast", "crop_mirror_normalize")]
    resized = next(node for node in graph.nodes if node.schema.name == "resize").outputs[0]
    chains = [tuple(node.schema.name for node in chain) for _, chain in fused_chains(graph.nodes, [images, resized])]
    assert chains == [("bb_flip", "box_encoder")]  # no registered image chain starts after the resize


def test_every_resize_chain_is_registered_with_the_fused_kernel():
    from headrace_kernels.gpu.fused_ops import FusedResizeNormalize, resize_chains
    from headrace_kernels.registry import fused_gpu_kernels

    registered = {entry.ops: entry.impl for entry in fused_gpu_kernels()}
    chains = list(resize_chains())
    assert len(chains) == 26 and ("resize", "crop_mirror_normalize") in chains
    assert all(registered[chain] is FusedResizeNormalize for chain in chains)
