"""DALI's conditional execution example (docs/examples/general/conditionals.ipynb): `if` on DataNodes with
enable_conditionals=True, nested branches, `and`/`or`/`not`, and a random predicate as in the notebook."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of
from dali_suite.tensors import arrays

SOURCE = "DALI docs/examples/general/conditionals.ipynb"


@case(SOURCE + " (predicate computed from the data)", atol=1e-6)
def conditional_if_else(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    samples = arrays(20, count=4)

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: samples, batch=True)
        if fn.reductions.mean(x) > 0:
            out = x * 2
        else:
            out = -x
        return out

    return pipe()


@case(SOURCE + " (nested branches, and/or/not)", atol=1e-6)
def conditional_nested_logic(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    samples = arrays(21, count=4)

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: samples, batch=True)
        m = fn.reductions.mean(x)
        s = fn.reductions.std_dev(x, m)
        if m > 0 and s > 0.9:
            out = x + 10
        elif not (m > 0) or s < 0.5:
            if s > 1.0:
                out = x - 10
            else:
                out = x * 0
        else:
            out = x
        return out, m

    return pipe()


def _coin_branch_check(outputs) -> None:
    for image, flip, original in zip(samples_of(outputs, 0), samples_of(outputs, 1), samples_of(outputs, 2),
                                     strict=True):
        expect(flip.dtype == np.bool_ or flip.dtype == np.int32, "the predicate")
        if flip:
            expect(np.array_equal(image, original[:, ::-1]), "flipped where the coin says so")
        else:
            expect(np.array_equal(image, original), "untouched otherwise")


@case(SOURCE + " (random predicate: flip where a coin says so)", random=True, check=_coin_branch_check, iterations=2)
def conditional_random_flip(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=5, enable_conditionals=True)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        do_flip = fn.random.coin_flip(dtype=types.BOOL)
        if do_flip:
            out = fn.flip(images, horizontal=1)
        else:
            out = images
        return out, do_flip, images

    return pipe()
