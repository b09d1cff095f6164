"""How Python callables of a pipeline run in worker processes (DALI's `py_num_workers`, `py_start_method`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    """The worker processes of a pipeline's parallel sources: how many, and how they are started."""

    num_workers: int = 1
    start_method: str = "fork"
