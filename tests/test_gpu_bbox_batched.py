"""The batched GPU box and coordinate kernels (gpu/bbox_ops.py, gpu/coordinates_ops.py: one packed array per batch,
a fixed number of array operations, no host synchronisation) against the CPU kernels, over ragged batches: samples
of 0, 1 and many boxes, dense batches (every sample the same shape), per-sample arguments (argument inputs and
coin_flip), ltrb and xywh boxes.

Two halves. Marker gpu: the real thing, headrace pipelines on the GPU against the same graphs on the CPU (or against
the CPU kernel on the GPU pipeline's own coin flips). Unmarked (runs in CI): the same kernels' batch logic with numpy
standing in for CuPy (same array API), against the CPU kernels sample by sample, plus checks that the number of
array-module calls does not grow with the batch size and that the box kernels never read device data back.
box_encoder is a CUDA kernel (kernels/bbox.cu): it is tested on the device only.

Tolerances: bb_flip, coord_flip, bbox_paste, box_encoder's labels and its boxes without offsets are exact (the CPU
kernels' float32 operations in their order; ties of box_encoder to the last box / anchor, as the CPU). box_encoder's
offsets on the GPU are within 1e-5 absolute + 1e-6 relative (CUDA's logf against numpy's log: the last bit, as
tests/test_ops_bboxes.py states), exact with numpy standing in. coord_transform's float outputs on the GPU are within
1e-5 relative + 1e-4 absolute (float32 matrix products summed in another order by cuBLAS than by numpy's BLAS, as
tests/test_ops_coordinates.py states); its integer outputs are exact.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from ops_support import cpu_kernel_outputs

import headrace
from headrace import fn

# box_encoder's offsets of the degenerate EDGES boxes (zero width, matched by force) are log(0) = -inf, as on the CPU
# (which silences numpy's warning); with numpy standing in for CuPy the warning shows
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")

RNG = np.random.default_rng(2020)
F32 = np.float32


def ltrb(count: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    a, b = RNG.uniform(low, high, (count, 2)), RNG.uniform(low, high, (count, 2))
    return np.concatenate([np.minimum(a, b), np.maximum(a, b)], axis=1).astype(F32)


def xywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1).astype(F32)


EDGES = np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.3, 0.2, 1.0], [0.4, 0.4, 0.4, 0.7], [0.5, 0.5, 0.5, 0.5]], F32)
DUPLICATE = ltrb(1)
RAGGED = [ltrb(0), ltrb(1), ltrb(37), ltrb(3), ltrb(0), EDGES, np.concatenate([DUPLICATE, ltrb(2), DUPLICATE])]
DENSE = [ltrb(3) for _ in range(4)]
EMPTY = [ltrb(0) for _ in range(3)]
ANCHORS = np.concatenate([ltrb(60), ltrb(60)[:5], ltrb(3)])  # a few anchors repeated below: ties of best anchors
ANCHORS = np.concatenate([ANCHORS, ANCHORS[10:14]]).astype(F32)
POINTS = [RNG.uniform(-1, 2, (c, 2)).astype(F32) for c in (0, 1, 25, 4)]
POINTS3 = [RNG.uniform(-1, 2, (c, 3)).astype(F32) for c in (5, 0, 2)]
CLOUDS = [RNG.uniform(-5, 5, shape).astype(F32) for shape in ((4, 6, 3), (0, 5, 3), (2, 2, 3))]


def labels_for(boxes: list[np.ndarray], column: bool = False) -> list[np.ndarray]:
    out = [RNG.integers(1, 80, len(b)).astype(np.int32) for b in boxes]
    return [label[:, None] for label in out] if column else out


def flags(values: list[int]) -> list[np.ndarray]:
    return [np.array(v, np.int32) for v in values]


def floats(values: list[float]) -> list[np.ndarray]:
    return [np.array(v, F32) for v in values]


def per_sample_args(op: str, size: int, arg_inputs: dict | None = None, **kwargs) -> list[dict]:
    from headrace.schema import get_schema

    schema = get_schema(op)
    args = schema.resolve(schema.validate_args("node", kwargs, per_sample=tuple(arg_inputs or ())))
    return [{**args, **{name: values[i] for name, values in (arg_inputs or {}).items()}} for i in range(size)]


def assert_same(ours: list[list[np.ndarray]], theirs: list[list[np.ndarray]], atol: float = 0.0,
                rtol: float = 0.0) -> None:
    assert len(ours) == len(theirs)
    for out_a, out_b in zip(ours, theirs, strict=True):
        assert len(out_a) == len(out_b)
        for a, b in zip(out_a, out_b, strict=True):
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
            if atol or rtol:
                np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)
            else:
                np.testing.assert_array_equal(a, b)


# The batch logic with numpy standing in for CuPy (runs here)

class CountingNumpy:
    """numpy as the kernels' array module, counting the calls made through it (CuPy's asnumpy included)."""

    def __init__(self):
        self.calls: collections.Counter = collections.Counter()

    def __getattr__(self, name: str):
        self.calls[name] += 1
        return getattr(np, name)

    def asnumpy(self, array) -> np.ndarray:
        self.calls["asnumpy"] += 1
        return np.asarray(array)


class FakeTensorList:
    """A GPU input as the kernels read it: `dense` (one (N, ...) array when the samples share a shape and `dense` is
    asked for, else None) and `samples()`."""

    def __init__(self, samples: list[np.ndarray], dense: bool):
        self.dense = np.stack(samples) if dense and samples and len({s.shape for s in samples}) == 1 else None
        self._samples = samples

    def samples(self) -> list[np.ndarray]:
        return list(self.dense) if self.dense is not None else list(self._samples)


class FakeBatch:
    """What the GPU kernels read of a batch, over host arrays."""

    def __init__(self, inputs: list[list[np.ndarray]], args_list: list[dict], dense: bool = False):
        self.inputs = [FakeTensorList(samples, dense) for samples in inputs]
        self.size = len(inputs[0])
        self.args = args_list[0] if args_list else {}
        self._args = args_list

    def num_inputs(self) -> int:
        return len(self.inputs)

    def value(self, k: int = 0) -> FakeTensorList:
        return self.inputs[k]

    def samples(self, k: int = 0) -> list[np.ndarray]:
        return self.inputs[k].samples()

    def sample_args(self) -> list[dict]:
        return self._args

    def rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng(index)


@pytest.fixture
def xp(monkeypatch):
    from headrace_kernels.gpu import bbox_ops, coordinates_ops

    counting = CountingNumpy()
    monkeypatch.setattr(bbox_ops, "cupy", lambda: counting)
    monkeypatch.setattr(coordinates_ops, "cupy", lambda: counting)
    return counting


def outputs_of(result) -> list[list[np.ndarray]]:
    """A GPU kernel's result ((dense, list) or a tuple of them per output) as lists of samples."""
    parts = result if isinstance(result[0], tuple) else (result,)
    return [list(dense) if dense is not None else list(listed) for dense, listed in parts]


