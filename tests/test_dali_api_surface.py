"""DALI's API surface, run as a DALI user would with the import line changed: argument forms, the legacy class API,
types.Constant, layouts of returned batches, serialize/deserialize, the backend/tensors names, external_source's
positional source and num_outputs. Each pipeline runs in headrace and in DALI's CPU build (marker dali) and the
outputs must be equal: exact for integer data, within 1e-5 for float data (the same arithmetic in float32), except
resized uint8 images, within 1 (the rounding of the filter's sums, as tests/test_resize.py allows); random ops are
compared by shape, dtype and layout."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from ops_support import HAS_DALI, needs_dali

import headrace
from headrace import fn, ops, pipeline_def, types
from headrace.errors import SchemaError

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]


def api(name: str) -> SimpleNamespace:
    """The names a DALI script imports, from `headrace` or from `nvidia.dali`."""
    if name == "headrace":
        return SimpleNamespace(fn=headrace.fn, types=headrace.types, ops=headrace.ops, Pipeline=headrace.Pipeline,
                               pipeline_def=headrace.pipeline_def)
    dali = importlib.import_module("nvidia.dali")
    return SimpleNamespace(fn=importlib.import_module("nvidia.dali.fn"),
                           types=importlib.import_module("nvidia.dali.types"),
                           ops=importlib.import_module("nvidia.dali.ops"), Pipeline=dali.Pipeline,
                           pipeline_def=dali.pipeline_def)


def images(count: int = 3, seed: int = 0) -> list[np.ndarray]:
    """HWC uint8 images of different sizes."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (40 + 7 * i, 60 - 5 * i, 3), dtype=np.uint8) for i in range(count)]


def outputs(pipe, batches: int = 1) -> list[tuple[list[np.ndarray], str, np.dtype]]:
    """Every output of `batches` batches: (samples, layout, dtype)."""
    pipe.build()
    got = []
    for _ in range(batches):
        for out in pipe.run():
            samples = [np.array(out.at(i)) for i in range(len(out))]
            got.append((samples, out.layout(), samples[0].dtype))
    return got


def assert_same(ours, theirs, random: bool = False, atol: float = 0) -> None:
    assert len(ours) == len(theirs)
    for (a, layout_a, dtype_a), (b, layout_b, dtype_b) in zip(ours, theirs, strict=True):
        assert (layout_a, dtype_a) == (layout_b, dtype_b)
        assert [s.shape for s in a] == [s.shape for s in b]
        if not random:
            for x, y in zip(a, b, strict=True):
                if x.dtype.kind == "f":
                    np.testing.assert_allclose(x, y, atol=max(atol, 1e-5), rtol=1e-5)
                else:
                    np.testing.assert_allclose(x.astype(np.int64), y.astype(np.int64), atol=atol, rtol=0)


def with_images(a: SimpleNamespace, body, batch: int = 3):
    """A pipeline over `images()` (layout HWC) whose outputs are body(a, images)."""
    data = images(batch)

    @a.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=7)
    def pipe():
        x = a.fn.external_source(source=lambda: data, layout="HWC")
        out = body(a, x)
        return out

    return pipe()


