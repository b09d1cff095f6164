"""Every argument DALI's ops take, headrace's take too: a DALI pipeline ported by changing its import line must not
meet "unknown argument". Against DALI's own schemas (its CPU build, marker dali): for each op both libraries have,
every public, non-deprecated DALI argument is declared by headrace's schema, unless `NOT_SUPPORTED` names it with
the reason; a concrete default of headrace's equals DALI's (floats within 1e-6) unless `OTHER_DEFAULTS` says why
not; an argument DALI takes per sample (a DataNode) is per-sample here too unless `NOT_PER_SAMPLE` says why not. Then
the arguments added for compatibility are run against DALI's CPU build on the same inputs: exact (random draws: their
shapes and types, and the values drawn from a given set); `external_source(repeat_last=True)` against DALI's
documentation, which its CPU build cannot run."""

from __future__ import annotations

import ast
import importlib

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import fn, pipeline_def, types
from headrace.errors import SchemaError
from headrace.schema import REQUIRED, SCHEMAS

pytestmark = needs_dali

_VOLUMES = "volumetric (DHWC) data: headrace's image ops take 2-D images and sequences of them"
NOT_SUPPORTED = {
    **{(op, arg): _VOLUMES for op in ("crop", "crop_mirror_normalize", "resize_crop_mirror", "fast_resize_crop_mirror")
       for arg in ("crop_d", "crop_pos_z")},
    **{(op, "resize_z"): _VOLUMES for op in ("resize", "experimental.resize", "resize_crop_mirror",
                                             "fast_resize_crop_mirror")},
    ("flip", "depthwise"): _VOLUMES,
    ("rotate", "axis"): _VOLUMES,
    **{("readers.coco", arg): "DALI's binary cache of parsed annotations; headrace parses the annotation file at "
                              "build" for arg in ("preprocessed_annotations", "save_preprocessed_annotations",
                                                  "save_preprocessed_annotations_dir")},
}
"""(op, DALI argument) that headrace does not take, and why."""

NOT_PER_SAMPLE = {
    **{("pad", arg): "pad takes its arguments for the whole batch" for arg in ("align", "axes", "fill_value")},
    **{(op, "axes"): "the sliced axes are the batch's" for op in ("slice", "decoders.image_slice")},
    ("reshape", "src_dims"): "the kept axes are the batch's",
    ("tensor_resize", "interp_type"): "the filter is the batch's",
    **{("readers.numpy", arg): "a reader's arguments are literal: the region is the batch's" for arg in
       ("roi_start", "roi_end", "roi_shape", "rel_roi_start", "rel_roi_end", "rel_roi_shape")},
}
"""(op, argument) that DALI takes per sample (a DataNode) and headrace only as a literal, and why."""

OTHER_DEFAULTS = {
    ("noise.shot", "factor"): "DALI 2.4 documents 20 and applies 12 when none is given (tests/test_ops_noise.py)",
    ("readers.coco", "file_root"): "headrace reads the images from file_root: it must be given",
    ("dl_tensor_python_function", "batch_processing"): "DALI's Python wrapper defaults it to True, what DALI runs "
                                                       "(its C++ schema says False)",
    **{(op, "jpeg_fancy_upsampling"): "headrace's mixed decoders interpolate chroma as its CPU decoder does, so the "
       "two agree within test_gpu_decode's bounds (replicated chroma does not on sharp colour edges)"
       for op in ("decoders.image", "decoders.image_random_crop", "decoders.image_crop", "decoders.image_slice")},
}
"""(op, argument) whose concrete default differs from DALI's schema, and why."""


def _dali_schemas() -> dict[str, object]:
    """DALI's schema of every public headrace op that DALI's `fn` also has, by headrace's op name."""
    backend = importlib.import_module("nvidia.dali.backend")
    dali_fn = importlib.import_module("nvidia.dali.fn")
    found = {}
    for name in SCHEMAS:
        if name.startswith("_"):
            continue
        func = dali_fn
        for part in name.split("."):
            func = getattr(func, part, None)
        schema_name = getattr(func, "_schema_name", None)
        schema = backend.TryGetSchema(schema_name) if schema_name else None
        if schema is not None:
            found[name] = schema
    return found


def _dali_arguments(schema) -> list[str]:
    return [a for a in schema.GetArgumentNames() if not a.startswith("_") and not schema.IsDeprecatedArg(a)]


