"""The SSD300 example (examples/ssd_pipeline.py) on a tiny COCO set generated here: its graph run by headrace and
(marker dali) by DALI's CPU build, the tiny detection model's training steps, a mid-epoch checkpoint resumed bit for
bit, bad files named, and (marker gpu) the GPU pipeline against the CPU one.

The graph is the example's own function, given a `Pinned` stand-in for `fn` where the two libraries' random streams
would otherwise differ: the coin flip fixed (probability 0 or 1), the colour jitter's uniform draws replaced by
fixed values, and random_bbox_crop asked for a window of scaling 1 and aspect ratio 1 (the whole image, through
the op and image_slice). Given those, headrace and DALI agree: encoded boxes and labels exactly; images within 2
levels of the uint8 image brightness_contrast gives (|difference| x std <= 2.01; the JPEG decoders and resize round
differently), 0.05 levels on average. The random pipeline (every op drawing) is checked in both libraries by the
windows random_bbox_crop chose and the coins drawn (scaling, aspect ratio, inside the image; full windows from
allow_no_crop; both flips seen) and by what box_encoder must give: default boxes where the label is background,
boxes inside the image otherwise. GPU against CPU (pinned): boxes and labels exactly, images within 3 levels on
average (the JPEG decoders differ, as in test_gpu_decode.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from oprun import needs_dali

from headrace.errors import SampleError, SchemaError

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import ssd_pipeline as example

BATCH, IMAGES = 4, 8  # 8 images, one without boxes: 7 read, 2 batches an epoch (the last one padded)
ANCHORS_XYWH = example.default_boxes("xywh")
STD = np.asarray(example.STD, np.float32).reshape(3, 1, 1)
PINNED = [(1, (1.3, 0.8, 1.05, 0.2)), (0, (0.6, 1.4, 0.9, -0.45))]  # coin; saturation, contrast, brightness, hue


class Pinned:
    """A library's `fn` with the example's random choices pinned (pin=True) or only recorded (pin=False): the coin,
    the uniform draws and random_bbox_crop's window. `extras` are the recorded nodes (anchor, shape, coin)."""

    def __init__(self, fn, pin: bool = True, coin: int = 1, values: tuple[float, ...] = ()):
        self._fn, self._pin, self._values = fn, pin, list(values)
        self.extras = []
        self.random = SimpleNamespace(coin_flip=self._coin_flip, uniform=self._uniform)
        self._coin = coin

    def _coin_flip(self, probability: float = 0.5):
        node = self._fn.random.coin_flip(probability=float(self._coin) if self._pin else probability)
        self.extras.append(node)
        return node

    def _uniform(self, range):
        if not self._pin:
            return self._fn.random.uniform(range=range)
        value = self._values.pop(0)
        assert range[0] <= value <= range[1]
        return value

    def random_bbox_crop(self, *inputs, **kwargs):
        if self._pin:
            kwargs = {**kwargs, "scaling": [1.0, 1.0], "aspect_ratio": [1.0, 1.0]}
        outputs = self._fn.random_bbox_crop(*inputs, **kwargs)
        self.extras[:0] = outputs[:2]
        return outputs

    def __getattr__(self, name: str):
        return getattr(self._fn, name)


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=IMAGES, seed=5, size=(60, 80))


def _as_numpy(result) -> list[np.ndarray]:
    if type(result).__name__ == "TensorListGPU":  # headrace's and DALI's
        result = result.as_cpu()
    return [np.array(result.at(i)) for i in range(len(result))]


def _run(name: str, root: str, annotations: str, batches: int, pinned: dict | None, device: str = "cpu",
         seed: int = 3) -> tuple[list[list[list[np.ndarray]]], list[str]]:
    """`batches` batches of the example's graph in library `name` (per batch, per output, the samples) and the
    outputs' layouts; pinned: Pinned's coin and values, or None for the random pipeline with its windows and coins
    as three extra outputs."""
    lib = example.library(name)

    @lib.pipeline_def(batch_size=BATCH, num_threads=2, device_id=0 if device == "gpu" else None, seed=seed)
    def pipe():
        fn = Pinned(lib.fn, **pinned) if pinned else Pinned(lib.fn, pin=False)
        outputs = example.ssd300_training(fn, lib.types, root, annotations, device, shuffle=False)
        return (*outputs, *([] if pinned else fn.extras))

    built = pipe()
    built.build()
    out, layouts = [], []
    for _ in range(batches):
        results = built.run()
        layouts = [r.layout() for r in results]
        out.append([_as_numpy(r) for r in results])
    return out, layouts


