"""DALI's tensor-manipulation examples: docs/examples/general/reshape.ipynb, slice, cat/stack, expand_dims/squeeze,
element_extract, one_hot, the constant-creating ops, permute_batch and transpose (operator tests under
dali/test/python/operator_1/)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case
from dali_suite.images import image_pipeline

OPTEST = "DALI dali/test/python/operator_1/"


def arrays(seed: int = 0, count: int = 3) -> list[np.ndarray]:
    """float32 samples of shape (4 + i, 6)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((4 + i, 6)).astype(np.float32) for i in range(count)]


def tensor_pipeline(lib: Lib, samples: list[np.ndarray], body: Callable, layout: str | None = None,
                    batch_size: int | None = None) -> Pipe:
    """external_source of `samples`, then `body(fn, types, x)`."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=batch_size or len(samples), num_threads=1, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(source=batch_source(samples), batch=True, **({"layout": layout} if layout else {}))
        return body(fn, types, x)

    return pipe()


@case("DALI docs/examples/general/reshape.ipynb")
def reshape_example(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, arrays(), lambda fn, types, x: (
        fn.reshape(x, shape=[-1]), fn.reshape(x, rel_shape=[2, 0.5]), fn.reshape(x, shape=[2, -1], layout="AB"),
        fn.reinterpret(x, dtype=types.INT32)))


@case("DALI docs/examples/general/reshape.ipynb (src_dims)")
def reshape_src_dims(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, [a[None] for a in arrays()], lambda fn, types, x: (
        fn.reshape(x, src_dims=[2, 1], layout="WH"), fn.reshape(x, src_dims=[1, 2, -1], layout="HWC")),
        layout="FHW")


@case("DALI docs/examples/general/slice.ipynb (relative and absolute windows)")
def slice_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.slice(images, rel_start=[0.1, 0.2], rel_shape=[0.5, 0.5], axis_names="HW"),
        fn.slice(images, start=[5, 3], end=[30, 40], axes=[0, 1]),
        fn.slice(images, rel_start=[0.5], rel_end=[1.0], axis_names="W")))


@case("DALI docs/examples/general/slice.ipynb (anchor/shape inputs, out_of_bounds_policy='pad')")
def slice_inputs_pad(lib: Lib, data: SuiteData) -> Pipe:
    anchors = [np.array([-5, 10], np.int32), np.array([20, 40], np.int32)] * 2
    shapes = [np.array([30, 30], np.int32), np.array([50, 50], np.int32)] * 2

    def body(fn, types, images):
        anchor = fn.external_source(source=batch_source(anchors), batch=True)
        shape = fn.external_source(source=batch_source(shapes), batch=True)
        return (fn.slice(images, anchor, shape, out_of_bounds_policy="pad", fill_values=[255, 0, 0],
                         axis_names="HW"),
                fn.slice(images, anchor, shape, out_of_bounds_policy="trim_to_shape", axes=[0, 1]))

    return image_pipeline(lib, data, body)


@case(OPTEST + "test_cat.py / test_stack.py")
def cat_stack(lib: Lib, data: SuiteData) -> Pipe:
    a = arrays(1)
    b = [x * 2 for x in a]
    fn = lib.fn

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=batch_source(a), batch=True, layout="HW")
        y = fn.external_source(source=batch_source(b), batch=True, layout="HW")
        return fn.cat(x, y, axis=0), fn.cat(x, y, axis_name="W"), fn.stack(x, y), fn.stack(x, y, axis=2,
                                                                                             axis_name="C")

    return pipe()


@case(OPTEST + "test_expand_dims.py / test_squeeze.py")
def expand_dims_squeeze(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, arrays(2), lambda fn, types, x: (
        fn.expand_dims(x, axes=[0, 2], new_axis_names="FC"),
        fn.squeeze(fn.expand_dims(x, axes=[1]), axes=[1]),
        fn.squeeze(fn.reshape(x, src_dims=[0, 1, -1], layout="HWC"), axis_names="C")), layout="HW")


@case(OPTEST + "test_shapes.py / test_cast.py")
def shapes_and_cast(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, arrays(3), lambda fn, types, x: (
        fn.shapes(x), fn.shapes(x, dtype=types.INT32), fn.cast(x * 10, dtype=types.INT16),
        fn.cast(x, dtype=types.UINT8), fn.cast_like(x * 3, fn.cast(x, dtype=types.INT8))))


@case("DALI docs/examples/sequence_processing (element_extract of frames)")
def element_extract_frames(lib: Lib, data: SuiteData) -> Pipe:
    rng = np.random.default_rng(4)
    sequences = [rng.integers(0, 255, (4, 8, 10, 3), dtype=np.uint8) for _ in range(2)]
    return tensor_pipeline(lib, sequences, lambda fn, types, x: tuple(fn.element_extract(x, element_map=[0, 2])),
                           layout="FHWC")


@case(OPTEST + "test_one_hot.py")
def one_hot_example(lib: Lib, data: SuiteData) -> Pipe:
    labels = [np.array([i % 5], np.int32) for i in range(4)]
    multi = [np.array([0, 3, 1], np.int64), np.array([4, 2, 2], np.int64)] * 2
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        lb = fn.external_source(source=batch_source(labels), batch=True)
        ml = fn.external_source(source=batch_source(multi), batch=True)
        return (fn.one_hot(lb, num_classes=5), fn.one_hot(ml, num_classes=5, axis=0, dtype=types.INT32),
                fn.one_hot(ml, num_classes=6, on_value=2.0, off_value=-1.0))

    return pipe()


@case(OPTEST + "test_constant_ops.py (zeros, ones, full and their _like)")
def constant_creation(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, x):
        fill = types.Constant(np.array([1.5, 2.5], np.float32))
        return (fn.zeros(shape=[2, 3], dtype=types.INT32), fn.ones(shape=[4], dtype=types.FLOAT),
                fn.full(fill, shape=[3, 2]), fn.zeros_like(x), fn.ones_like(x), fn.full_like(x, fill))

    return tensor_pipeline(lib, [a[:, :2] for a in arrays(4)], body)


@case(OPTEST + "test_constant.py (types.Constant and fn.constant)")
def constants_in_graph(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, x):
        return (x + types.Constant(np.array([1, 2, 3, 4, 5, 6], np.float32)),
                fn.constant(fdata=[1.0, 2.0, 3.0, 4.0], shape=[2, 2]), fn.constant(idata=[7, 8, 9]),
                x * types.Constant(2.0, dtype=types.FLOAT))

    return tensor_pipeline(lib, arrays(5), body)


@case(OPTEST + "test_permute_batch.py")
def permute_batch_example(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, arrays(6, count=4), lambda fn, types, x: (
        fn.permute_batch(x, indices=[3, 2, 2, 0]), x))


@case(OPTEST + "test_transpose.py")
def transpose_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.transpose(images, perm=[2, 0, 1]), fn.transpose(images, perm=[1, 0, 2], transpose_layout=False),
        fn.transpose(images, perm=[2, 0, 1], output_layout="CYX")))


@case(OPTEST + "test_pad.py (to the batch's largest extent)")
def pad_to_batch_max(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, arrays(7), lambda fn, types, x: (
        fn.pad(x, fill_value=-1.0), fn.pad(x, axes=[0], shape=[10]), fn.copy(x)), layout="HW")


@case("DALI dali/test/python/operator_1/test_get_property.py (source_info of readers.file, layout)")
def get_property_source_info(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        return fn.get_property(jpegs, key="source_info"), fn.get_property(fn.decoders.image(jpegs), key="layout")

    return pipe()


@case(OPTEST + "test_tensor_resize.py", atol=1)
def tensor_resize_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.tensor_resize(images, sizes=[20, 30], axes=[0, 1]), fn.tensor_resize(images, scales=[0.5], axes=[1])))


@case("DALI docs/indexing.rst (Indexing and Slicing of DataNodes)")
def datanode_indexing(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        images[5:25, 10:-5], images[:, :, 1], images[-1], images[2:30:3, ::2]))


@case("DALI docs/pipeline.rst (DataNode.shape() and DataNode.source_info(), which replace the deprecated fn.shapes)")
def datanode_shape_methods(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs)
        return images.shape(), jpegs.source_info(), images.shape(dtype=lib.types.INT32)

    return pipe()
