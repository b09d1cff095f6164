"""Executor options: how a pipeline runs, never what it computes (outputs are the same bits with any of them), so
they are not part of the pipeline file. Set them per pipeline (`executor_options=`) or as Triton model parameters
(`executor.<name>`)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from headrace.errors import SchemaError

LOOKAHEAD_MODES = ("before", "after", "off")
CPU_PROCESS_MODES = ("auto", "on", "off")
DECODER_MEMORY_MODES = ("nvimgcodec", "pool")
CPU_AFFINITY_MODES = ("off", "gpu")
WORD_OPTIONS = {"lookahead": LOOKAHEAD_MODES, "cpu_process": CPU_PROCESS_MODES, "plan_process": CPU_PROCESS_MODES,
                "cpu_affinity": CPU_AFFINITY_MODES,
                "decoder_memory": DECODER_MEMORY_MODES}
"""The options that take one of a few words, and those words."""
COALESCE_IMAGES = 256
"""The images of a coalesced run by default: the batch size from which the GPU stage's per-batch host work no
longer dominates (benchmarks/HISTORY.md, SSD300 by batch size)."""
COALESCE_MAX = 8
"""The most batches a coalesced run takes by default (their device memory is held together)."""


@dataclasses.dataclass(frozen=True)
class ExecutorOptions:
    """Switches of the executor's GPU stage, with the measured defaults (benchmarks/HISTORY.md has the runs)."""

    lookahead: str = "before"
    """When a GPU pipeline computes the next batch's CPU stage: 'before' this batch's GPU steps (overlapping the
    decode), 'after' its last decoder, or 'off' (no overlap). A CPU pipeline reads the next batch while this one's
    ops run unless it is 'off'. Fed pipelines (external_source without `source`) never look ahead."""
    parallel_reads: bool = False
    """Give the readers the thread pool (slow storage); by default they read in the CPU stage's thread, which beats
    the pool's GIL hand-offs on cached files."""
    switch_interval: float = 0.0
    """The interpreter's GIL switch interval (seconds) while a GPU stage exists; 0 keeps the interpreter's."""
    gpu_pool_limit: int = 0
    """A byte limit of the pipeline's device memory pool; 0 for none."""
    plan_cache: bool = True
    """Keep the fused resize + normalize launch records per image size on the device (where every sample has the
    same arguments), and per batch of sizes that recurs its records too, so such a batch only allocates its
    outputs."""
    plan_process: str = "auto"
    """Whether the fused resize + crop_mirror_normalize's host plans (sample records, tap-table axes) are computed
    in a helper process, so that their Python does not hold the interpreter lock the GPU stage's threads need (the
    pipeline's process only places them): 'on', 'off', or 'auto' (the default: on where the GPU stage looks ahead
    and coalesces small batches, as SSD300's, where it measured faster; a fed pipeline's batch would wait for the
    hand-off). Same bits; a batch the helper fails on is planned in the process. True and False mean 'on' and
    'off'."""
    place_in_gpu_stage: bool = False
    """With the plan helper (plan_process): the look-ahead only asks the helper for each batch's plan, and the GPU
    stage collects and places it before it waits for that batch's decode, so that the look-ahead does not wait for
    the helper. Same bits."""
    nvimgcodec_capi: bool = True
    """Decode through nvImageCodec's C API (returns before the decode is done); False uses its Python binding."""
    coalesce_batches: int = 0
    """The GPU stage runs this many consecutive batches as one (each decoded in its own call, so the same bits):
    its per-batch host work is paid once for them all, which small batches gain from (SSD300's 32). 0 (the default)
    takes as many as make a run of COALESCE_IMAGES images, at most COALESCE_MAX (1 for batches of 256 and more).
    Only for pipelines whose sources are readers, with no conditionals, skips, sequences, whole-batch GPU ops or CPU
    ops after a `.cpu()`; elsewhere it is 1."""

    cpu_process: str = "auto"
    """Whether a GPU pipeline's readers and CPU ops run in a worker process of their own (engine.cpu_process), so
    their Python does not compete with the GPU stage's threads for the interpreter lock: 'on', 'off', or 'auto'
    (the default: on where the GPU stage coalesces small batches and runs their CPU ops merged, as SSD300's,
    where it measured faster; benchmarks/HISTORY.md). Same values either way; the worker starts with the pipeline.
    Only for pipelines whose sources are readers into host memory, with nothing skipped, no user code on the CPU
    and no CPU op output returned; elsewhere it is off. True and False mean 'on' and 'off'."""

    cpu_process_ahead: int = 1
    """How many coalesced runs the CPU stage's worker (cpu_process) is asked for beyond the one being answered: it
    computes them while the GPU stage works, and its answers wait in shared memory (one block each)."""

    prefetch_beyond_queue: bool = False
    """Whether the prefetching thread computes the next batch while its queue (prefetch_queue_depth batches) is full,
    to put it there as soon as the consumer takes one: one more batch of overlap, and one more batch's outputs in
    memory. False makes it wait for room first, so at most prefetch_queue_depth batches are computed ahead of the
    consumer (DALI's buffers: its outputs are valid until the next run, so its queue includes the batch read)."""

    decoder_memory: str = "nvimgcodec"
    """Where the mixed decoders' library (nvImageCodec) takes its own device buffers from: its own allocation
    ('nvimgcodec', the default), or a CUDA memory pool of headrace's on its decode streams ('pool', as DALI gives its
    decoders its pool), each buffer rounded up to the node's device_memory_padding. The decoded images are the
    pipeline's in either case."""

    cpu_affinity: str = "off"
    """Where a GPU pipeline's own threads run: wherever the scheduler puts them ('off', the default), or on the CPUs
    of the GPU's NUMA node ('gpu', where the machine lists them), with the threads they start (nvImageCodec's), as
    DALI keeps its decoder threads on the GPU's cores."""

    def runs_cpu_process(self, merged_runs: bool) -> bool:
        """Whether the CPU stage goes to a worker process (where the pipeline allows it): `merged_runs` says that
        the GPU stage coalesces batches and runs their CPU ops merged."""
        return self.cpu_process == "on" or (self.cpu_process == "auto" and merged_runs)

    def runs_plan_process(self, looks_ahead: bool, coalesced: bool) -> bool:
        """Whether the fused chains plan in a helper process: `looks_ahead` and `coalesced` say that the GPU stage
        plans each batch in its look-ahead and coalesces batches."""
        return self.plan_process == "on" or (self.plan_process == "auto" and looks_ahead and coalesced)

    def coalesced(self, batch_size: int) -> int:
        """The batches a coalesced run takes at this batch size (coalesce_batches, or its default)."""
        if self.coalesce_batches:
            return self.coalesce_batches
        return max(1, min(COALESCE_MAX, COALESCE_IMAGES // max(1, batch_size)))

    def __post_init__(self) -> None:
        for name in ("cpu_process", "plan_process"):
            if isinstance(getattr(self, name), bool):
                object.__setattr__(self, name, "on" if getattr(self, name) else "off")
        for name, words in WORD_OPTIONS.items():
            if getattr(self, name) not in words:
                raise SchemaError(f"executor option '{name}': expected one of {list(words)}, "
                                  f"got {getattr(self, name)!r}")
        for name in ("parallel_reads", "plan_cache", "nvimgcodec_capi", "prefetch_beyond_queue", "place_in_gpu_stage"):
            if not isinstance(getattr(self, name), bool):
                raise SchemaError(f"executor option '{name}': expected a bool, got {getattr(self, name)!r}")
        if isinstance(self.switch_interval, bool) or not isinstance(self.switch_interval, int | float) \
                or self.switch_interval < 0:
            raise SchemaError(f"executor option 'switch_interval': expected seconds >= 0, got {self.switch_interval!r}")
        if isinstance(self.coalesce_batches, bool) or not isinstance(self.coalesce_batches, int) \
                or self.coalesce_batches < 0:
            raise SchemaError(f"executor option 'coalesce_batches': expected an int >= 0 (0: by batch size), got "
                              f"{self.coalesce_batches!r}")
        if isinstance(self.cpu_process_ahead, bool) or not isinstance(self.cpu_process_ahead, int) \
                or self.cpu_process_ahead < 1:
            raise SchemaError(f"executor option 'cpu_process_ahead': expected an int >= 1, got "
                              f"{self.cpu_process_ahead!r}")
        if isinstance(self.gpu_pool_limit, bool) or not isinstance(self.gpu_pool_limit, int) or self.gpu_pool_limit < 0:
            raise SchemaError(f"executor option 'gpu_pool_limit': expected bytes >= 0, got {self.gpu_pool_limit!r}")

    @classmethod
    def of(cls, value: ExecutorOptions | Mapping[str, Any] | None) -> ExecutorOptions:
        """Options from an ExecutorOptions, a dict of some of its fields, or None (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise SchemaError(f"executor_options: expected a dict or headrace.ExecutorOptions, got "
                              f"{type(value).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise SchemaError(f"executor_options: unknown option(s) {unknown}; known: {sorted(known)}")
        return cls(**value)

    @classmethod
    def from_strings(cls, values: Mapping[str, str]) -> ExecutorOptions:
        """Options from text values (Triton model parameters, command lines): 'true'/'false', numbers, words."""
        fields = {name: kind.__name__ for name, kind in typing.get_type_hints(cls).items()}
        parsed: dict[str, Any] = {}
        for name, text in values.items():
            kind = fields.get(name)
            text = str(text).strip()
            if kind == "bool":
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise SchemaError(f"executor option '{name}': expected true or false, got {text!r}")
                parsed[name] = text.lower() in ("true", "1", "yes")
            elif kind in ("int", "float"):
                try:
                    parsed[name] = int(text) if kind == "int" else float(text)
                except ValueError:
                    raise SchemaError(f"executor option '{name}': expected a number, got {text!r}") from None
            else:
                parsed[name] = text
        return cls.of(parsed)