def _check_encoded(images: list[np.ndarray], boxes: list[np.ndarray], labels: list[np.ndarray]) -> None:
    """Shapes and types of one batch, and box_encoder's rules: background anchors keep their default box (as
    x, y, w, h), matched ones get a box inside the image and a label of the set (1..3)."""
    for image, box, label in zip(images, boxes, labels, strict=True):
        assert image.shape == (3, 300, 300) and image.dtype == np.float32 and np.isfinite(image).all()
        assert box.shape == (8732, 4) and box.dtype == np.float32
        assert label.shape == (8732,) and label.dtype == np.int32
        background = label == 0
        np.testing.assert_allclose(box[background], ANCHORS_XYWH[background], atol=1e-6)
        assert set(np.unique(label[~background]).tolist()) <= {1, 2, 3} and (~background).any()
        matched = box[~background]
        assert (matched[:, 2:] > 0).all()
        assert (matched[:, :2] - matched[:, 2:] / 2 >= -1e-6).all() and (matched[:, :2] + matched[:, 2:] / 2
                                                                           <= 1 + 1e-6).all()


def test_default_boxes_are_ssd300s():
    ltrb, xywh = example.default_boxes("ltrb"), example.default_boxes("xywh")
    assert ltrb.shape == xywh.shape == (8732, 4) and ltrb.dtype == np.float32
    assert sum(side * side * (2 + 2 * len(r)) for side, r in zip(example.FEATURE_MAPS, example.ASPECT_RATIOS,
                                                                  strict=True)) == 8732
    np.testing.assert_allclose(ltrb[:, 2:] - ltrb[:, :2], xywh[:, 2:], atol=1e-6)
    np.testing.assert_allclose((ltrb[:, 2:] + ltrb[:, :2]) / 2, xywh[:, :2], atol=1e-6)
    # the first box: the 38x38 map's top-left cell (centre 0.5 / 37.5), 21 pixels of 300 square
    np.testing.assert_allclose(xywh[0], [0.5 / 37.5, 0.5 / 37.5, 0.07, 0.07], rtol=1e-6)


@pytest.mark.parametrize("coin, values", PINNED)
def test_pinned_pipeline_encodes_the_boxes_of_the_file(coco, coin, values):
    batches, layouts = _run("headrace", *coco, 2, {"coin": coin, "values": values})
    assert layouts == ["CHW", "", ""]
    for images, boxes, labels in batches:
        _check_encoded(images, boxes, labels)
    # the whole-image window keeps every box: each positive default box holds one of its image's boxes of the file
    # (relative centre and size, mirrored when the coin says so) with that box's label; every box has one
    data = json.loads(Path(coco[1]).read_text())
    kept = [e for e in sorted(data["images"], key=lambda e: e["id"])
            if any(a["image_id"] == e["id"] for a in data["annotations"])]
    samples = [(b, i) for b in range(2) for i in range(BATCH)]
    for (b, i), image in zip(samples, kept + kept[-1:], strict=True):  # pad_last_batch repeats the last image
        width, height = image["width"], image["height"]
        truth = []
        for a in (a for a in data["annotations"] if a["image_id"] == image["id"]):
            x, y, w, h = a["bbox"]
            cx = (x + w / 2) / width
            truth.append(([1 - cx if coin else cx, (y + h / 2) / height, w / width, h / height], a["category_id"] - 9))
        encoded, labels = batches[b][1][i], batches[b][2][i]
        found = set()
        for box, label in zip(encoded[labels > 0], labels[labels > 0], strict=True):
            match = [k for k, (t, t_label) in enumerate(truth) if np.allclose(box, t, atol=1e-5) and t_label == label]
            assert match, (b, i, box, label, truth)
            found.update(match)
        assert found == set(range(len(truth)))


def _check_windows(batches: list) -> None:
    """random_bbox_crop's windows (anchor, shape: relative x, y and w, h) and the coins of the random pipeline."""
    windows, coins = [], []
    for batch in batches:
        images, boxes, labels, anchors, shapes, flips = batch
        _check_encoded(images, boxes, labels)
        for anchor, shape, coin in zip(anchors, shapes, flips, strict=True):
            assert anchor.shape == shape.shape == (2,) and anchor.dtype == shape.dtype == np.float32
            assert (anchor >= 0).all() and (anchor + shape <= 1 + 1e-6).all()
            full = np.allclose(shape, 1) and np.allclose(anchor, 0)
            if not full:
                assert (shape >= 0.3 - 1e-6).all() and (shape <= 1 + 1e-6).all()
                assert 0.5 - 1e-5 <= shape[0] / shape[1] <= 2 + 1e-5
            windows.append(full)
            coins.append(int(coin))
    assert set(coins) == {0, 1} and not all(windows)


def test_random_pipeline_windows_and_encoding(coco):
    batches, layouts = _run("headrace", *coco, 6, None)
    assert layouts[:3] == ["CHW", "", ""]
    _check_windows(batches)


def test_checkpoint_mid_epoch_resumes_bit_identically(coco):
    lib = example.library("headrace")
    pipe = example.build_pipeline(lib, *coco, batch_size=2, shuffle=True, checkpoint=True)
    pipe.build()
    for _ in range(3):  # 4 batches an epoch: stop in the middle of the first
        pipe.run()
    state = pipe.checkpoint()
    expected = [[_as_numpy(r) for r in pipe.run()] for _ in range(4)]  # across the epoch's end
    resumed = example.build_pipeline(lib, *coco, batch_size=2, num_threads=1, shuffle=True, checkpoint=state)
    resumed.build()
    for want in expected:
        got = [_as_numpy(r) for r in resumed.run()]
        for g, w in zip(got, want, strict=True):
            assert all(np.array_equal(a, b) for a, b in zip(g, w, strict=True))