# DALI's own documented forms (resize and random_resized_crop docs, the ResNet-50 example's arguments)
ARGUMENT_FORMS = {
    "resize_scalar_size": (lambda a, x: a.fn.resize(x, size=32, mode="not_smaller"), False),
    "resize_one_value_list": (lambda a, x: a.fn.resize(x, size=[30], mode="not_larger"), False),
    "resize_numpy_ints": (lambda a, x: a.fn.resize(x, resize_x=np.int64(30), resize_y=20), False),
    "resize_shorter_int": (lambda a, x: a.fn.resize(x, resize_shorter=33, interp_type=a.types.INTERP_TRIANGULAR),
                           False),
    "random_resized_crop_scalar": (lambda a, x: a.fn.random_resized_crop(x, size=24), True),
    "random_resized_crop_scalar_area": (lambda a, x: a.fn.random_resized_crop(x, size=(20, 24),
                                                                              random_area=[0.3, 1.0]), True),
    "cmn_bool_mirror": (lambda a, x: a.fn.crop_mirror_normalize(x, mirror=False, crop=(24, 20),
                                                                mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                                                std=[0.229 * 255, 0.224 * 255, 0.225 * 255]), False),
    "cmn_true_mirror_tuple_mean": (lambda a, x: a.fn.crop_mirror_normalize(x, mirror=True, crop=(16, 16),
                                                                           mean=(1, 2, 3), std=np.float32(2)), False),
    "cmn_scalar_mean_hwc": (lambda a, x: a.fn.crop_mirror_normalize(x, mean=3, std=2, output_layout="HWC",
                                                                    dtype=a.types.FLOAT16), False),
    "flip_bool": (lambda a, x: a.fn.flip(x, horizontal=True, vertical=False), False),
    "constant_int_is_int32": (lambda a, x: x + a.types.Constant(3), False),
    "constant_float": (lambda a, x: x * a.types.Constant(0.5), False),
    "numpy_int64_constant": (lambda a, x: a.types.Constant(np.array([1, 2, 3])) + x, False),
}


@pytest.mark.parametrize("name", sorted(ARGUMENT_FORMS))
def test_argument_forms_as_dali(name):
    body, random = ARGUMENT_FORMS[name]
    ours = outputs(with_images(api("headrace"), body))
    if not HAS_DALI:
        assert ours and all(samples for samples, _, _ in ours)
        pytest.skip("DALI is not installed: ran headrace only")
    assert_same(ours, outputs(with_images(api("dali"), body)), random, atol=1 if name.startswith("resize") else 0)


def test_scalar_broadcasts_to_the_extents_dali_spells():
    ours = outputs(with_images(api("headrace"), lambda a, x: a.fn.random_resized_crop(x, size=24)))
    assert {s.shape for s in ours[0][0]} == {(24, 24, 3)}


def test_no_broadcast_where_one_value_means_something_else():
    with pytest.raises(SchemaError, match="range.*expected 2 values"):
        outputs(with_images(api("headrace"), lambda a, x: a.fn.random.uniform(range=1.0)))


def test_numpy_dtype_is_taken_for_a_dtype_argument():
    ours = outputs(with_images(api("headrace"), lambda a, x: a.fn.cast(x, dtype=np.float32)))
    assert ours[0][2] == np.float32


# The legacy class API (DALI's older notebooks: a Pipeline subclass, ops objects made in __init__)
def legacy_pipeline(a: SimpleNamespace, data: list[np.ndarray]):
    class ResizePipeline(a.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=12)
            self.input = a.ops.ExternalSource(source=lambda: data, layout="HWC")
            self.resize = a.ops.Resize(resize_x=32, resize_y=24)
            self.cmn = a.ops.CropMirrorNormalize(crop=(16, 16), mean=[10.0, 20.0, 30.0], std=[2.0, 2.0, 2.0],
                                                 output_layout="CHW")
            self.coin = a.ops.random.CoinFlip(probability=0.5)
            self.cast = a.ops.Cast(dtype=a.types.INT32)

        def define_graph(self):
            images = self.input()
            resized = self.resize(images)
            return resized, self.cmn(resized), self.cast(self.coin())

    return ResizePipeline(batch_size=len(data), num_threads=1, device_id=None)


@pytest.mark.parametrize("name", APIS)
def test_legacy_pipeline_subclass_builds_and_runs(name):
    data = images()
    ours = outputs(legacy_pipeline(api("headrace"), data))
    assert [layout for _, layout, _ in ours] == ["HWC", "CHW", ""]
    if name == "dali":
        theirs = outputs(legacy_pipeline(api("dali"), data))
        assert_same(ours[:1], theirs[:1], atol=1)  # resized uint8
        assert_same(ours[1:2], theirs[1:2], atol=0.51)  # normalized (std 2) from them
        assert_same(ours[2:], theirs[2:], random=True)