def gpu_kernel_of(op: str):
    from headrace_kernels.gpu import bbox_ops, coordinates_ops

    return coordinates_ops.coord_transform if op == "coord_transform" else getattr(bbox_ops, f"{op}_kernel")


def host_run(op: str, inputs: list[list[np.ndarray]], args_list: list[dict], dense: bool = False):
    return outputs_of(gpu_kernel_of(op)(FakeBatch(inputs, args_list, dense)))


BOX_CASES = [
    ("bb_flip", dict(ltrb=True), {"horizontal": [0, 1, 1, 0, 1, 0, 1], "vertical": [1, 0, 1, 0, 0, 1, 0]}),
    ("bb_flip", dict(ltrb=False), {"horizontal": [1, 1, 0, 0, 1, 1, 0], "vertical": [0, 1, 1, 0, 1, 0, 1]}),
    ("bb_flip", dict(ltrb=False, vertical=1), None),
    ("bbox_paste", dict(ltrb=True), {"ratio": [1.0, 2.5, 1.5, 3.0, 1.0, 2.0, 4.0],
                                     "paste_x": [0.0, 0.3, 1.0, 0.5, 0.2, 0.9, 0.1]}),
    ("bbox_paste", dict(ratio=1.5, paste_y=0.25), None),
]


# bb_flip is one kernels/bbox.cu launch, which numpy cannot stand in for: the gpu tests below run it
@pytest.mark.parametrize("op, kwargs, arg_inputs", [case for case in BOX_CASES if case[0] != "bb_flip"])
@pytest.mark.parametrize("dense", [False, True])
def test_box_transforms_batch_logic_matches_cpu(xp, op, kwargs, arg_inputs, dense):
    for batch in (RAGGED, DENSE, EMPTY):
        boxes = batch if kwargs.get("ltrb") else [xywh(b) for b in batch]
        values = {name: v[:len(boxes)] for name, v in (arg_inputs or {}).items()}
        args_list = per_sample_args(op, len(boxes), values, **kwargs)
        assert_same(host_run(op, [boxes], args_list, dense), cpu_kernel_outputs(op, [boxes], args_list))


