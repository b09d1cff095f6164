"""Fixed units of work, timed alike inside a Triton Python-backend stub (triton_stub_probe/model.py) and in a plain
process (triton_stub_probe.py): which kind of work runs slower in the stub."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from offline_timing import run_waited

UNITS = ("python", "numpy", "gpu", "pipeline")


def python_unit() -> None:
    """Interpreter work only: dict and attribute traffic like an executor's."""
    table: dict[int, int] = {}
    for i in range(3000):
        table[i & 63] = table.get(i & 63, 0) + i


def numpy_unit() -> None:
    """Many small calls into a C extension, like planning a batch of one."""
    a = np.arange(16, dtype=np.int64)
    for _ in range(100):
        b = np.concatenate([[0], np.cumsum(a)])
        a = (b[1:] - b[:-1]).astype(np.int64)


class Units:
    """The units for one device: `pipeline_file` (the served preprocess pipeline) runs on one JPEG and is waited for;
    the GPU unit launches one tiny kernel and waits (None where there is no GPU)."""

    def __init__(self, pipeline_file: str | Path, device_id: int | None, order: tuple[str, ...] = UNITS):
        from headrace.pipeline import Pipeline

        self.order = order

        self.pipe = Pipeline.load(pipeline_file, device_id=device_id)
        self.cupy = None
        if device_id is not None:
            import cupy

            self.cupy = cupy
            self.device = cupy.cuda.Device(device_id)
            with self.device:
                self.scratch = cupy.zeros(1, cupy.float32)
                self.stream = cupy.cuda.Stream(non_blocking=True)

    def gpu_unit(self) -> None:
        with self.device, self.stream:
            self.scratch += 1
            self.stream.synchronize()

    def run(self, jpeg: np.ndarray) -> np.ndarray:
        """Seconds each unit took, in UNITS order (NaN for a unit left out of `order`, and for the GPU unit without
        a GPU); the units run in `order`, so that what runs first after the idle time can be chosen."""
        units = {"python": python_unit, "numpy": numpy_unit, "gpu": self.gpu_unit if self.cupy is not None else None,
                 "pipeline": lambda: run_waited(self.pipe, images=[jpeg])}
        times = np.full(len(UNITS), np.nan)
        for unit in self.order:
            if units[unit] is None:
                continue
            start = time.perf_counter()
            units[unit]()
            times[UNITS.index(unit)] = time.perf_counter() - start
        return times

    def close(self) -> None:
        self.pipe.close()
