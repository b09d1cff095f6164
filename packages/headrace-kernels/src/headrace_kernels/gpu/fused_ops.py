"""The fused resize + crop_mirror_normalize: a resize read by a crop_mirror_normalize alone runs as one pass from the
source image to the normalized output (kernels/image.cu), with its launch planned ahead on a decoder's records.
The same pass takes a flip before the resize (the source read mirrored) and up to MAX_COLOUR colour ops between
the resize and crop_mirror_normalize (hsv, brightness_contrast, color_twist): DALI's detection and classification
pipelines chain them so, and each op left out of the chain is one fewer step of host work per batch."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import numpy as np

from headrace_kernels.gpu.image_ops import (
    MAX_COLOUR,
    adopt_inputs,
    launch_plan,
    normalizes_per_sample,
    place,
    plan_crop_mirror_normalize,
)
from headrace_kernels.gpu.plan_cache import FusedPlanCache
from headrace_kernels.gpu.plan_process import PlanProcess, adopt, chain_spec
from headrace_kernels.registry import gpu_kernel

COLOUR_OPS = ("hsv", "brightness_contrast", "color_twist")


@dataclasses.dataclass
class PendingPlan:
    """A batch's plan asked of the helper and not collected yet (FusedResizeNormalize.finish_plan collects it). It
    holds the decoded images' records, not the batch: the batch's values hold it, and a cycle would keep a dropped
    batch's device memory until the garbage collector ran."""

    ticket: int
    images: list
    addresses: np.ndarray


def resize_chains() -> Iterator[tuple[str, ...]]:
    """Every chain the fused kernel replaces: [flip] resize [up to MAX_COLOUR colour ops] crop_mirror_normalize."""
    for head in ((), ("flip",)):
        for count in range(MAX_COLOUR + 1):
            for colours in itertools.product(COLOUR_OPS, repeat=count):
                yield (*head, "resize", *colours, "crop_mirror_normalize")


class FusedResizeNormalize:
    """[flip ->] resize [-> colour ops] -> crop_mirror_normalize: one pass from the source image to the normalized
    output. Fed by a decoder, it plans its records and tap tables ahead (on the decoder's output records), so that
    after the decode only the launch is left; where every sample has the same arguments, plans are kept per image
    size."""

    def __init__(self, setup):
        chain = setup.chain or ("resize", "crop_mirror_normalize")
        self.flip = chain[0] == "flip"
        self.resize_part = 1 if self.flip else 0
        self.colour_parts = [(part, op) for part, op in enumerate(chain) if op in COLOUR_OPS]
        self.cache = None
        if not setup.per_sample_args and setup.options.plan_cache:
            parts = setup.parts
            self.cache = FusedPlanCache(parts[-1], parts[self.resize_part],
                                        flip=parts[0] if self.flip else None,
                                        colours=tuple((op, parts[part]) for part, op in self.colour_parts))
        self.parts = setup.parts
        self.helper = None
        """The process that computes the host plans (executor option plan_process), once started."""
        self.defer = False
        """Whether `plan` only asks the helper, and `finish_plan` (the GPU stage) collects and places the plan."""

    def start_plan_process(self, defer: bool = False) -> None:
        """Compute the host plans in a helper process from now on (PlanProcess), where they are not kept per image
        size (the plan cache serves those); `defer`: `plan` does not wait for the helper's answer (executor option
        place_in_gpu_stage)."""
        if self.helper is None and self.cache is None:
            self.helper = PlanProcess.start(chain_spec(self.parts, self.flip, self.resize_part, self.colour_parts))
        self.defer = defer and self.helper is not None

    def _plan(self, batch, images: list, packed: tuple | None = None):
        return plan_crop_mirror_normalize(images, batch.sample_args(-1), normalizes_per_sample(batch),
                                          batch.sample_args(self.resize_part), packed,
                                          batch.sample_args(0) if self.flip else None,
                                          [(op, batch.sample_args(part)) for part, op in self.colour_parts])

    def plan(self, batch):
        """The launch plan on the records of the decoder feeding it (tap tables already on the device), or None
        where there are none yet."""
        prepared = batch.prepared(0)
        images = getattr(prepared, "images", None)
        if images is None:
            return None
        plan = None if self.cache is None else self.cache.plan(images, prepared.addresses, prepared.shapes)
        if plan is None and self.helper is not None:
            ticket = self.helper.submit(prepared.shapes, [batch.arg_columns(part) for part in range(len(self.parts))],
                                        normalizes_per_sample(batch))
            if self.defer and ticket is not None:
                return PendingPlan(ticket, images, prepared.addresses)
            answer = self.helper.answer(ticket)
            plan = None if answer is None else adopt(images, prepared.addresses, answer)
        if plan is None:
            plan = self._plan(batch, images, (prepared.addresses, prepared.shapes))
        if plan[0].placed is None:  # the cache's plans come placed
            place(*plan)  # outputs, records and tables too: after the decode only the launch is left
        return plan

    def finish_plan(self, planned):
        """A plan that `plan` left to the helper (PendingPlan) collected and placed (by the GPU stage, before it
        waits for the decode), or None where the helper gave none (the step's run plans it); any other plan as it
        is."""
        if not isinstance(planned, PendingPlan):
            return planned
        answer = self.helper.answer(planned.ticket)
        if answer is None:
            return None
        plan = adopt(planned.images, planned.addresses, answer)
        place(*plan)
        return plan

    def run(self, batch):
        images = batch.samples(raw=True)
        plan = self.finish_plan(batch.planned)
        if plan is None or not adopt_inputs(plan, images):
            plan = self._plan(batch, images)
        return launch_plan(plan)

    def release(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def close(self) -> None:
        """Stop the plan helper process (the pipeline closes)."""
        if self.helper is not None:
            self.helper.close()


for _chain in resize_chains():
    gpu_kernel(fuses=_chain)(FusedResizeNormalize)