def test_legacy_names_map_to_the_schemas_as_dali_names_them():
    assert ops.readers.File.schema.name == "readers.file"
    assert ops.decoders.Image.schema.name == "decoders.image"
    assert ops.random.CoinFlip.schema.name == "random.coin_flip"
    assert ops.FileReader.schema.name == "readers.file"  # DALI's older top-level name
    assert ops.CropMirrorNormalize.schema.name == "crop_mirror_normalize"


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="DALI is not installed")
def test_every_dali_legacy_class_of_an_op_headrace_has_resolves():
    dali_ops = importlib.import_module("nvidia.dali.ops")
    dali_fn = importlib.import_module("nvidia.dali.fn")
    checked = 0
    for space in ("", "readers", "decoders", "random", "noise", "experimental", "transforms", "reductions"):
        theirs = getattr(dali_ops, space) if space else dali_ops
        ours = getattr(ops, space) if space else ops
        their_fn = getattr(dali_fn, space) if space else dali_fn
        for class_name in dir(theirs):
            if not class_name[:1].isupper() or not isinstance(getattr(theirs, class_name), type):
                continue
            snake = getattr(getattr(theirs, class_name), "schema_name", None) or ""
            fn_name = next((n for n in dir(their_fn) if n.replace("_", "") == class_name.lower()), None)
            full = f"{space}.{fn_name}" if space else fn_name
            if fn_name is None or full not in headrace.schema.SCHEMAS or snake.startswith("_"):
                continue
            assert getattr(ours, class_name).schema.name == full, class_name
            checked += 1
    assert checked >= 20


def test_unknown_legacy_class_and_fn_op_suggest_names():
    with pytest.raises(AttributeError, match="Did you mean Resize"):
        ops.Resze  # noqa: B018
    with pytest.raises(AttributeError, match="Did you mean fn.crop_mirror_normalize"):
        fn.crop_mirror_normalise  # noqa: B018


def test_schema_modules_stay_reachable_through_the_ops_namespace():
    import headrace.ops.geometry as geometry

    assert geometry.__name__ == "headrace.ops.geometry"
    assert ops.readers.IMAGE_EXTENSIONS  # a name of the schema module ops/readers.py


# types.Constant
@pytest.mark.parametrize("name", APIS)
def test_constant_outside_a_pipeline_is_a_scalar_used_inside(name):
    a = api(name)
    three, half = a.types.Constant(3), a.types.Constant(2.5)
    assert three.dtype == a.types.INT32 and half.dtype == a.types.FLOAT
    data = [np.arange(6, dtype=np.uint8).reshape(2, 3)]

    @a.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = a.fn.external_source(source=lambda: data)
        return x + three, x * half, a.fn.flip(a.fn.reshape(x, shape=[2, 3, 1]), horizontal=three)

    got = outputs(pipe())
    assert got[0][2] == np.int32 and got[1][2] == np.float32
    np.testing.assert_array_equal(got[0][0][0], data[0].astype(np.int32) + 3)
    np.testing.assert_allclose(got[1][0][0], data[0] * 2.5)


def test_constant_takes_dali_argument_order():
    sc = types.Constant(7, types.UINT8)
    assert sc.dtype == types.UINT8 and int(sc) == 7


# Layouts of the returned batches
@pytest.mark.parametrize("name", APIS)
def test_returned_batches_carry_their_layouts(name):
    a = api(name)
    pipe = with_images(a, lambda a, x: (a.fn.resize(x, resize_x=20, resize_y=20),
                                        a.fn.crop_mirror_normalize(x, crop=(8, 8)), a.fn.flip(x)))
    assert [layout for _, layout, _ in outputs(pipe)] == ["HWC", "CHW", "HWC"]


