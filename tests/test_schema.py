"""Op schemas: bad op calls fail while the graph is defined, and the error names the op, the node and the argument."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import Pipeline, SchemaError, fn, pipeline_def, types
from headrace.schema import SCHEMAS


def define(body):
    """Define a one-op pipeline around `body(input_node)`; returns the pipeline (errors surface here)."""

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        out = body(fn.external_source(name="x"))
        return out if isinstance(out, tuple) else (out,)

    return pipe()


def raises(body, *fragments: str) -> str:
    with pytest.raises(SchemaError) as info:
        define(body)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_unknown_argument_is_named_and_valid_ones_listed():
    message = raises(lambda x: fn.readers.file(file_root="/data", shuffle=True), "readers.file", "'shuffle'")
    assert "Valid arguments:" in message
    for valid in ("random_shuffle", "file_root", "shard_id", "pad_last_batch"):
        assert valid in message


def test_unknown_argument_suggests_the_close_one():
    raises(lambda x: fn.resize(x, resize_shorterr=10), "resize", "'resize_shorterr'", "Did you mean 'resize_shorter'")


@pytest.mark.parametrize("body, argument, expected", [
    (lambda x: fn.resize(x, resize_x="wide"), "resize_x", "expected float"),
    (lambda x: fn.resize(x, resize_x=True), "resize_x", "expected float"),
    (lambda x: fn.resize(x, resize_x=10, antialias="yes"), "antialias", "expected bool"),
    (lambda x: fn.resize(x, resize_x=10, interp_type=99), "interp_type", "types.DALIInterpType"),
    (lambda x: fn.resize(x, resize_x=10, interp_type="INTERP_FANCY"), "interp_type", "expected one of"),
    (lambda x: fn.resize(x, resize_x=10, mode="squash"), "mode", "expected one of"),
    (lambda x: fn.crop(x, crop=[1, 2, 3]), "crop", "expected 2 values"),
    (lambda x: fn.crop(x, crop_pos_x="left"), "crop_pos_x", "expected float"),
    (lambda x: fn.crop_mirror_normalize(x, mean=["a"]), "mean", "expected float"),
    (lambda x: fn.crop_mirror_normalize(x, dtype=types.UINT64), "dtype", "expected one of"),
    (lambda x: fn.crop_mirror_normalize(x, output_layout="NHWC"), "output_layout", "expected one of"),
    (lambda x: fn.random.coin_flip(probability="half"), "probability", "expected float"),
    (lambda x: fn.random.uniform(range=[0.0]), "range", "expected 2 values"),
    (lambda x: fn.cast(x, dtype="FLOAT128"), "dtype", "expected one of"),
    (lambda x: fn.readers.file(file_root=3), "file_root", "expected str"),
    (lambda x: fn.readers.file(file_root="/d", random_shuffle=1), "random_shuffle", "expected bool"),
    (lambda x: fn.readers.file(file_root="/d", shard_id=0.5), "shard_id", "expected int"),
    (lambda x: fn.decoders.image(x, output_type=17), "output_type", "types.DALIImageType"),
])
def test_wrong_types_name_op_and_argument(body, argument, expected):
    message = raises(body, f"argument '{argument}'", expected)
    assert "node '" in message


@pytest.mark.parametrize("body, op, argument", [
    (lambda x: fn.cast(x), "cast", "dtype"),
    (lambda x: fn.random_resized_crop(x), "random_resized_crop", "size"),
])
def test_missing_required_argument(body, op, argument):
    raises(body, op, f"missing required argument '{argument}'")


def test_constant_needs_one_data_form():
    raises(lambda x: fn.constant(shape=[2]), "constant", "give the values as fdata (floats) or idata (integers)")
    raises(lambda x: fn.constant(fdata=[1.0], idata=[1]), "constant", "one of them")


@pytest.mark.parametrize("body, op", [
    (lambda x: fn.resize(resize_x=10), "resize"),
    (lambda x: fn.resize(x, x, resize_x=10), "resize"),
    (lambda x: fn.decoders.image(), "decoders.image"),
    (lambda x: fn.readers.file(x, file_root="/d"), "readers.file"),
    (lambda x: fn.random.coin_flip(x, x), "random.coin_flip"),
    (lambda x: fn.flip(x, x), "flip"),
])
def test_wrong_number_of_inputs(body, op):
    raises(body, op, "inputs, got")


@pytest.mark.parametrize("body, op, argument", [
    (lambda x: fn.resize(x, resize_x=10, max_size=fn.random.uniform(range=[1, 2])), "resize", "max_size"),
    (lambda x: fn.readers.file(file_root=fn.random.uniform()), "readers.file", "file_root"),
    (lambda x: fn.cast(x, dtype=x), "cast", "dtype"),
    (lambda x: fn.crop_mirror_normalize(x, output_layout=x), "crop_mirror_normalize", "output_layout"),
    (lambda x: fn.resize(x, resize_x=10, nonsense=x), "resize", "nonsense"),
])
def test_data_node_where_not_allowed(body, op, argument):
    raises(body, op, f"'{argument}'", "cannot take a DataNode")


def test_array_input_becomes_a_constant_node():
    """As in DALI, a number, list or array given as an op input is a constant node."""
    pipe = define(lambda x: fn.resize(np.zeros((4, 4, 3), np.uint8), resize_x=2))
    assert [n.schema.name for n in pipe.graph.nodes][-2:] == ["constant", "resize"]


def test_non_data_node_input():
    raises(lambda x: fn.resize("an image", resize_x=2), "resize", "input 0")


def test_per_sample_arguments_are_accepted():
    pipe = define(lambda x: fn.crop_mirror_normalize(x, mirror=fn.random.coin_flip(),
                                                     crop_pos_x=fn.random.uniform(range=[0, 1])))
    assert isinstance(pipe, Pipeline)


def test_unsupported_device():
    raises(lambda x: fn.peek_image_shape(x, device="gpu"), "peek_image_shape", "device 'gpu' is not supported")


def test_cpu_op_cannot_read_gpu_data():
    raises(lambda x: fn.flip(x.gpu(), device="cpu"), "flip", "call .cpu()")


def test_gpu_argument_input_is_refused():
    raises(lambda x: fn.flip(x.gpu(), horizontal=fn.random.coin_flip().gpu()), "flip", "'horizontal'", ".cpu()")


def test_duplicate_node_name():
    raises(lambda x: (fn.flip(x, name="same"), fn.flip(x, name="same")), "flip", "'same' already exists")


def test_ops_outside_a_pipeline_definition():
    with pytest.raises(SchemaError, match="inside a pipeline definition"):
        fn.random.coin_flip()


def test_unknown_pipeline_parameter():
    with pytest.raises(SchemaError, match="unknown arguments.*batch_sise"):
        Pipeline(batch_sise=4)


def test_schema_drives_signature_docs():
    """Every fn callable's docstring is generated from its schema and lists every argument."""
    for name, schema in SCHEMAS.items():
        op = fn
        for part in name.split("."):
            op = getattr(op, part)
        for arg in schema.all_args:
            assert f"    {arg} (" in op.__doc__, (name, arg)