def _same_default(ours, dali_text: str) -> bool:
    try:
        theirs = ast.literal_eval(dali_text)
    except (ValueError, SyntaxError):
        return str(ours) == dali_text
    ours = [ours] if not isinstance(ours, list | tuple) else list(ours)
    theirs = [theirs] if not isinstance(theirs, list | tuple) else list(theirs)
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        a = getattr(a, "value", a)  # DALI's schema prints enums by value
        if isinstance(a, str) or isinstance(b, str):
            if str(a) != str(b):
                return False
        elif abs(float(a) - float(b)) > 1e-6 * max(1.0, abs(float(b))):
            return False
    return True


def test_every_dali_argument_is_accepted():
    schemas = _dali_schemas()
    assert len(schemas) > 100  # the mapping from names to DALI's schemas found the ops
    missing, stale = [], []
    for name, schema in sorted(schemas.items()):
        ours = SCHEMAS[name].all_args
        for arg in _dali_arguments(schema):
            if arg not in ours and (name, arg) not in NOT_SUPPORTED:
                missing.append(f"{name}: {arg}")
            if arg in ours and (name, arg) in NOT_SUPPORTED:
                stale.append(f"{name}: {arg}")
    for name, arg in NOT_SUPPORTED:
        if name not in schemas or arg not in _dali_arguments(schemas[name]):
            stale.append(f"{name}: {arg} (DALI has no such argument)")
    assert not missing, f"DALI arguments headrace does not take: {missing}"
    assert not stale, f"NOT_SUPPORTED entries that no longer apply: {stale}"


def test_concrete_defaults_are_dali_defaults():
    wrong = []
    for name, schema in sorted(_dali_schemas().items()):
        ours = SCHEMAS[name].all_args
        for arg in _dali_arguments(schema):
            if arg not in ours or (name, arg) in OTHER_DEFAULTS:
                continue
            default = ours[arg].default
            if default is REQUIRED:
                if schema.IsArgumentOptional(arg):
                    wrong.append(f"{name}: {arg} is required here, optional in DALI")
                continue
            if default is None or not schema.HasArgumentDefaultValue(arg):
                continue  # None: derived from the input or the other arguments, as DALI documents
            dali_text = schema.GetArgumentDefaultValueString(arg)
            if not _same_default(default, dali_text):
                wrong.append(f"{name}: {arg} defaults to {default!r} here, {dali_text} in DALI")
    assert not wrong, wrong


def test_per_sample_arguments_are_per_sample_here_too():
    literal_only, stale = [], []
    for name, schema in sorted(_dali_schemas().items()):
        ours = SCHEMAS[name].all_args
        for arg in _dali_arguments(schema):
            if arg not in ours or not schema.IsTensorArgument(arg):
                continue
            if not ours[arg].tensor_input and (name, arg) not in NOT_PER_SAMPLE:
                literal_only.append(f"{name}: {arg}")
            if ours[arg].tensor_input and (name, arg) in NOT_PER_SAMPLE:
                stale.append(f"{name}: {arg}")
    assert not literal_only, f"arguments DALI takes per sample and headrace does not: {literal_only}"
    assert not stale, f"NOT_PER_SAMPLE entries that no longer apply: {stale}"


def _random_draws(api, shapes, values):
    @api.pipeline_def(batch_size=len(shapes), num_threads=1, device_id=None, seed=4)
    def pipe():
        shape = api.fn.external_source(source=lambda: shapes)
        picked = api.fn.external_source(source=lambda: values)
        return (api.fn.random.uniform(shape=shape, range=[0, 1]), api.fn.random.normal(shape=shape),
                api.fn.random.coin_flip(shape=shape), api.fn.random.uniform(shape=[64], values=picked))

    built = pipe()
    built.build()
    return [[np.array(out.at(i)) for i in range(len(shapes))] for out in built.run()]


def test_random_draws_with_per_sample_shapes_and_values_as_dali():
    import headrace

    shapes = [np.array([2, 3], np.int32), np.array([4, 1], np.int32), np.array([0, 5], np.int32)]
    values = [np.array([1.0, 2.0], np.float32), np.array([5.0], np.float32), np.array([-1.0, 0.5, 7.0], np.float32)]
    ours = _random_draws(headrace, shapes, values)
    theirs = _random_draws(importlib.import_module("nvidia.dali"), shapes, values)
    for mine, dalis in zip(ours, theirs, strict=True):  # random: the shapes and types, not the numbers
        assert [(a.shape, a.dtype) for a in mine] == [(b.shape, b.dtype) for b in dalis]
    for drawn, allowed in zip(ours[3], values, strict=True):
        assert set(drawn.tolist()) <= set(allowed.tolist())
    assert all(0 <= a.min() and a.max() < 1 for a in ours[0] if a.size)