# Serialize / deserialize
def test_serialize_returns_bytes_and_deserialize_builds():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        return fn.random.uniform(range=[0.0, 1.0], shape=[3])

    original = pipe()
    data = original.serialize()
    assert isinstance(data, bytes)
    loaded = headrace.Pipeline.deserialize(data)
    np.testing.assert_array_equal(loaded.run()[0].as_array(), original.run()[0].as_array())
    with pytest.raises(SchemaError, match="exactly one"):
        headrace.Pipeline.deserialize()


def test_serialize_to_a_file(tmp_path):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        return fn.random.uniform(range=[0.0, 1.0])

    path = tmp_path / "pipe.json"
    data = pipe().serialize(filename=path)
    assert path.read_bytes() == data
    assert headrace.Pipeline.deserialize(filename=path).run()[0].shape() == [(), ()]


# backend / tensors
def test_backend_and_tensors_names():
    from headrace.backend import TensorCPU, TensorListCPU, TensorListGPU
    from headrace.tensors import TensorListCPU as Same

    assert Same is TensorListCPU and TensorListGPU.device == "gpu"
    batch = TensorListCPU(np.zeros((2, 4, 4, 3), np.uint8), "HWC")
    assert batch.layout() == "HWC" and batch.shape() == [(4, 4, 3)] * 2
    tensor = TensorCPU(np.ones((1, 3)), "HW")
    assert tensor.shape() == [1, 3] and tensor.layout() == "HW" and np.array(tensor).sum() == 3
    assert tensor.squeeze() and tensor.shape() == [3]


# external_source forms
@pytest.mark.parametrize("name", APIS)
def test_external_source_positional_source_and_num_outputs(name):
    a = api(name)
    first = [np.full((2, 2), i, np.int16) for i in range(2)]
    second = [np.arange(i + 1, dtype=np.float32) for i in range(2)]

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x, y = a.fn.external_source(lambda: (first, second), num_outputs=2)
        return x, y

    got = outputs(pipe())
    for (samples, _, _), expected in zip(got, (first, second), strict=True):
        for s, e in zip(samples, expected, strict=True):
            np.testing.assert_array_equal(s, e)


def sample_info_source(info):
    """DALI's documented per-sample source: ends the epoch after 10 samples."""
    if info.idx_in_epoch >= 10:
        raise StopIteration
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32)


def two_epochs(a: SimpleNamespace, **source_args) -> list[np.ndarray]:
    @a.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        return a.fn.external_source(sample_info_source, batch=False, **source_args)

    p = pipe()
    p.build()
    got = []
    for _ in range(2):
        try:
            while True:
                out = p.run()[0]
                got.append(np.stack([np.array(out.at(i)) for i in range(len(out))]))
        except StopIteration:
            p.reset()
    return got


def test_sample_info_and_epochs_as_dali():
    ours = two_epochs(api("headrace"))
    assert len(ours) == 4 and ours[2][0, 3] == 1  # two batches per epoch, the second epoch numbered 1
    if HAS_DALI:
        theirs = two_epochs(api("dali"))
        assert len(ours) == len(theirs)
        for x, y in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(x, y)


def test_batch_callable_with_an_argument_gets_the_iteration():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(lambda i: [np.array([i], np.int32)] * 2)

    p = pipe()
    assert [int(p.run()[0].at(0)[0]) for _ in range(3)] == [0, 1, 2]


def test_generator_function_source_restarts_each_epoch():
    def gen():
        for i in range(2):
            yield [np.array([i])]

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(gen)

    p = pipe()
    seen = []
    for _ in range(2):
        try:
            while True:
                seen.append(int(p.run()[0].at(0)[0]))
        except StopIteration:
            p.reset()
    assert seen == [0, 1, 0, 1]


# fn.paste places the image where DALI does (float32 products truncated)
@pytest.mark.parametrize("ratio, paste_x, paste_y, min_canvas", [
    (1.3, 0.3, 0.5, 0.0), (1.55, 0.77, 0.25, 0.0), (1.0, 0.77, 0.5, 17.0), (2.7, 1.0, 0.0, 0.0)])
