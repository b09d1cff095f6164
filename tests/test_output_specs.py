"""Output specs: every op declares one in its schema, and what they say (element type, number of dimensions, fixed
extents, layout) is what the CPU pipeline produces."""

from __future__ import annotations

import inspect
import pkgutil

import numpy as np
import pytest

from headrace import Pipeline, fn, ops, pipeline_def, types
from headrace.schema import SCHEMAS, OutputSpec

RNG = np.random.default_rng(4)
IMAGES = [RNG.integers(0, 256, (10 + i, 14 - i, 3), dtype=np.uint8) for i in range(3)]


def test_every_op_declares_an_output_spec():
    missing = sorted(name for name, schema in SCHEMAS.items() if schema.output_spec is None)
    assert not missing, f"ops without an output_spec in their schema: {', '.join(missing)}"


def test_every_output_spec_says_in_one_line_what_the_output_is():
    unsaid = sorted(name for name, schema in SCHEMAS.items() if schema.output_spec is not None
                    and len((inspect.getdoc(schema.output_spec) or "\n").strip().splitlines()) != 1)
    assert not unsaid, f"output specs without a one-line docstring: {', '.join(unsaid)}"


def test_every_op_has_the_family_of_its_module():
    families = {m.name for m in pkgutil.iter_modules(ops.__path__)}
    strays = sorted(name for name, schema in SCHEMAS.items()
                    if schema.family not in families and not schema.plugin_module)  # user ops: their own module
    assert not strays, f"ops whose family is not an ops module: {', '.join(strays)}"
    assert SCHEMAS["resize"].family == "geometry" and SCHEMAS["reductions.sum"].family == "reductions"
    assert SCHEMAS["external_source"].family == "readers" and SCHEMAS["copy"].family == "transfer"


def test_the_label_and_the_normal_forms():
    assert OutputSpec(types.DALIDataType.FLOAT16, "CHW").label == "float16 CHW"
    assert OutputSpec(np.uint8, "HWC", (-1, -1, 3), "RGB").label == "uint8 HWC (RGB)"
    assert OutputSpec().label == "?" and OutputSpec(layout="").layout is None
    assert OutputSpec("int32", dims=[1]).dims == (1,) and OutputSpec("int32", dims=[1]).ndim == 1


def _agrees(spec: OutputSpec, batch, what: str) -> None:
    """The spec of a pipeline output against one CPU batch of it: dtype, ndim, fixed extents, layout. Only
    math.binary leaves its dims unknown (two tensors broadcast per sample)."""
    assert spec.dtype is not None and (spec.dims is not None or "math.binary" in what), (what, spec)
    assert batch.dtype == spec.dtype, (what, spec, batch.dtype)
    for i in range(len(batch) if spec.dims is not None else 0):
        sample = np.asarray(batch.at(i))
        assert sample.ndim == len(spec.dims), (what, spec, sample.shape)
        assert all(want in (-1, got) for want, got in zip(spec.dims, sample.shape, strict=True)), \
            (what, spec, sample.shape)
    if batch.layout():
        assert spec.layout == batch.layout(), (what, spec, batch.layout())


def _run_and_check(pipe: Pipeline, **feed) -> None:
    for out, batch in zip(pipe.outputs, pipe.run(**feed), strict=True):
        _agrees(out.spec, batch, f"{out.name} ({out.op.schema.name})")


@pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=5)
def _tensor_ops():
    hwc = fn.external_source(name="x", dtype=types.UINT8, ndim=3, layout="HWC")
    chw = fn.transpose(hwc, perm=[2, 0, 1])
    small = fn.resize(hwc, resize_x=12, resize_y=8)
    half = fn.cast(small, dtype=types.FLOAT16)
    label = fn.constant(fdata=[2.0], shape=[1], dtype=types.INT32)
    mean = fn.reductions.mean(hwc, axes=[0, 1])
    return (
        hwc, chw, small, half, fn.crop(small, crop=(4, 5)), fn.crop(small, crop_h=3, dtype=types.FLOAT),
        fn.crop_mirror_normalize(small, crop=(6, 6), mean=[1.0], std=[2.0]),
        fn.crop_mirror_normalize(small, output_layout="HWC", dtype=types.UINT8, pad_output=True),
        fn.random_resized_crop(hwc, size=[5, 7]), fn.flip(small, vertical=1), fn.copy(half),
        small * 2, 0.5 * small, small / small, small > 100, -half, fn.reductions.sum(small),
        mean, fn.reductions.max(chw, axis_names="HW", keep_dims=True), fn.reductions.std_dev(hwc, mean, axes=[0, 1]),
        fn.reductions.rms(hwc, axes=[2]), fn.stack(small, small, axis=1), fn.cat(small, small, axis=1),
        fn.reshape(small, shape=[8, 36]), fn.reshape(small, src_dims=[2, -1, 0, 1]), fn.pad(small, axes=[0]),
        fn.one_hot(label, num_classes=4), fn.erase(chw, anchor=[1, 1], shape=[2, 2]), fn.paste(small, ratio=2.0),
        fn.rotate(small, angle=30.0), fn.rotate(small, angle=30.0, keep_size=True),
        fn.rotate(small, angle=5, size=[9, 9]),
        fn.warp_affine(small, matrix=[1, 0, 1, 0, 1, 0]), fn.gaussian_blur(small, sigma=1.0), fn.hsv(small),
        fn.color_twist(small, dtype=types.FLOAT), fn.brightness_contrast(half), label,
        fn.random.uniform(range=[0, 1], shape=[2]), fn.random.normal(), fn.random.coin_flip(dtype=types.UINT8),
    )


def test_specs_agree_with_what_the_cpu_pipeline_produces():
    pipe = _tensor_ops()
    _run_and_check(pipe, x=IMAGES)
    specs = {out.op.schema.name: out.spec for out in pipe.outputs}
    assert specs["crop_mirror_normalize"].dims == (8, 12, -1)  # the last one: HWC (channels unknown: -1)
    assert specs["one_hot"].dims == (4,) and specs["reductions.sum"].dims == ()
    assert specs["stack"].dims == (8, 2, 12, -1) and specs["rotate"].dims == (9, 9, -1)


def test_specs_of_readers_and_decoders(image_folder):
    pipe = Pipeline(batch_size=4, num_threads=1, seed=1)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        gray = fn.decoders.image(jpegs, output_type=types.GRAY)
        rgb = fn.decoders.image_random_crop(jpegs)
        pipe.set_outputs(jpegs, labels, gray, rgb, fn.crop_mirror_normalize(fn.resize(rgb, size=[9, 11])))
    _run_and_check(pipe)
    assert [o.spec.label for o in pipe.outputs] == ["uint8 (encoded file)", "int32 (label)", "uint8 HWC (GRAY)",
                                                    "uint8 HWC (RGB)", "float32 CHW"]
    assert pipe.outputs[2].spec.dims == (-1, -1, 1) and pipe.outputs[4].spec.dims == (3, 9, 11)


def test_conditionals_join_the_branches():
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(name="x", dtype=types.UINT8, ndim=3, layout="HWC")
        y = fn.cast(x, dtype=types.INT16)
        if fn.reductions.mean(x) > 120:
            y = fn.crop(y, crop=(4, 4))
        else:
            y = fn.crop(y, crop=(4, 6))
        return y

    built = pipe()
    assert built.outputs[0].spec == OutputSpec(np.int16, "HWC", (4, -1, -1))
    _run_and_check(built, x=IMAGES)


def test_a_loaded_pipeline_file_has_the_same_specs():
    pipe = _tensor_ops()
    loaded = Pipeline.load(pipe.serialize())
    assert [o.spec for o in loaded.outputs] == [o.spec for o in pipe.outputs]
    assert [n.output_specs for n in loaded.graph.nodes] == [n.output_specs for n in pipe.graph.nodes]


def test_a_spec_with_the_wrong_number_of_outputs_is_a_bug_of_the_schema():
    schema = SCHEMAS["readers.file"]
    broken = type(schema)(**{**schema.__dict__, "output_spec": lambda a: [OutputSpec()]})
    with pytest.raises(AssertionError, match="readers.file: its output spec gives 1 outputs, the op has 2"):
        broken.output_specs({})