def test_numpy_values_are_accepted_for_list_and_scalar_arguments():
    pipe = define(lambda x: fn.crop_mirror_normalize(x, mean=np.float32(5), std=np.array([1.0, 2.0, 3.0]),
                                                     crop=np.array([4, 4]), crop_pos_x=np.float64(0.25),
                                                     dtype=types.FLOAT))
    node = next(n for n in pipe.graph.nodes if n.schema.name == "crop_mirror_normalize")
    assert node.args["mean"] == [5.0] and node.args["std"] == [1.0, 2.0, 3.0] and node.args["crop"] == [4.0, 4.0]
    assert node.args["crop_pos_x"] == 0.25 and type(node.args["crop_pos_x"]) is float


def test_deprecated_argument_names_of_dali_are_read_as_todays():
    """DALI's crop_mirror_normalize / crop still take `output_dtype` for `dtype`; the pipeline file keeps `dtype`."""
    images = [np.full((8, 8, 3), 7, np.uint8)]
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        data = fn.external_source(source=lambda: images, batch=True)
        old = fn.crop_mirror_normalize(data, crop=(4, 4), output_dtype=types.UINT8, mean=[0.0], std=[1.0])
        pipe.set_outputs(old, fn.crop(data, crop=(4, 4), output_dtype=types.FLOAT))
    assert pipe.outputs[0].op.args["dtype"] == types.UINT8 and "output_dtype" not in pipe.outputs[0].op.args
    normalized, cropped = pipe.run()
    assert np.asarray(normalized.at(0)).dtype == np.uint8 and np.asarray(cropped.at(0)).dtype == np.float32
    pipe.close()
    with pytest.raises(SchemaError, match=r"crop .*'dtype' or its old name 'output_dtype', not both"):
        with Pipeline(batch_size=1, num_threads=1, device_id=None):
            fn.crop(fn.external_source(source=lambda: images, batch=True), crop=(4, 4), dtype=types.FLOAT,
                    output_dtype=types.FLOAT)