@pytest.mark.parametrize("points, kwargs, centers", [
    (POINTS, dict(flip_y=1), [0.1, 0.5, 0.9, 0.3]),
    (POINTS, dict(flip_x=0, flip_y=1, center_y=0.7), None),
    (POINTS3, dict(layout="xzy", flip_z=1, center_z=0.2), [0.0, 1.0, 0.25]),
])
def test_coord_flip_batch_logic_matches_cpu(xp, points, kwargs, centers):
    values = {"center_x": centers, "flip_x": [1, 0, 1, 1][:len(points)]} if centers else None
    args_list = per_sample_args("coord_flip", len(points), values, **kwargs)
    assert_same(host_run("coord_flip", [points], args_list), cpu_kernel_outputs("coord_flip", [points], args_list))
    same = [points[0]] * 3
    args_list = per_sample_args("coord_flip", 3, None, **kwargs)
    assert_same(host_run("coord_flip", [same], args_list, dense=True),
                cpu_kernel_outputs("coord_flip", [same], args_list))


ENCODER_KWARGS = [dict(), dict(criteria=0.05), dict(criteria=0.0),
                  dict(offset=True, scale=300.0, means=[0.1, 0.2, 0.3, 0.4], stds=[0.1, 0.1, 0.2, 0.2])]


TRANSFORMS = [
    (POINTS, dict(M=[1.0, 2.0, 3.0, 4.0], T=[0.5, -1.0]), None),
    (POINTS, dict(), {"M": [[2.0, 0.0, 0.0, 1.0], [0.5], [1.0, 1.0, -1.0, 2.0], [0.0, 1.0, 1.0, 0.0]],
                      "T": [[1.0, 2.0], [0.0], [3.0, -3.0], [0.25, 0.5]]}),
    (POINTS, dict(M=[1.0, 0.5, -2.0, 0.0, 1.0, 1.0]), None),  # 2 -> 3 components
    (POINTS3, dict(MT=[1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 1, -1]), None),
    (CLOUDS, dict(), {"MT": [[1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 1, -1], [2.0], [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0.5]]}),
]


@pytest.mark.parametrize("points, kwargs, arg_inputs", TRANSFORMS)
@pytest.mark.parametrize("dense", [False, True])
def test_coord_transform_batch_logic_matches_cpu(xp, points, kwargs, arg_inputs, dense):
    batch = points if not dense else [points[2][:4]] * len(points)
    values = {name: [np.asarray(v, F32) for v in vs] for name, vs in (arg_inputs or {}).items()}
    args_list = per_sample_args("coord_transform", len(batch), values, **kwargs)
    assert_same(host_run("coord_transform", [batch], args_list, dense),
                cpu_kernel_outputs("coord_transform", [batch], args_list))