def test_paste_position_as_dali(ratio, paste_x, paste_y, min_canvas):
    data = [np.ones((5 + 4 * i, 7 + 3 * i, 3), np.uint8) * (i + 1) for i in range(3)]
    body = lambda a, x: a.fn.paste(x, ratio=ratio, paste_x=paste_x, paste_y=paste_y,  # noqa: E731
                                   min_canvas_size=min_canvas, fill_value=0)

    def build(a):
        @a.pipeline_def(batch_size=3, num_threads=1, device_id=None)
        def pipe():
            return body(a, a.fn.external_source(source=lambda: data, layout="HWC"))

        return pipe()

    ours = outputs(build(api("headrace")))
    for image, out in zip(data, ours[0][0], strict=True):  # the image is there, whole, on the fill
        assert out.sum() == image.sum()
    if HAS_DALI:
        assert_same(ours, outputs(build(api("dali"))))


# DALI's ResNet-50 PyTorch example (docs/examples/use_cases/pytorch/resnet50/main.py), its pipeline as written there
# (CPU decoding), both branches
def resnet50_pipeline(a, data_dir, crop, size, is_training):
    @a.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=5)
    def create_dali_pipeline(data_dir, crop, size, shard_id, num_shards, dali_cpu=False, is_training=True):
        images, labels = a.fn.readers.file(file_root=data_dir, shard_id=shard_id, num_shards=num_shards,
                                           random_shuffle=is_training, pad_last_batch=True, name="Reader")
        dali_device = "cpu" if dali_cpu else "gpu"
        decoder_device = "cpu" if dali_cpu else "mixed"
        device_memory_padding = 211025920 if decoder_device == "mixed" else 0
        host_memory_padding = 140544512 if decoder_device == "mixed" else 0
        preallocate_width_hint = 5980 if decoder_device == "mixed" else 0
        preallocate_height_hint = 6430 if decoder_device == "mixed" else 0
        if is_training:
            images = a.fn.decoders.image_random_crop(images, device=decoder_device, output_type=a.types.RGB,
                                                     device_memory_padding=device_memory_padding,
                                                     host_memory_padding=host_memory_padding,
                                                     preallocate_width_hint=preallocate_width_hint,
                                                     preallocate_height_hint=preallocate_height_hint,
                                                     random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                     num_attempts=100)
            images = a.fn.resize(images, device=dali_device, resize_x=crop, resize_y=crop,
                                 interp_type=a.types.INTERP_TRIANGULAR)
            mirror = a.fn.random.coin_flip(probability=0.5)
        else:
            images = a.fn.decoders.image(images, device=decoder_device, output_type=a.types.RGB)
            images = a.fn.resize(images, device=dali_device, size=size, mode="not_smaller",
                                 interp_type=a.types.INTERP_TRIANGULAR)
            mirror = False
        images = a.fn.crop_mirror_normalize(images, dtype=a.types.FLOAT, output_layout="CHW", crop=(crop, crop),
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=mirror)
        labels = labels.gpu() if not dali_cpu else labels
        return images, labels

    return create_dali_pipeline(data_dir=data_dir, crop=crop, size=size, shard_id=0, num_shards=1, dali_cpu=True,
                                is_training=is_training)


@pytest.fixture(scope="module")
def jpeg_tree(tmp_path_factory):
    import cv2

    root = tmp_path_factory.mktemp("jpegs")
    rng = np.random.default_rng(1)
    for label in ("cat", "dog"):
        (root / label).mkdir()
        for i in range(4):
            image = cv2.GaussianBlur(rng.integers(0, 256, (48 + 8 * i, 64 - 4 * i, 3), dtype=np.uint8), (7, 7), 2)
            cv2.imwrite(str(root / label / f"{i}.jpg"), image)
    return str(root)


