"""The `headrace` command end to end on small generated data: every subcommand, its pictures and its error paths."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from triton_helpers import NO_SERVER, have_server

from headrace import Pipeline, fn, pipeline_def, types
from headrace.cli import main
from headrace.cli.contact_sheet import sheet_layout
from headrace.cli.graph_picture import DPI, canvas_inches
from headrace.cli.inspect_graph import edge_specs as infer
from headrace.cli.loading import place_on_device
from headrace.demo import resnet50_train, resnet50_val

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
HEIGHT, WIDTH = 24, 32


@pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=3)
def small_train(data_dir: str):
    """A small ResNet-style training pipeline: random-crop decode, resize, normalize to float16 CHW with a mirror."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, name="Decode")
    images = fn.resize(images, resize_x=WIDTH, resize_y=HEIGHT, name="Resize")
    flip = fn.random.coin_flip(probability=0.5, name="Flip")
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=MEAN, std=STD,
                                      mirror=flip, name="Normalize")
    return images, labels


@pytest.fixture(scope="module")
def train_file(image_folder, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "small_train.json"
    small_train(data_dir=str(image_folder)).serialize(path)
    return path


@pytest.fixture(scope="module")
def val_file(image_folder, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "resnet50_val.json"
    resnet50_val(data_dir=str(image_folder), batch_size=4).serialize(path)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """main(argv) in this process: (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rate_of(line_start: str, out: str) -> float:
    line = next(line for line in out.splitlines() if line.startswith(line_start))
    return float(re.search(r"([\d,]+) samples/s", line).group(1).replace(",", ""))


# run


def test_run_epochs_prints_throughput(capsys, train_file):
    status, out, _ = run_cli(capsys, "run", train_file, "--epochs", "2", "--no-progress")
    assert status == 0
    assert "epoch 0:" in out and "epoch 1:" in out
    # 37 images, batch 6: 7 batches an epoch; the first batch is timed on its own
    assert "throughput:" in out and "over 13 batches after the first" in out
    assert rate_of("throughput:", out) > 0


def test_run_batches_and_parameter_overrides(capsys, train_file):
    status, out, _ = run_cli(capsys, "run", train_file, "--batches", "3", "--batch-size", "4", "--threads", "1",
                             "--no-progress")
    assert status == 0
    assert "batch size 4, 1 threads" in out
    assert "run: 3 batches; after the first (timed with the build): 2 batches, 8 samples" in out
    assert rate_of("throughput:", out) > 0


def test_run_without_a_reader_runs_ten_batches(capsys, tmp_path):
    pipe = Pipeline(batch_size=4, num_threads=1, seed=1)
    with pipe:
        pipe.set_outputs(fn.random.uniform(range=[0, 1], shape=[3]))
    pipe.serialize(tmp_path / "noise.json")
    status, out, _ = run_cli(capsys, "run", tmp_path / "noise.json", "--no-progress")
    assert status == 0 and "run: 10 batches; after the first (timed with the build): 9 batches, 36 samples" in out


def test_run_data_overrides_the_file_root(capsys, train_file, image_folder, tmp_path):
    content = json.loads(train_file.read_text())
    content["nodes"][0]["args"]["file_root"] = "/data/written/elsewhere"
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(content))
    status, _, err = run_cli(capsys, "run", moved, "--batches", "2", "--no-progress")
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "/data/written/elsewhere" in err and "--data" in err
    for data in (str(image_folder), f"Reader={image_folder}"):
        status, out, _ = run_cli(capsys, "run", moved, "--data", data, "--batches", "2", "--no-progress")
        assert status == 0 and f"Reader.file_root={image_folder}" in out


def test_set_overrides_a_node_argument(capsys, train_file):
    status, out, _ = run_cli(capsys, "inspect", train_file, "--set", "Flip.probability=0.25", "--set",
                             "Resize.resize_x=48")
    assert status == 0
    assert "probability=0.25" in out and "resize_x=48" in out


@pytest.mark.gpu
def test_run_on_the_gpu(capsys, train_file):
    status, out, _ = run_cli(capsys, "run", train_file, "--device", "gpu", "--batches", "3", "--no-progress")
    assert status == 0 and "device gpu" in out and rate_of("throughput:", out) > 0


# demo


def test_demo_generates_data_runs_and_writes_the_pipeline_file(capsys, tmp_path):
    out_file = tmp_path / "out" / "train.json"
    status, out, _ = run_cli(capsys, "demo", "--images", "10", "--workdir", tmp_path, "--epochs", "1",
                             "--batch-size", "4", "--out", out_file, "--no-progress")
    assert status == 0
    assert "10 images in" in out and re.search(r"epoch 0: 10 images in \d+ batches.*, [\d,]+ images/s", out)
    images, labels = Pipeline.load(out_file).run()
    assert images.as_array().shape == (4, 3, 224, 224) and len(labels) == 4


def test_demo_takes_a_data_folder(capsys, image_folder, tmp_path):
    status, out, _ = run_cli(capsys, "demo", "--data", image_folder, "--epochs", "1", "--batch-size", "8",
                             "--out", tmp_path / "t.json", "--no-progress")
    assert status == 0 and f"37 images in {image_folder}" in out


# warmup


def test_warmup_compiles_the_cpu_pipelines_loops(capsys):
    from headrace_kernels.cpu import resampling

    status, out, _ = run_cli(capsys, "warmup", "--device", "cpu", "--no-progress")
    assert status == 0
    assert all(f"cpu {name}:" in out for name in ("training", "validation", "fed")) and "gpu" not in out
    assert resampling.triangle_taps.overloads  # compiled, or loaded from numba's cache


@pytest.mark.gpu
def test_warmup_compiles_the_gpu_pipelines_too(capsys):
    from headrace_kernels import capi_loops

    status, out, _ = run_cli(capsys, "warmup", "--device", "gpu", "--no-progress")
    assert status == 0
    assert all(f"{device} {name}:" in out for device in ("cpu", "gpu") for name in ("training", "validation", "fed"))
    assert any(getattr(capi_loops, name).overloads for name in dir(capi_loops)
               if hasattr(getattr(capi_loops, name), "overloads"))


# inspect


def test_inspect_text_lists_every_node(capsys, train_file):
    status, out, _ = run_cli(capsys, "inspect", train_file)
    assert status == 0
    pipe = Pipeline.load(train_file)
    for node in pipe.graph.nodes:
        assert re.search(rf"^  {re.escape(node.name)}  \[{re.escape(node.schema.name)}\]  device={node.device}",
                         out, re.M), node.name
    assert "argument input: mirror <- Flip (int32)" in out
    assert "inputs:  Resize (uint8 HWC)" in out
    assert "output 0: float16 CHW -> pipeline output 0" in out
    assert "random ops (draws keyed by seed, node and sample): Decode, Flip" in out
    assert "stateful ops (kept in a checkpoint): Reader" in out
    assert "probability=0.5" in out and "output_layout='CHW'" in out


def test_inspect_all_args_shows_defaults(capsys, train_file):
    status, out, _ = run_cli(capsys, "inspect", train_file, "--all-args")
    assert status == 0 and "interp_type=INTERP_LINEAR" in out and "antialias=True" in out


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_inspect_draws_the_graph(capsys, train_file, tmp_path, suffix):
    picture = tmp_path / f"graph{suffix}"
    status, out, _ = run_cli(capsys, "inspect", train_file, "--out", picture)
    assert status == 0 and f"graph picture written to {picture}" in out
    # rows: (Reader, Flip), Decode, Resize, Normalize, (output 0, output 1): 5 layers, at most 2 nodes wide
    width_in, height_in = canvas_inches(layers=5, widest=2)
    if suffix == ".png":
        with Image.open(picture) as image:
            image.verify()
        with Image.open(picture) as image:
            assert image.format == "PNG" and image.size == (round(width_in * DPI), round(height_in * DPI))
            pixels = np.asarray(image.convert("RGB"))
        # the CPU colour of the nodes is there (#9ecae1)
        assert np.any(np.all(pixels == (0x9E, 0xCA, 0xE1), axis=-1))
    else:
        root = ET.parse(picture).getroot()
        assert root.tag.endswith("svg")
        assert float(root.get("width").removesuffix("pt")) == pytest.approx(width_in * 72)
        assert float(root.get("height").removesuffix("pt")) == pytest.approx(height_in * 72)


def test_inspect_device_gpu_shows_the_placement_without_a_gpu(capsys, train_file):
    status, out, _ = run_cli(capsys, "inspect", train_file, "--device", "gpu")
    assert status == 0
    for name, device in (("Reader", "cpu"), ("Decode", "mixed"), ("Resize", "gpu"), ("Flip", "cpu"),
                         ("Normalize", "gpu")):
        assert re.search(rf"^  {name}  \[[^]]+\]  device={device}\b", out, re.M), name


def test_gpu_placement_keeps_argument_producers_on_the_host(image_folder):
    """A node that computes a per-sample argument from GPU data reads it through a host copy."""
    pipe = Pipeline(batch_size=2, num_threads=1, seed=1)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(image_folder), name="Reader")
        images = fn.decoders.image(jpegs, name="Decode")
        width = fn.cast(images, dtype=types.FLOAT, name="Width")  # nonsense as a size, fine as a graph
        pipe.set_outputs(fn.resize(images, resize_x=width, name="Resize"))
    content = json.loads(pipe.serialize())
    changes = place_on_device(content, "gpu")
    devices = {e["name"]: e["device"] for e in content["nodes"]}
    assert devices == {"Reader": "cpu", "Decode": "mixed", "Decode_0_to_cpu": "cpu", "Width": "cpu", "Resize": "gpu"}
    width_entry = next(e for e in content["nodes"] if e["name"] == "Width")
    assert width_entry["inputs"] == [["Decode_0_to_cpu", 0]]
    assert "Decode: cpu -> mixed" in changes
    Pipeline.load(json.dumps(content))  # still a valid pipeline file


def test_a_gpu_file_runs_here_with_device_cpu(capsys, train_file, tmp_path):
    content = json.loads(train_file.read_text())
    place_on_device(content, "gpu")
    gpu_file = tmp_path / "gpu.json"
    gpu_file.write_text(json.dumps(content))
    if importlib.util.find_spec("cupy") is None:
        status, _, err = run_cli(capsys, "run", gpu_file, "--batches", "2", "--no-progress")
        assert status == 1 and len(err.strip().splitlines()) == 1
        assert "places nodes on the GPU" in err and "--device cpu" in err
    status, out, _ = run_cli(capsys, "run", gpu_file, "--device", "cpu", "--batches", "2", "--no-progress")
    assert status == 0 and "Decode: mixed -> cpu" in out and "device cpu" in out
    # back on the CPU, the file gives the original's batches bit for bit
    place_on_device(content, "cpu")
    back, original = Pipeline.load(json.dumps(content)), Pipeline.load(train_file)
    for ours, theirs in zip(back.run(), original.run(), strict=True):
        np.testing.assert_array_equal(ours.as_array(), theirs.as_array())


def test_inferred_edge_types_match_what_runs(image_folder):
    pipe = Pipeline(batch_size=3, num_threads=1, seed=2)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        images = fn.resize(fn.decoders.image(jpegs), resize_x=16, resize_y=12)
        normalized = fn.crop_mirror_normalize(images, output_layout="HWC", dtype=types.FLOAT)
        pipe.set_outputs(labels, images, images * 0.5, images + 1, images > 100, fn.cast(images, dtype=types.INT16),
                         normalized, -normalized, fn.random.uniform(range=[0, 1]), fn.random.coin_flip())
    edges = infer(pipe.graph.nodes)
    for out, batch in zip(pipe.outputs, pipe.run(), strict=True):
        edge = edges[(out.op.name, out.index)]
        assert edge.dtype == batch.dtype.name, out
        if batch.layout():
            assert edge.layout == batch.layout(), out


# preview


def test_preview_tiles_are_the_denormalized_outputs(capsys, train_file, tmp_path):
    sheet_path = tmp_path / "grid.png"
    status, out, _ = run_cli(capsys, "preview", train_file, "--out", sheet_path)
    assert status == 0 and f"written to {sheet_path}" in out
    images, labels = Pipeline.load(train_file).run()  # the same first batch: same seed
    expected = images.as_array().astype(np.float32).transpose(0, 2, 3, 1) * np.float32(STD) + np.float32(MEAN)
    expected = np.clip(np.rint(expected), 0, 255)
    layout = sheet_layout([(HEIGHT, WIDTH)] * len(images))
    with Image.open(sheet_path) as image:
        assert image.size == layout.size
        sheet = np.asarray(image.convert("RGB")).astype(np.float32)
    for i in range(len(images)):
        x, y = layout.origin(i)
        tile = sheet[y:y + HEIGHT, x:x + WIDTH]
        assert np.abs(tile - expected[i]).max() <= 1, f"tile {i}"  # float16 outputs: within one level


def test_preview_shows_at_most_max_samples(capsys, train_file, tmp_path):
    status, out, _ = run_cli(capsys, "preview", train_file, "--out", tmp_path / "two.png", "--max", "2")
    batch = len(Pipeline.load(train_file).run()[0])
    assert status == 0 and f"(2 samples of {batch}; --max to show more" in out
    with Image.open(tmp_path / "two.png") as image:
        assert image.size == sheet_layout([(HEIGHT, WIDTH)] * 2).size


def test_preview_captions_carry_the_labels(train_file):
    from headrace.cli.preview import captions

    pipe = Pipeline.load(train_file)
    outputs = pipe.run()
    lines = captions(list(outputs), pipe.outputs, shown=0, count=len(outputs[0]))
    for i, caption in enumerate(lines):
        assert caption[0] == f"label {int(outputs[1].at(i)[0])}"
        assert caption[1] == os.path.basename(outputs[0].source_info(i))


def test_preview_of_raw_decoded_images_of_different_sizes(capsys, image_folder, tmp_path):
    pipe = Pipeline(batch_size=5, num_threads=1, seed=1)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        pipe.set_outputs(fn.decoders.image(jpegs), labels)
    pipeline_path = tmp_path / "decode.json"
    pipe.serialize(pipeline_path)
    status, out, _ = run_cli(capsys, "preview", pipeline_path, "--out", tmp_path / "raw.png", "--cols", "5")
    assert status == 0 and "as is" in out
    decoded = Pipeline.load(pipeline_path).run()[0]
    sizes = [decoded.at(i).shape[:2] for i in range(5)]
    layout = sheet_layout(sizes, cols=5)
    with Image.open(tmp_path / "raw.png") as image:
        assert image.size == layout.size
        sheet = np.asarray(image.convert("RGB"))
    for i, (h, w) in enumerate(sizes):
        x, y = layout.origin(i, w)
        np.testing.assert_array_equal(sheet[y:y + h, x:x + w], decoded.at(i))


# bench


def test_bench_reports_throughput_first_batch_and_memory(capsys, train_file):
    status, out, _ = run_cli(capsys, "bench", train_file, "--epochs", "2", "--no-progress")
    assert status == 0
    assert re.search(r"time to first batch\s+[\d.]+ s", out)
    assert rate_of("epoch 0", out) > 0 and rate_of("epoch 1", out) > 0 and rate_of("throughput", out) > 0
    rss = float(re.search(r"peak host RSS\s+([\d,]+) MiB", out).group(1).replace(",", ""))
    assert 10 < rss < 100_000
    assert re.search(r"peak GPU memory in use\s+no GPU used", out)


def test_bench_ratios_say_which_way_they_go():
    from headrace.cli.bench import ratio_text

    assert ratio_text(119.0, 100.0, "faster", "slower") == "1.19x (faster)"
    assert ratio_text(2.26, 2.0, "slower", "faster") == "1.13x (slower)"  # a longer time to the first batch
    assert ratio_text(80.0, 100.0, "more", "less") == "0.80x (less)"


def test_torchvision_plans_of_the_resnet50_pipelines(image_folder):
    from headrace.cli.torchvision_peer import match

    train = match(resnet50_train(data_dir=str(image_folder), batch_size=4))
    assert train.shuffle and train.dtype == "float16" and train.root == str(image_folder)
    assert [name for name, _ in train.steps] == ["RandomResizedCrop", "RandomHorizontalFlip"]
    assert train.steps[0][1]["size"] == [224, 224] and train.steps[0][1]["scale"] == [0.08, 1.0]
    assert train.steps[1][1] == {"p": 0.5}
    val = match(resnet50_val(data_dir=str(image_folder), batch_size=4))
    assert not val.shuffle
    assert val.steps == [("Resize", {"size": 256, "interpolation": "BILINEAR", "antialias": True}),
                         ("CenterCrop", {"size": [224, 224]})]
    assert val.mean == pytest.approx(MEAN) and val.std == pytest.approx(STD)


@pytest.mark.parametrize("resize_args", [dict(min_filter=types.INTERP_NN), dict(roi_start=[0.1, 0.1],
                                          roi_end=[0.9, 0.9], roi_relative=True), dict(save_attrs=True)])
def test_torchvision_plan_refuses_resize_options_it_has_no_match_for(image_folder, resize_args):
    from headrace.cli.common import CliError
    from headrace.cli.torchvision_peer import match

    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        images = fn.resize(fn.decoders.image(jpegs), resize_shorter=64, **resize_args)
        images = images[0] if isinstance(images, tuple) else images
        pipe.set_outputs(fn.crop_mirror_normalize(images, crop=(32, 32)), labels)
    with pytest.raises(CliError, match="no torchvision equivalent.*resize uses options"):
        match(pipe)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed")
def test_bench_vs_torchvision_side_by_side(capsys, val_file):
    status, out, _ = run_cli(capsys, "bench", val_file, "--vs", "torchvision", "--batches", "3", "--threads", "1",
                             "--no-progress")
    assert status == 0
    header = next(line for line in out.splitlines() if "headrace" in line and "torchvision" in line)
    assert header.split() == ["headrace", "torchvision"]
    assert re.search(r"headrace / torchvision: throughput x[\d.]+", out)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="torchvision is installed")
def test_bench_vs_torchvision_says_when_torchvision_is_missing(capsys, val_file):
    status, out, err = run_cli(capsys, "bench", val_file, "--vs", "torchvision")
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "is not installed" in err and "pip install torchvision" in err
    assert out == ""  # refused before running anything


# triton-config and serve


HAS_SERVING_CONFIG = importlib.util.find_spec("headrace.serving") is not None \
    and importlib.util.find_spec("headrace.serving.config") is not None
HAS_SERVING_SERVER = importlib.util.find_spec("headrace.serving") is not None \
    and importlib.util.find_spec("headrace.serving.server") is not None


@pytest.mark.skipif(HAS_SERVING_CONFIG, reason="headrace.serving is installed")
def test_triton_config_says_serving_is_missing(capsys, train_file):
    status, _, err = run_cli(capsys, "triton-config", train_file)
    assert status == 1 and err.strip() == ("headrace triton-config: error: serving support is not installed "
                                           "(this headrace has no headrace.serving.config)")


@pytest.mark.skipif(HAS_SERVING_SERVER, reason="headrace.serving is installed")
def test_serve_says_serving_is_missing(capsys, tmp_path):
    status, _, err = run_cli(capsys, "serve", tmp_path)
    assert status == 1 and "serving support is not installed" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not HAS_SERVING_CONFIG, reason="headrace.serving.config is not installed yet")
def test_triton_config_prints_and_writes_config(capsys, train_file, tmp_path):
    pipe = Pipeline(batch_size=8, num_threads=1, seed=1)
    with pipe:
        jpegs = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
        images = fn.resize(fn.decoders.image(jpegs), resize_x=WIDTH, resize_y=HEIGHT)
        pipe.set_outputs(fn.crop_mirror_normalize(images, mean=MEAN, std=STD, name="normalized"))
    served = tmp_path / "served.json"
    pipe.serialize(served)
    status, out, _ = run_cli(capsys, "triton-config", served, "--model-name", "prep", "--max-batch-size", "4",
                             "--instance-count", "2")
    assert status == 0 and 'name: "prep"' in out and "max_batch_size: 4" in out
    assert 'name: "images"' in out and "count: 2" in out and "kind: KIND_CPU" in out
    assert "respond_in_background" not in out and "max_queue_delay_microseconds: 0\n" in out
    for delay in ("500", "0"):
        status, out, _ = run_cli(capsys, "triton-config", served, "--max-queue-delay-us", delay)
        assert status == 0 and f"max_queue_delay_microseconds: {delay}\n" in out
    with pytest.raises(SystemExit):
        run_cli(capsys, "triton-config", served, "--max-queue-delay-us", "-1")
    assert "expected a number of at least 0, got -1" in capsys.readouterr().err
    status, out, _ = run_cli(capsys, "triton-config", served, "--respond-in-background")
    assert status == 0 and 'key: "respond_in_background"\n  value: { string_value: "true" }' in out
    status, out, _ = run_cli(capsys, "triton-config", served, "--out", tmp_path / "config.pbtxt")
    assert status == 0 and "written to" in out
    text = (tmp_path / "config.pbtxt").read_text()
    assert 'name: "served"' in text and "max_batch_size: 8" in text
    # a pipeline that reads its own files cannot be served: one line
    status, _, err = run_cli(capsys, "triton-config", train_file)
    assert status == 1 and len(err.strip().splitlines()) == 1 and "external_source" in err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SERVER_MARKS = (pytest.mark.triton,
                pytest.mark.skipif(not HAS_SERVING_SERVER or not have_server(), reason=NO_SERVER))


def needs_server(test):
    """The marks of a test that starts a real tritonserver."""
    for mark in SERVER_MARKS:
        test = mark(test)
    return test


@needs_server
def test_serve_answers_a_health_check_and_stops_on_sigint(tmp_path):
    repository = tmp_path / "models"
    repository.mkdir()
    command = [sys.executable, "-m", "headrace.cli", "serve", str(repository), "--http-port", str(_free_port()),
               "--timeout", "60"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, lines, deadline = None, [], time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.strip().startswith("http:"):
                url = line.split("http:", 1)[1].strip()
        assert url, "".join(lines)
        url = url if url.startswith("http") else f"http://{url}"
        with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=10) as response:
            assert response.status == 200
        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=30)
        assert server.returncode == 0, rest
        assert "Triton server stopped" in rest and "Traceback" not in rest
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)


@pytest.mark.skipif(not HAS_SERVING_SERVER, reason="headrace.serving.server is not installed")
def test_serve_adds_the_memory_pools_a_triton_arg_does_not_set():
    from headrace.serving.server import MEMORY_POOL_ARGS, with_memory_pools

    assert with_memory_pools(()) == MEMORY_POOL_ARGS
    own = "--pinned-memory-pool-byte-size=1024"
    assert with_memory_pools(("--log-verbose=1", own)) == ("--log-verbose=1", own, MEMORY_POOL_ARGS[0])


@needs_server
def test_serve_passes_triton_args_and_names_a_rejected_one(capsys, tmp_path):
    """--triton-arg reaches tritonserver's command line: an option it does not know stops it, and the one-line
    error names that option (not the last line of the usage text tritonserver prints after it)."""
    status, _, err = run_cli(capsys, "serve", tmp_path, "--triton-arg=--no-such-option=1", "--timeout", "30")
    lines = err.strip().splitlines()
    assert status == 1 and len(lines) == 1, err
    assert "the Triton server did not start" in lines[0]
    assert "unrecognized option '--no-such-option=1'" in lines[0]


# errors: one line, non-zero, no traceback


def _corrupt_folder(root: Path) -> Path:
    (root / "cls").mkdir(parents=True)
    (root / "cls" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    return root


@pytest.fixture
def busy_port():
    """A loopback port something listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def _error_cases(train_file: Path, tmp: Path, port: int) -> dict[str, tuple[list, str]]:
    (tmp / "not_json.json").write_text("{ nodes: oops")
    (tmp / "wrong_format.json").write_text(json.dumps({"format": "something-else"}))
    content = json.loads(train_file.read_text())
    content["nodes"][1]["op"] = "decoders.imagee"
    (tmp / "unknown_op.json").write_text(json.dumps(content))
    content["nodes"][1]["op"], content["outputs"] = "decoders.image_random_crop", 3
    (tmp / "outputs_not_a_list.json").write_text(json.dumps(content))
    (tmp / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    bad_data = _corrupt_folder(tmp / "corrupt")
    fed = Pipeline(batch_size=2, num_threads=1, seed=1)
    with fed:
        fed.set_outputs(fn.resize(fn.external_source(name="images", layout="HWC"), resize_x=8, resize_y=8))
    fed.serialize(tmp / "fed.json")
    return {
        "missing file": (["run", tmp / "nope.json"], "does not exist"),
        "folder as file": (["run", tmp], "is a folder"),
        "not JSON": (["run", tmp / "not_json.json"], "not JSON"),
        "not a pipeline file": (["inspect", tmp / "wrong_format.json"], "'format' must be 'headrace-pipeline'"),
        "binary file": (["inspect", tmp / "binary.json"], "not a pipeline file"),
        "unknown op": (["run", tmp / "unknown_op.json"], "unknown op 'decoders.imagee'"),
        "wrong value type": (["run", tmp / "outputs_not_a_list.json"], "invalid pipeline file: a value has the wrong"),
        "bad --set node": (["run", train_file, "--set", "Nope.x=1"], "there is no node 'Nope'"),
        "bad --set argument": (["run", train_file, "--set", "Flip.probabilty=1"], "Did you mean 'probability'"),
        "bad --set form": (["run", train_file, "--set", "Flip=1"], "expected NODE.ARG=VALUE"),
        "missing --data": (["run", train_file, "--data", tmp / "nowhere"], "is not a folder"),
        "unknown reader": (["run", train_file, "--data", "Other=x"], "there is no reader node 'Other'"),
        "corrupt image": (["run", train_file, "--data", bad_data, "--batches", "2"], "broken.jpg"),
        "fed inputs": (["preview", tmp / "fed.json", "--out", tmp / "g.png"], "takes fed inputs (images:"),
        "bad picture type": (["inspect", train_file, "--out", tmp / "g.pdf"], ".svg or .png"),
        "bad sheet type": (["preview", train_file, "--out", tmp / "g.txt"], "contact sheet must be"),
        "no such output": (["preview", train_file, "--out", tmp / "g.png", "--output", "7"], "has 2 outputs"),
        "not an image output": (["preview", train_file, "--out", tmp / "g.png", "--output", "1"], "not an image"),
        "no torchvision twin": (["bench", train_file, "--vs", "torchvision", "--set", "Normalize.shift=1"],
                                "no torchvision equivalent"),
        "serve missing repository": (["serve", tmp / "no_models"], "is not a folder"),
        "port in use": (["serve", tmp, "--http-port", str(port)], f"--http-port {port}: the port is in use"),
        "usage": (["run"], "the following arguments are required: FILE"),
        "bad number": (["run", train_file, "--batches", "0"], "expected a number of at least 1"),
    }


ERROR_CASES = ["missing file", "folder as file", "not JSON", "not a pipeline file", "binary file", "unknown op",
               "wrong value type",
               "bad --set node", "bad --set argument", "bad --set form", "missing --data", "unknown reader",
               "corrupt image", "fed inputs", "bad picture type", "bad sheet type", "no such output",
               "not an image output", "no torchvision twin", "serve missing repository", "port in use", "usage",
               "bad number"]


@pytest.mark.parametrize("case", ERROR_CASES)
def test_user_errors_print_one_line(capsys, train_file, tmp_path, busy_port, case):
    argv, expected = _error_cases(train_file, tmp_path, busy_port)[case]
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status not in (0, None)
    assert len(lines) == 1, captured.err
    assert expected in lines[0]
    assert lines[0].startswith("headrace"), lines[0]
    assert "Traceback" not in captured.err and "unexpected error" not in captured.err


def test_no_gpu_is_one_line_from_the_console_script(train_file):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: whether a GPU is usable depends on the machine")
    script = Path(sys.executable).parent / "headrace"
    assert script.exists(), "the console script is installed with the package"
    result = subprocess.run([str(script), "run", str(train_file), "--device", "gpu"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip() == ("headrace run: error: --device gpu needs an NVIDIA GPU, and none can be used "
                                     "here: CuPy is not installed (pip install 'headrace-kernels[cuda13]' or "
                                     "'[cuda12]' on a GPU machine)")


def test_debug_shows_the_traceback(tmp_path):
    from headrace.cli.common import CliError

    with pytest.raises(CliError, match="does not exist"):
        main(["--debug", "run", str(tmp_path / "nope.json")])
    with pytest.raises(CliError, match="does not exist"):
        main(["run", str(tmp_path / "nope.json"), "--debug"])


def test_python_m_headrace_demo_still_works(tmp_path, image_folder):
    result = subprocess.run([sys.executable, "-m", "headrace.demo", "--data", str(image_folder), "--epochs", "1",
                             "--batch-size", "16", "--out", str(tmp_path / "d.json"), "--no-progress"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "images/s" in result.stdout and (tmp_path / "d.json").exists()


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "headrace"
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "headrace 0.1.0"