def test_coord_transform_integer_and_mixed_batches_match_cpu(xp):
    from headrace import types

    ints = [RNG.integers(-1000, 1000, (c, 2)).astype(np.int32) for c in (6, 0, 2)]
    args_list = per_sample_args("coord_transform", 3, {"T": [np.array([0.5, 1.5], F32)] * 3},
                                M=[0.5, 0.25, 0.0, 1.5], dtype=types.INT32)
    assert_same(host_run("coord_transform", [ints], args_list), cpu_kernel_outputs("coord_transform", [ints],
                                                                                   args_list))
    mixed = [POINTS[2], POINTS3[0]]  # vectors of 2 and 3 components: the batch runs sample by sample
    args_list = per_sample_args("coord_transform", 2, None, MT=2.0)
    assert_same(host_run("coord_transform", [mixed], args_list), cpu_kernel_outputs("coord_transform", [mixed],
                                                                                    args_list))


def _calls(xp: CountingNumpy, op: str, inputs: list[list[np.ndarray]], args_list: list[dict]) -> collections.Counter:
    xp.calls.clear()
    gpu_kernel_of(op)(FakeBatch(inputs, args_list))
    return collections.Counter(xp.calls)


@pytest.mark.parametrize("op, kwargs", [("bbox_paste", dict(ratio=2.0)), ("coord_flip", dict(flip_y=1)),
                                        ("coord_transform", dict())])
def test_array_calls_do_not_grow_with_the_batch_and_nothing_is_read_back(xp, op, kwargs):
    def batch(size: int) -> list[list[np.ndarray]]:
        if op in ("coord_flip", "coord_transform"):
            return [[POINTS[i % len(POINTS)] for i in range(size)]]
        return [[RAGGED[i % len(RAGGED)] for i in range(size)]]

    def args(size: int) -> list[dict]:
        values = {"horizontal": flags([i % 2 for i in range(size)])} if op == "bb_flip" else None
        if op == "coord_transform":  # per-sample matrices: the gathered path
            values = {"M": [np.array([1.0, i, 0.0, 1.0], F32) for i in range(size)]}
        return per_sample_args(op, size, values, **kwargs)

    small, large = _calls(xp, op, batch(4), args(4)), _calls(xp, op, batch(40), args(40))
    assert small == large and sum(small.values()) > 0
    assert small["asnumpy"] == 0 and small["asarray"] <= 3, small  # no read-back; the uploads: one per table


class PackedTensorList(FakeTensorList):
    """A GPU input held as one packed buffer (an upload of a worker's column), as gpu/ragged.PackedSamples."""

    def __init__(self, samples: list[np.ndarray]):
        from headrace_kernels.gpu.ragged import PackedSamples

        super().__init__(samples, dense=False)
        sizes = np.array([s.size for s in samples], np.int64)
        flat = np.concatenate([s.reshape(-1) for s in samples]) if samples else np.zeros(0, F32)
        self.packed = PackedSamples(flat, np.cumsum(sizes) - sizes, [s.shape for s in samples], sizes)


def launches_recorded(monkeypatch) -> list[tuple]:
    """The arguments of every kernels/bbox.cu launch of bbox_ops, recorded instead of run (the host plan of a
    launch: what the CUDA kernel would be given)."""
    from headrace_kernels.gpu import bbox_ops

    calls = []
    monkeypatch.setattr(bbox_ops, "function", lambda source, name: lambda grid, block, args: calls.append((name, args)))
    return calls