@pytest.mark.parametrize("is_training", [False, True])
def test_resnet50_example_pipeline(jpeg_tree, is_training):
    ours = outputs(resnet50_pipeline(api("headrace"), jpeg_tree, 24, 28, is_training), batches=2)
    assert [o[1] for o in ours[:2]] == ["CHW", ""]
    assert {s.shape for s in ours[0][0]} == {(3, 24, 24)}
    if HAS_DALI:
        theirs = outputs(resnet50_pipeline(api("dali"), jpeg_tree, 24, 28, is_training), batches=2)
        if is_training:
            assert_same(ours, theirs, random=True)
        else:  # decoded JPEG within 1 (IDCT rounding), resized within 1: normalized within 2 / 57
            assert_same(ours[0::2], theirs[0::2], atol=0.04)
            assert_same(ours[1::2], theirs[1::2])


# DALI's legacy notebooks: a reader + decoder pipeline class, and an external source fed in iter_setup
def legacy_reader_pipeline(a, root):
    class SimplePipeline(a.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=12)
            self.input = a.ops.readers.File(file_root=root, name="Reader")
            self.decode = a.ops.decoders.Image(device="cpu", output_type=a.types.RGB)
            self.rotate = a.ops.Rotate(angle=90.0, keep_size=False)

        def define_graph(self):
            jpegs, labels = self.input()
            images = self.decode(jpegs)
            return self.rotate(images), labels

    return SimplePipeline(batch_size=4, num_threads=1, device_id=None)


@pytest.mark.parametrize("name", APIS)
def test_legacy_reader_and_decoder_pipeline(jpeg_tree, name):
    pipe = legacy_reader_pipeline(api(name), jpeg_tree)
    got = outputs(pipe, batches=2)
    assert pipe.epoch_size("Reader") == 8
    ours = outputs(legacy_reader_pipeline(api("headrace"), jpeg_tree), batches=2)
    assert [o[1] for o in got] == [o[1] for o in ours] == ["HWC", ""] * 2
    assert_same(ours[1::2], got[1::2])  # labels, in the same order
    for x, y in zip(ours[0][0], got[0][0], strict=True):  # decoded and rotated: shapes as DALI's
        assert x.shape == y.shape


def legacy_fed_pipeline(a, batches):
    class FedPipeline(a.Pipeline):
        def __init__(self):
            super().__init__(batch_size=2, num_threads=1, device_id=None)
            self.source = a.ops.ExternalSource()
            self.batches = iter(batches)

        def define_graph(self):
            self.data = self.source()
            return self.data * 2

        def iter_setup(self):
            self.feed_input(self.data, next(self.batches))

    return FedPipeline()


@pytest.mark.parametrize("name", APIS)
def test_legacy_iter_setup_feeds_by_data_node(name):
    batches = [[np.full((2,), i * 2 + j, np.int32) for j in range(2)] for i in range(3)]
    got = outputs(legacy_fed_pipeline(api(name), batches), batches=3)
    for (samples, _, _), batch in zip(got, batches, strict=True):
        for s, b in zip(samples, batch, strict=True):
            np.testing.assert_array_equal(s, b * 2)


# The argument forms, one by one, at the schema
def test_argument_coercions_of_the_schema():
    from headrace.schema import Arg

    size = Arg("size", "float", None, list_of=True, list_len=(2, 2))
    assert size.coerce(256) == [256.0, 256.0]
    assert size.coerce(np.array([3, 4])) == [3.0, 4.0] and size.coerce((3, 4)) == [3.0, 4.0]
    assert size.coerce([types.Constant(5)]) == [5.0, 5.0]
    assert Arg("mirror", "int", 0).coerce(False) == 0 and Arg("mirror", "int", 0).coerce(np.int8(1)) == 1
    assert Arg("x", "float", 0.0).coerce(3) == 3.0 and Arg("x", "float", 0.0).coerce(np.float16(0.5)) == 0.5
    assert Arg("dtype", "dtype", None).coerce(np.uint8) is types.UINT8
    assert Arg("dtype", "dtype", None).coerce(np.dtype("float32")) is types.FLOAT
    assert Arg("mean", "float", [0.0], list_of=True).coerce(2) == [2.0]  # one value per channel, or one for all
    with pytest.raises(ValueError, match="expected 2 values"):
        Arg("range", "float", None, list_of=True, list_len=(2, 2)).coerce(1.0)