def _trains(device: str, coco) -> dict:
    torch.manual_seed(0)
    model = example.TinySSD(4)
    before = [p.detach().clone() for p in model.parameters()]
    result = example.train(example.library("headrace"), *coco, device=device, batch_size=BATCH, steps=2,
                           model=model)
    assert result["batches"] == 2 and result["samples"] == IMAGES - 1  # PARTIAL: 4 + 3, every kept image once
    assert all(math.isfinite(loss) and loss > 0 for loss in result["losses"])
    after = [p.detach().cpu() for p in result["model"].parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(before[-12:], after[-12:], strict=True))  # the heads trained
    return result


def test_training_steps_of_a_tiny_ssd(coco):
    _trains("cpu", coco)


def test_main_prints_a_summary(coco, capsys):
    result = example.main(["--data", coco[0], "--annotations", coco[1], "--batch-size", "2"])
    assert result["batches"] == 1 and math.isfinite(result["losses"][0])
    assert "2 images in 1 step(s), SSD loss" in capsys.readouterr().out


def test_bad_data_is_named(tmp_path):
    root, annotations = example.write_coco_set(tmp_path, count=4, seed=1, size=(40, 50))
    Path(root, "000001.jpg").write_bytes(b"not a JPEG" * 20)
    lib = example.library("headrace")
    pipe = example.build_pipeline(lib, root, annotations, batch_size=2, shuffle=False)
    pipe.build()
    with pytest.raises(SampleError, match=r"decoders.image_slice .*sample 1 of batch 0 .*000001.jpg"):
        pipe.run()
    data = json.loads(Path(annotations).read_text())
    data["annotations"][0]["bbox"] = [1, 2, 3]
    Path(annotations).write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=r"readers.coco .*annotation #0: 'bbox' must be \[x, y, width, height\]"):
        example.build_pipeline(lib, root, annotations).build()


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        example.main(["--data", "somewhere"])  # without --annotations
    with pytest.raises(ValueError, match="library must be"):
        example.library("tensorflow")


@needs_dali
@pytest.mark.dali
@pytest.mark.parametrize("coin, values", PINNED)
def test_same_graph_in_dali_gives_the_same_outputs(coco, coin, values):
    pinned = {"coin": coin, "values": values}
    ours, our_layouts = _run("headrace", *coco, 2, pinned)
    theirs, their_layouts = _run("dali", *coco, 2, pinned)
    assert our_layouts == their_layouts
    for our_batch, their_batch in zip(ours, theirs, strict=True):
        for our_image, their_image in zip(our_batch[0], their_batch[0], strict=True):
            assert our_image.shape == their_image.shape and our_image.dtype == their_image.dtype
            levels = np.abs(our_image - their_image) * STD  # back to brightness_contrast's uint8 levels
            assert levels.max() <= 2.01 and levels.mean() <= 0.05, (levels.max(), levels.mean())
        for k in (1, 2):
            for a, b in zip(our_batch[k], their_batch[k], strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)


@needs_dali
@pytest.mark.dali
def test_random_pipeline_in_dali_passes_the_same_checks(coco):
    batches, layouts = _run("dali", *coco, 6, None)
    assert layouts[:3] == ["CHW", "", ""]
    _check_windows(batches)


@needs_dali
@pytest.mark.dali
def test_main_runs_with_dali(coco, capsys):
    result = example.main(["--library", "dali", "--data", coco[0], "--annotations", coco[1], "--batch-size", "2"])
    assert result["batches"] == 1 and math.isfinite(result["losses"][0])
    assert "(dali, pipeline on cpu)" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("coin, values", PINNED)
def test_gpu_pipeline_matches_the_cpu_one(coco, coin, values):
    pinned = {"coin": coin, "values": values}
    on_gpu, gpu_layouts = _run("headrace", *coco, 2, pinned, "gpu")
    on_cpu, cpu_layouts = _run("headrace", *coco, 2, pinned)
    assert gpu_layouts == cpu_layouts
    for gpu_batch, cpu_batch in zip(on_gpu, on_cpu, strict=True):
        _check_encoded(*gpu_batch)
        for a, b in zip(gpu_batch[0], cpu_batch[0], strict=True):
            assert (np.abs(a - b) * STD).mean() <= 3.0
        for k in (1, 2):
            for a, b in zip(gpu_batch[k], cpu_batch[k], strict=True):
                np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_gpu_random_pipeline_windows_and_encoding(coco):
    batches, _ = _run("headrace", *coco, 6, None, "gpu")
    _check_windows(batches)


@pytest.mark.gpu
def test_gpu_training_steps_of_a_tiny_ssd(coco):
    _trains("gpu", coco)