@pytest.mark.parametrize("given", [int, bool, np.int32, lambda v: np.array([v], np.int32), lambda v: np.array(v)])
def test_bb_flip_gives_each_row_its_samples_flags(xp, monkeypatch, given):
    """The launch's per-row flip bits (bit 0 x, bit 1 y) from per-sample flags of any form the executor may give:
    Python ints or bools (read at once) or numpy scalars and arrays (read sample by sample)."""
    launches = launches_recorded(monkeypatch)
    from headrace_kernels.gpu import bbox_ops

    horizontal, vertical = [0, 1, 1, 0, 1, 0, 1], [1, 0, 1, 0, 0, 1, 0]
    args_list = [{"horizontal": given(h), "vertical": given(v), "ltrb": True}
                 for h, v in zip(horizontal, vertical, strict=True)]
    bbox_ops.bb_flip_kernel(FakeBatch([RAGGED], args_list))
    (name, (rows, flips, ltrb_flag, out, total)), = launches
    counts = [len(b) for b in RAGGED]
    want = np.repeat(np.array(horizontal) | np.array(vertical) << 1, counts)
    assert name == "bb_flip_rows" and int(total) == sum(counts) and rows.shape == (sum(counts), 4)
    np.testing.assert_array_equal(np.asarray(flips), want)


def encoder_setup(**kwargs):
    import types

    args = {"anchors": [0.0, 0.0, 0.5, 0.5, 0.25, 0.25, 1.0, 1.0], "criteria": 0.5, "offset": False, "scale": 1.0,
            "means": [0.0] * 4, "stds": [1.0] * 4, **kwargs}
    return types.SimpleNamespace(args=args, parts=[{"ltrb": True}, args])


@pytest.mark.parametrize("packed", [False, True])
def test_box_encoder_counts_every_samples_rows(xp, packed):
    from headrace_kernels.gpu import bbox_ops

    kernel = bbox_ops.BoxEncoderKernel(encoder_setup())
    for boxes in (RAGGED, DENSE, EMPTY):
        batch = FakeBatch([boxes, labels_for(boxes)], [{}], dense=not packed)
        if packed:
            batch.inputs = [PackedTensorList(boxes), PackedTensorList(labels_for(boxes))]
        rows, counts = kernel.boxes(batch, "box_encoder")
        assert counts == [len(b) for b in boxes]
        np.testing.assert_array_equal(np.asarray(rows).reshape(-1, 4), np.concatenate(boxes).reshape(-1, 4))


BAD_BOXES = [(np.zeros((3, 4), np.float64), "must be float32 [N, 4]"), (np.zeros((3, 5), F32), "float32 [N, 4]"),
             (np.zeros((0, 3), F32), "float32 [N, 4]"), (np.zeros(8, F32), "float32 [N, 4]")]
BAD_LABELS = [(np.zeros(3, np.int64), "must be int32 with one row per box (3)"),
              (np.zeros(2, np.int32), "one row per box (3)"), (np.zeros((3, 2, 1), np.int32), "one row per box")]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("bad, message", BAD_BOXES)
