"""DALI's pipeline checkpointing example (docs/examples/advanced/pipeline_checkpointing.ipynb and
docs/advanced_topics_checkpointing.rst): a shuffled reader and a random rotation, a checkpoint after two warm-up
iterations, and a fresh pipeline restored from it, which must produce what the first one goes on to produce."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect

SOURCE = "DALI docs/examples/advanced/pipeline_checkpointing.ipynb"
OUTPUTS = 3


class Resumed:
    """Runs the original pipeline past a checkpoint and a pipeline restored from it, side by side: each run gives the
    original's outputs followed by the restored one's (so the check can compare them)."""

    def __init__(self, make: Callable):
        self.make = make

    def build(self) -> None:
        self.original = self.make(None)
        self.original.build()
        for _ in range(2):
            self.original.run()
        self.restored = self.make(self.original.checkpoint())
        self.restored.build()

    def run(self) -> tuple:
        return (*self.original.run(), *self.restored.run())

    def close(self) -> None:
        for pipe in (self.original, self.restored):
            if hasattr(pipe, "close"):  # headrace's pipelines hold threads; DALI's have no close()
                pipe.close()


def _resumed_check(outputs) -> None:
    for it in outputs:
        for k in range(OUTPUTS):
            original, restored = it[k][0], it[OUTPUTS + k][0]
            expect(all(np.array_equal(a, b) for a, b in zip(original, restored, strict=True)),
                   f"output {k}: the restored pipeline continues where the checkpoint was taken")
    angles = [float(a) for it in outputs for a in it[2][0]]
    expect(all(-30 <= a <= 30 for a in angles) and len(set(angles)) > 1, "angles drawn from (-30, 30)")


@case(SOURCE, random=True, same_shapes=False, check=_resumed_check, iterations=2)
def checkpoint_restore(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=12, enable_checkpointing=True)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=data.images, random_shuffle=True, initial_fill=8, name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        angles = fn.random.uniform(range=(-30.0, 30.0))
        rotated = fn.rotate(images, angle=angles, fill_value=0)
        return rotated, labels, angles

    return Resumed(lambda checkpoint: pipeline(checkpoint=checkpoint))
