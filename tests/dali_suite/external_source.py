"""DALI's external source examples (docs/examples/general/data_loading/external_input.ipynb,
parallel_external_source.ipynb) and python_function (docs/examples/custom_operations/python_operator.ipynb)."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case

SOURCE = "DALI docs/examples/general/data_loading/external_input.ipynb"


class ExternalInputIterator:
    """The notebook's iterator: yields (encoded JPEG batch, label batch), cycling through the files."""

    def __init__(self, jpegs: list[np.ndarray], batch_size: int):
        self.jpegs, self.batch_size = jpegs, batch_size

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        batch, labels = [], []
        for _ in range(self.batch_size):
            k = self.i % len(self.jpegs)
            batch.append(self.jpegs[k])
            labels.append(np.array([k], np.uint8))
            self.i += 1
        return batch, labels


@case(SOURCE + " (iterator with num_outputs=2)", iterations=2)
def external_iterator_two_outputs(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    eii = ExternalInputIterator(data.jpegs, 3)

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.external_source(source=eii, num_outputs=2, dtype=types.UINT8)
        decode = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        return decode, labels

    return pipe()


@case(SOURCE + " (per-sample callable taking SampleInfo, batch=False)", iterations=2)
def external_per_sample_callable(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    def sample(info):
        return np.full((2, 3), info.idx_in_epoch * 10 + info.idx_in_batch, np.int32) + info.iteration

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=sample, batch=False, dtype=types.INT32, layout="AB")

    return pipe()


@case(SOURCE + " (batch callable taking BatchInfo via batch_info=True)", iterations=2)
def external_batch_info(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    def batch(info):
        return [np.array([info.iteration, info.epoch_idx, k], np.int64) for k in range(3)]

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=batch, batch=True, batch_info=True)

    return pipe()


@case(SOURCE + " (generator function, cycle='quiet')", iterations=3)
def external_generator_cycle(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    def gen():
        for k in range(2):
            yield [np.arange(k, k + 4, dtype=np.float32) * (j + 1) for j in range(2)]

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=gen, cycle="quiet")

    return pipe()


@case(SOURCE + " (positional source, a list of batches, cycle=True)", iterations=3)
def external_positional_list(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    batches = [[np.array([i, j], np.int16) for j in range(2)] for i in range(2)]

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(batches, cycle=True)

    return pipe()


def _sample_from_epoch(info):
    """A module-level per-sample source (picklable, for the parallel external source's workers)."""
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration], np.int32)


@case("DALI docs/examples/general/data_loading/parallel_external_source.ipynb (parallel=True, py_num_workers=2)",
      iterations=2)
def external_parallel(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2, py_start_method="spawn")
    def pipe():
        return fn.external_source(source=_sample_from_epoch, parallel=True, batch=False)

    return pipe()


def _batch_from_info(info):
    """A module-level batch source taking BatchInfo (picklable, for the parallel external source's workers)."""
    return [np.array([info.iteration, info.epoch_idx, k], np.int64) for k in range(4)]


@case("DALI docs/examples/general/data_loading/parallel_external_source.ipynb (batch=True, batch_info=True)",
      iterations=2)
def external_parallel_batches(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2, py_start_method="spawn")
    def pipe():
        return fn.external_source(source=_batch_from_info, parallel=True, batch=True, batch_info=True)

    return pipe()


@case("DALI docs/examples/custom_operations/python_operator.ipynb", atol=1e-6)
def python_function_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    def edges(image):
        gray = image.astype(np.float32).mean(axis=2)
        return np.abs(np.diff(gray, axis=1))

    def two_outputs(image):
        return image[::2, ::2], np.array(image.shape, np.int64)

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        small, shape = fn.python_function(images, function=two_outputs, num_outputs=2)
        return fn.python_function(images, function=edges), small, shape

    return pipe()


def _invert_sample(out0, in0):
    out0[:] = 255 - in0[:]


def _swap_hw_setup(outs, ins):
    for i in range(len(outs[0])):
        outs[0][i][0] = ins[0][i][1]
        outs[0][i][1] = ins[0][i][0]
        outs[0][i][2] = ins[0][i][2]


def _swap_hw(out0, in0):
    for y in range(out0.shape[0]):
        for x in range(out0.shape[1]):
            out0[y, x] = in0[x, y]


@case("DALI docs/examples/custom_operations/numba_function.ipynb")
def numba_function_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        inverted = lib.numba_function(images, run_fn=_invert_sample, out_types=[types.UINT8],
                                      in_types=[types.UINT8], outs_ndim=[3], ins_ndim=[3])
        swapped = lib.numba_function(images, run_fn=_swap_hw, setup_fn=_swap_hw_setup, out_types=[types.UINT8],
                                     in_types=[types.UINT8], outs_ndim=[3], ins_ndim=[3])
        return inverted, swapped

    return pipe()


@case("DALI docs/examples/custom_operations/python_operator.ipynb (dl_tensor_python_function with torch)", atol=1e-6)
def dl_tensor_python_function_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    def mean_channels(dlpacks):
        import torch.utils.dlpack as torch_dlpack

        tensors = [torch_dlpack.from_dlpack(t) for t in dlpacks]
        return [torch_dlpack.to_dlpack(t.float().mean(dim=2).contiguous()) for t in tensors]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        return fn.dl_tensor_python_function(images, function=mean_channels, batch_processing=True)

    return pipe()