def test_box_encoder_names_the_sample_with_bad_boxes(xp, packed, bad, message):
    from headrace_kernels.gpu import bbox_ops
    from headrace_kernels.registry import SampleFailureError

    boxes = [ltrb(2), ltrb(0), bad, ltrb(3)]
    batch = FakeBatch([boxes, labels_for([ltrb(len(b)) for b in boxes])], [{}])
    if packed and bad.dtype == F32:  # a packed buffer holds one element type
        batch.inputs[0] = PackedTensorList(boxes)
    with pytest.raises(SampleFailureError, match=message.replace("[", r"\[").replace("(", r"\(")) as caught:
        bbox_ops.BoxEncoderKernel(encoder_setup()).boxes(batch, "box_encoder")
    assert caught.value.index == 2


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("bad, message", BAD_LABELS)
def test_box_encoder_names_the_sample_with_bad_labels(xp, packed, bad, message):
    from headrace_kernels.gpu import bbox_ops
    from headrace_kernels.registry import SampleFailureError

    boxes = [ltrb(2), ltrb(0), ltrb(3), ltrb(1)]
    labels = labels_for(boxes)
    labels[2] = bad
    batch = FakeBatch([boxes, labels], [{}])
    if packed and bad.dtype == np.int32:
        batch.inputs[1] = PackedTensorList(labels)
    kernel = bbox_ops.BoxEncoderKernel(encoder_setup())
    with pytest.raises(SampleFailureError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        kernel.encode(batch, *kernel.boxes(batch, "box_encoder"))  # the checks come before any launch
    assert caught.value.index == 2


def test_host_kernels_read_the_batch_back_once(xp):
    boxes = [RAGGED[3], RAGGED[5], RAGGED[2]]
    labels = labels_for(boxes)
    args_list = per_sample_args("bbox_rotate", 3, {"angle": floats([10.0, 45.0, 90.0])}, input_shape=[40, 60])
    xp.calls.clear()
    got = host_run("bbox_rotate", [boxes, labels], args_list)
    assert xp.calls["asnumpy"] == 1
    assert_same(got, cpu_kernel_outputs("bbox_rotate", [boxes, labels], args_list))
    args_list = per_sample_args("random_bbox_crop", 3, None, output_bbox_indices=True, scaling=[0.3, 1.0])
    xp.calls.clear()
    got = host_run("random_bbox_crop", [boxes, labels], args_list)
    assert xp.calls["asnumpy"] == 1
    assert_same(got, cpu_kernel_outputs("random_bbox_crop", [boxes, labels], args_list))


# On the GPU: pipelines against the CPU

def _source(samples: list[np.ndarray]):
    return lambda: list(samples)


def run_pipeline(op: str, inputs: list[list[np.ndarray]], device: str, arg_inputs: dict | None = None,
                 coin: bool = False, seed: int = 5, **kwargs) -> list[list[np.ndarray]]:
    """Every output of `op` over one batch (inputs uploaded first on the GPU), then the coin flips when `coin`
    (bb_flip's horizontal from fn.random.coin_flip)."""
    @headrace.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=0, seed=seed)
    def pipe():
        nodes = [fn.external_source(source=_source(samples), batch=True) for samples in inputs]
        nodes = [n.gpu() for n in nodes] if device == "gpu" else nodes
        args = {name: fn.external_source(source=_source(values), batch=True)
                for name, values in (arg_inputs or {}).items()}
        flips = fn.random.coin_flip(probability=0.5) if coin else None
        if coin:
            args["horizontal"] = flips
        out = getattr(fn, op)(*nodes, **args, **kwargs, name="op")  # named: a random op's seed follows the name
        out = tuple(out) if isinstance(out, list | tuple) else (out,)
        return (*out, flips) if coin else out

    p = pipe()
    p.build()
    outputs = p.run()
    result = []
    for out in outputs:
        out = out.as_cpu() if getattr(out, "device", "cpu") == "gpu" else out
        result.append([np.array(out.at(i)) for i in range(len(out))])
    p.close()
    return result


