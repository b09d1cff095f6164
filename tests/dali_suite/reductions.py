"""DALI's reductions example (docs/examples/general/reductions.ipynb): every reduction over all axes, selected
axes, axis names, keep_dims, std_dev/variance with their mean input, and an output dtype."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case
from dali_suite.tensors import tensor_pipeline

SOURCE = "DALI docs/examples/general/reductions.ipynb"


def _data() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [rng.uniform(0, 10, (3 + i, 4, 2)).astype(np.float32) for i in range(3)]


@case(SOURCE + " (all axes)", atol=1e-4, rtol=1e-5)
def reductions_all_axes(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, _data(), lambda fn, types, x: (
        fn.reductions.sum(x), fn.reductions.min(x), fn.reductions.max(x), fn.reductions.mean(x),
        fn.reductions.mean_square(x), fn.reductions.rms(x)))


@case(SOURCE + " (axes, axis_names, keep_dims)", atol=1e-4, rtol=1e-5)
def reductions_axes(lib: Lib, data: SuiteData) -> Pipe:
    return tensor_pipeline(lib, _data(), lambda fn, types, x: (
        fn.reductions.sum(x, axes=0), fn.reductions.max(x, axes=[0, 2]), fn.reductions.mean(x, axis_names="W",
                                                                                             keep_dims=True),
        fn.reductions.min(x, axis_names="HC"), fn.reductions.rms(x, axes=[1], keep_dims=True)), layout="HWC")


@case(SOURCE + " (std_dev and variance with a mean input, ddof)", atol=1e-4, rtol=1e-5)
def reductions_std_variance(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, x):
        mean = fn.reductions.mean(x, axes=[0, 1], keep_dims=True)
        return (fn.reductions.std_dev(x, mean, axes=[0, 1]), fn.reductions.variance(x, mean, axes=[0, 1], ddof=1),
                fn.reductions.std_dev(x, fn.reductions.mean(x)))

    return tensor_pipeline(lib, _data(), body)


@case(SOURCE + " (integer input, dtype of the sum)")
def reductions_integer_sum(lib: Lib, data: SuiteData) -> Pipe:
    rng = np.random.default_rng(12)
    ints = [rng.integers(0, 255, (6, 5)).astype(np.uint8) for _ in range(3)]
    return tensor_pipeline(lib, ints, lambda fn, types, x: (
        fn.reductions.sum(x), fn.reductions.sum(x, dtype=types.UINT64, axes=1), fn.reductions.max(x, axes=0),
        fn.reductions.sum(x, dtype=types.UINT8)))