def test_transpose_without_perm_reverses_the_axes_as_dali():
    samples = [np.arange(24, dtype=np.int32).reshape(2, 3, 4), np.arange(30, dtype=np.int32).reshape(5, 3, 2)]
    ours = run_headrace("transpose", samples, layout="HWC")
    theirs = run_dali("transpose", samples, layout="HWC")
    for a, b, x in zip(ours, theirs, samples, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, x.transpose(2, 1, 0))


def _layouts(api_fn, pipeline, data: list[np.ndarray]):
    @pipeline(batch_size=len(data), num_threads=1, device_id=None)
    def pipe():
        x = api_fn.external_source(source=lambda: data, layout="HWC")
        return api_fn.transpose(x), api_fn.transpose(x, transpose_layout=False)

    built = pipe()
    built.build()
    return [out.layout() for out in built.run()]


def test_transpose_default_permutes_the_layout_as_dali():
    data = [np.zeros((2, 3, 4), np.uint8)]
    dali = importlib.import_module("nvidia.dali")
    assert _layouts(fn, pipeline_def, data) == _layouts(dali.fn, dali.pipeline_def, data) == ["CWH", "HWC"]


def test_one_hot_default_has_no_classes_as_dali():
    labels = [np.array([1], np.int32), np.array([0], np.int32)]
    for a, b in zip(run_headrace("one_hot", labels), run_dali("one_hot", labels), strict=True):
        assert a.shape == b.shape == (0,) and a.dtype == b.dtype


@pytest.mark.parametrize("image_type", [types.BGR, types.GRAY, types.YCbCr])
def test_color_twist_image_type_changes_nothing_as_dali(image_type):
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (9, 11, 3), dtype=np.uint8) for _ in range(2)]
    twist = {"hue": 30.0, "saturation": 1.3, "brightness": 1.1, "contrast": 0.9}
    plain = run_headrace("color_twist", images, layout="HWC", **twist)
    ours = run_headrace("color_twist", images, layout="HWC", image_type=image_type, **twist)
    theirs = run_dali("color_twist", images, layout="HWC", image_type=image_type, **twist)
    for a, b, c in zip(plain, ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.abs(b.astype(int) - c.astype(int)).max() <= 1  # tests/test_ops_color.py's tolerance for twist


def test_hints_are_accepted_everywhere_and_change_nothing():
    images = [np.full((4, 5, 3), 7, np.uint8)]
    plain = run_headrace("flip", images, layout="HWC", horizontal=1)
    hinted = run_headrace("flip", images, layout="HWC", horizontal=1, bytes_per_sample_hint=[1 << 20])
    np.testing.assert_array_equal(plain[0], hinted[0])

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def negative_threshold():
        return fn.decoders.image(fn.external_source(name="x"), hybrid_huffman_threshold=-1)

    with pytest.raises(SchemaError, match="hybrid_huffman_threshold"):
        negative_threshold()


def _fed(repeat_last: bool = True):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(name="x", repeat_last=repeat_last) * 2

    built = pipe()
    built.build()
    return built


def _run(pipe, **feeds) -> list[int]:
    return [int(v) for v in pipe.run(**feeds)[0].as_array().reshape(-1)]


def test_repeat_last_reuses_the_last_batch_until_a_new_one_is_fed():
    # DALI documents it ("the last batch is re-fed when running the operator and no new data was provided since the
    # previous run"); its CPU build cannot run it (its feed asks for a CUDA stream order), so this holds headrace to
    # the documentation
    pipe = _fed()
    a, b, c = (np.array([[v], [v + 1]], np.int32) for v in (1, 5, 9))
    assert _run(pipe, x=a) == [2, 4]
    assert _run(pipe) == [2, 4]  # nothing new fed: the last batch again
    pipe.feed_input("x", b)
    pipe.feed_input("x", c)
    assert _run(pipe) == [10, 12]  # batches fed ahead are taken in turn
    assert _run(pipe) == [18, 20]
    assert _run(pipe) == [18, 20]


def test_repeat_last_needs_a_first_batch_and_no_source():
    with pytest.raises(SchemaError, match="was fed no data"):
        _run(_fed())
    with pytest.raises(SchemaError, match="was fed no data"):  # without repeat_last every run needs its batch
        pipe = _fed(repeat_last=False)
        _run(pipe, x=np.array([[1], [2]], np.int32))
        _run(pipe)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def with_source():
        return fn.external_source(source=lambda: [np.zeros(1, np.int32)] * 2, repeat_last=True)

    with pytest.raises(SchemaError, match="repeat_last=True is for a source fed by run"):
        with_source().build()