def cpu_and_gpu(op: str, inputs: list[list[np.ndarray]], **kwargs):
    return run_pipeline(op, inputs, "cpu", **kwargs), run_pipeline(op, inputs, "gpu", **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("op, kwargs, arg_inputs", BOX_CASES)
def test_gpu_box_transforms_match_cpu(op, kwargs, arg_inputs):
    for batch in (RAGGED, DENSE, EMPTY):
        boxes = batch if kwargs.get("ltrb") else [xywh(b) for b in batch]
        make = flags if op == "bb_flip" else floats
        values = {name: make(v[:len(boxes)]) for name, v in (arg_inputs or {}).items()}
        assert_same(*cpu_and_gpu(op, [boxes], arg_inputs=values, **kwargs))


@pytest.mark.gpu
@pytest.mark.parametrize("ltrb_boxes", [True, False])
def test_gpu_bb_flip_with_coin_flip_matches_the_cpu_kernel(ltrb_boxes):
    boxes = RAGGED if ltrb_boxes else [xywh(b) for b in RAGGED]
    for seed in (3, 10):  # seeds whose coins (on the CPU) flip some samples and not others
        flipped, coins = run_pipeline("bb_flip", [boxes], "gpu", coin=True, seed=seed, ltrb=ltrb_boxes)
        args_list = per_sample_args("bb_flip", len(boxes), {"horizontal": coins}, ltrb=ltrb_boxes)
        assert_same([flipped], cpu_kernel_outputs("bb_flip", [boxes], args_list))


@pytest.mark.gpu
@pytest.mark.parametrize("points, kwargs, centers", [
    (POINTS, dict(flip_y=1), [0.1, 0.5, 0.9, 0.3]),
    (POINTS3, dict(layout="xzy", flip_z=1, center_z=0.2), [0.0, 1.0, 0.25]),
])
def test_gpu_coord_flip_matches_cpu(points, kwargs, centers):
    values = {"center_x": floats(centers), "flip_x": flags([1, 0, 1, 1][:len(points)])}
    assert_same(*cpu_and_gpu("coord_flip", [points], arg_inputs=values, **kwargs))
    assert_same(*cpu_and_gpu("coord_flip", [[points[0]] * 3], **kwargs))  # a dense batch


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", ENCODER_KWARGS)
def test_gpu_box_encoder_matches_cpu(kwargs):
    tolerance = dict(atol=1e-5, rtol=1e-6) if kwargs.get("offset") else {}
    for batch, column in ((RAGGED, False), (RAGGED, True), (DENSE, True), (DENSE, False), (EMPTY, False)):
        labels = labels_for(batch, column)
        cpu, gpu = cpu_and_gpu("box_encoder", [batch, labels], anchors=ANCHORS.reshape(-1).tolist(), **kwargs)
        assert_same(gpu[:1], cpu[:1], **tolerance)
        assert_same(gpu[1:], cpu[1:])


def _flip_then_encode(inputs: list[list[np.ndarray]], device: str, ltrb: bool) -> tuple[list, int]:
    """bb_flip (random coins on both axes) read by box_encoder alone, as the SSD300 pipelines chain them: both
    outputs, and how many GPU-stage steps ran the two ops."""
    @headrace.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=0, seed=7)
    def pipe():
        boxes, labels = (fn.external_source(source=_source(samples), batch=True) for samples in inputs)
        if device == "gpu":
            boxes, labels = boxes.gpu(), labels.gpu()
        flipped = fn.bb_flip(boxes, ltrb=ltrb, horizontal=fn.random.coin_flip(probability=0.5, seed=3),
                             vertical=fn.random.coin_flip(probability=0.5, seed=4))
        return tuple(fn.box_encoder(flipped, labels, anchors=ANCHORS.reshape(-1).tolist(), criteria=0.4))

    p = pipe()
    p.build()
    outputs = [[np.array(o.at(i)) for i in range(len(o))]
               for o in (out.as_cpu() if getattr(out, "device", "cpu") == "gpu" else out for out in p.run())]
    steps = 0
    if device == "gpu":
        steps = sum(1 for kind, step in p._executor.gpu.steps if kind == "gpu"
                    and {n.schema.name for n in step.chain} & {"bb_flip", "box_encoder"})
    p.close()
    return outputs, steps


@pytest.mark.gpu
@pytest.mark.parametrize("ltrb", [True, False])
def test_gpu_bb_flip_into_box_encoder_is_one_step_with_the_cpu_bits(ltrb):
    """The fused bb_flip -> box_encoder step (its batch: bb_flip's boxes, then box_encoder's labels) gives the CPU
    pipeline's outputs, on ragged, dense and empty batches."""
    for batch in (RAGGED, DENSE, EMPTY):
        inputs = [batch if ltrb else [xywh(b) for b in batch], labels_for(batch)]
        (cpu, _), (gpu, steps) = _flip_then_encode(inputs, "cpu", ltrb), _flip_then_encode(inputs, "gpu", ltrb)
        assert steps == 1
        assert_same(gpu, cpu)


