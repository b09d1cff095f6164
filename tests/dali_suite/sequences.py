"""DALI's sequence processing examples (docs/examples/sequence_processing/: per-frame arguments, sequence_rearrange,
and image ops applied to every frame of an FHWC sequence)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case

SOURCE = "DALI docs/examples/sequence_processing/"


def sequences() -> list[np.ndarray]:
    rng = np.random.default_rng(30)
    return [rng.integers(0, 256, (4, 16 + 2 * i, 20, 3), dtype=np.uint8) for i in range(2)]


def sequence_pipeline(lib: Lib, body: Callable) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=4)
    def pipe():
        seq = fn.external_source(source=batch_source(sequences()), batch=True, layout="FHWC")
        return body(lib, seq)

    return pipe()


@case(SOURCE + "sequence_processing.ipynb (frame-wise flip, crop, resize)", atol=1)
def sequence_image_ops(lib: Lib, data: SuiteData) -> Pipe:
    return sequence_pipeline(lib, lambda lib, seq: (
        lib.fn.flip(seq, horizontal=1), lib.fn.crop(seq, crop=(10, 12)), lib.fn.resize(seq, resize_x=10, resize_y=8)))


@case(SOURCE + "per_frame_arguments.ipynb (fn.per_frame angles for rotate)", atol=1)
def sequence_per_frame_rotate(lib: Lib, data: SuiteData) -> Pipe:
    angles = [np.array([0.0, 10.0, 20.0, 30.0], np.float32)] * 2

    def body(lib, seq):
        angle = lib.fn.external_source(source=batch_source(angles), batch=True)
        return lib.fn.rotate(seq, angle=lib.fn.per_frame(angle), keep_size=True, fill_value=0)

    return sequence_pipeline(lib, body)


@case(SOURCE + "sequence_rearrange.ipynb")
def sequence_rearrange_example(lib: Lib, data: SuiteData) -> Pipe:
    return sequence_pipeline(lib, lambda lib, seq: (lib.fn.sequence_rearrange(seq, new_order=[3, 2, 1, 0]),
                                                    lib.fn.sequence_rearrange(seq, new_order=[0, 0, 2])))