def test_pipeline_argument_typo_is_named_with_a_suggestion():
    with pytest.raises(SchemaError, match="Did you mean 'batch_size'"):
        headrace.Pipeline(batch_sise=2)


@pytest.mark.parametrize("name", APIS)
def test_schedule_run_then_outputs(name):
    a = api(name)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return a.fn.external_source(lambda i: [np.full((1,), i, np.int32)] * 2)

    p = pipe()
    p.build()
    p.schedule_run()
    first = p.outputs()
    assert int(np.array(first[0].at(0))[0]) == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # DALI warns about the names it still takes
@pytest.mark.parametrize("name", APIS)
def test_deprecated_top_level_names(name):
    a = api(name)
    data = images(2)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=4)
    def pipe():
        x = a.fn.external_source(source=lambda: data, layout="HWC")
        return x, a.fn.uniform(range=[0.0, 1.0]), a.fn.coin_flip(probability=0.5)

    got = outputs(pipe())
    assert [o[2] for o in got] == [np.uint8, np.float32, np.int32]
    assert ops.ImageDecoder.schema.name == "decoders.image" and ops.Uniform.schema.name == "random.uniform"


@pytest.mark.parametrize("name", APIS)
def test_array_constant_made_before_the_pipeline(name):
    a = api(name)
    table = a.types.Constant(np.arange(6, dtype=np.int16).reshape(2, 3))
    data = [np.ones((2, 3), np.int16) * i for i in range(2)]

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = a.fn.external_source(source=lambda: data)
        return x - table, table * x

    got = outputs(pipe())
    for i in range(2):
        np.testing.assert_array_equal(got[0][0][i], data[i] - np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(got[1][0][i], data[i] * np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("name", APIS)
def test_layout_names_and_pipeline_attributes_as_dali(name):
    a = api(name)
    assert (a.types.NCHW, a.types.NHWC, a.types.NFHWC, a.types.NFCHW) == ("CHW", "HWC", "FHWC", "FCHW")
    assert a.Pipeline(batch_size=6, num_threads=1, device_id=None).max_batch_size == 6
    assert headrace.Pipeline(batch_size=1, device_id=types.CPU_ONLY_DEVICE_ID).device_id is None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # DALI's fn.shapes
@pytest.mark.parametrize("name", APIS)
def test_a_2d_literal_of_a_per_sample_argument_is_every_samples_value(name):
    a = api(name)
    data = [np.arange(12, dtype=np.float32).reshape(4, 3)] * 2
    matrix = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)  # per-sample argument of fn.coord_transform (M)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return a.fn.shapes(a.fn.external_source(source=lambda: data)), a.fn.external_source(
            source=lambda: [np.ones((2, 3), np.float32)] * 2)

    got = outputs(pipe())
    assert [list(s) for s in got[0][0]] == [[4, 3], [4, 3]]
    if "coord_transform" in headrace.schema.SCHEMAS:
        @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def transformed():
            points = a.fn.external_source(source=lambda: [np.array([[1.0, 2.0]], np.float32)] * 2)
            return a.fn.coord_transform(points, M=matrix)

        for sample in outputs(transformed())[0][0]:
            np.testing.assert_allclose(sample, [[2.0, 1.0]])


def test_datanode_shape_method():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros((3, 5, 1), np.uint8)] * 2)
        return x.shape(), x.shape(dtype=types.INT32)

    got = outputs(pipe())
    assert [list(s) for s in got[0][0]] == [[3, 5, 1]] * 2 and got[1][2] == np.int32