@pytest.mark.gpu
def test_gpu_box_encoder_ties_go_to_the_last_box_and_anchor():
    # two identical boxes with different labels: every anchor they match takes the second one's label
    boxes = [np.concatenate([DUPLICATE, DUPLICATE]), ANCHORS[10:11].copy()]
    labels = [np.array([3, 7], np.int32), np.array([5], np.int32)]
    cpu, gpu = cpu_and_gpu("box_encoder", [boxes, labels], anchors=ANCHORS.reshape(-1).tolist(), criteria=0.3)
    assert_same(gpu, cpu)
    assert 7 in gpu[1][0] and 3 not in gpu[1][0]
    # anchor 10 is repeated at the end: the box equal to it matches the last copy for sure (IoU 2), and both copies
    assert gpu[1][1][len(ANCHORS) - 4] == 5 and gpu[1][1][10] == 5


@pytest.mark.gpu
def test_gpu_box_encoder_reads_back_to_back_uploads_without_a_copy():
    # boxes and labels uploaded by .gpu() lie back to back in one buffer: ragged.pack takes them as one view
    import cupy as cp

    from headrace_kernels.gpu import ragged
    from headrace_kernels.gpu.staging import upload_arrays

    _, samples = upload_arrays(RAGGED)
    view = ragged.pack(cp, samples, 4)
    assert view.data.ptr == next(s for s in samples if s.size).data.ptr
    np.testing.assert_array_equal(cp.asnumpy(view), np.concatenate(RAGGED))
    assert ragged.adjacent_view(cp, [samples[1], samples[3]]) is None  # not adjacent: packed by a copy


@pytest.mark.gpu
@pytest.mark.parametrize("points, kwargs, arg_inputs", TRANSFORMS)
def test_gpu_coord_transform_matches_cpu(points, kwargs, arg_inputs):
    values = {name: [np.asarray(v, F32) for v in vs] for name, vs in (arg_inputs or {}).items()}
    for batch in (points, [points[2][:4]] * len(points)):
        assert_same(*cpu_and_gpu("coord_transform", [batch], arg_inputs=values, **kwargs), atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_gpu_host_kernels_match_cpu():
    boxes = [RAGGED[3], RAGGED[0], RAGGED[5], RAGGED[2]]
    labels = labels_for(boxes)
    angles = {"angle": floats([10.0, 0.0, 45.0, 90.0])}
    assert_same(*cpu_and_gpu("bbox_rotate", [boxes, labels], arg_inputs=angles, input_shape=[40, 60]))
    assert_same(*cpu_and_gpu("random_bbox_crop", [boxes, labels], output_bbox_indices=True, scaling=[0.3, 1.0]))


@pytest.mark.gpu
@pytest.mark.parametrize("counts", [[3, 0, 2, 5], [2, 2, 2], [0, 0]])
def test_gpu_upload_of_a_column_is_the_upload_of_its_samples(counts):
    """A batch kernel's column (its samples views of one array) uploads from that array, as the same batch that
    upload_arrays makes of the samples one by one: dense where every sample has one shape, else packed."""
    import cupy as cp

    from headrace.engine.gpu_batch import upload
    from headrace_kernels.columns import Column

    rows = np.arange(sum(counts) * 4, dtype=F32).reshape(-1, 4)
    for column in (Column.of_rows(rows, np.asarray(counts)), Column.of_dense(rows[:, 0].copy())):
        got, plain = upload(column), upload(list(column))
        assert (got.dense is None, got.packed is None) == (plain.dense is None, plain.packed is None)
        assert len(got.samples()) == len(plain.samples()) == len(column)
        for a, b in zip(got.samples(), plain.samples(), strict=True):
            a, b = cp.asnumpy(a), cp.asnumpy(b)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
