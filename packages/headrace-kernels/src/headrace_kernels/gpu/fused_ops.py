"""The fused resize + crop_mirror_normalize: a resize read by a crop_mirror_normalize alone runs as one pass from the
source image to the normalized output (kernels/image.cu), with its launch planned ahead on a decoder's records."""

from __future__ import annotations

from headrace_kernels.gpu.image_ops import (
    adopt_inputs,
    launch_plan,
    normalizes_per_sample,
    place,
    plan_crop_mirror_normalize,
)
from headrace_kernels.gpu.plan_cache import FusedPlanCache
from headrace_kernels.registry import gpu_kernel


@gpu_kernel(fuses=("resize", "crop_mirror_normalize"))
class FusedResizeNormalize:
    """resize feeding crop_mirror_normalize: one pass from the source image to the normalized output. Fed by a
    decoder, it plans its records and tap tables ahead (on the decoder's output records), so that after the
    decode only the launch is left; where every sample has the same arguments, plans are kept per image size."""

    def __init__(self, setup):
        self.cache = None
        if not setup.per_sample_args and setup.options.plan_cache:
            self.cache = FusedPlanCache(setup.parts[1], setup.parts[0])

    @staticmethod
    def _plan(batch, images: list, packed: tuple | None = None):
        return plan_crop_mirror_normalize(images, batch.sample_args(1), normalizes_per_sample(batch),
                                          batch.sample_args(0), packed)

    def plan(self, batch):
        """The launch plan on the records of the decoder feeding it (tap tables already on the device), or None
        where there are none yet."""
        prepared = batch.prepared(0)
        images = getattr(prepared, "images", None)
        if images is None:
            return None
        plan = None if self.cache is None else self.cache.plan(images, prepared.addresses, prepared.shapes)
        if plan is None:
            plan = self._plan(batch, images, (prepared.addresses, prepared.shapes))
        place(*plan)  # outputs, records and tables too: after the decode only the launch is left
        return plan

    def run(self, batch):
        images = batch.samples(raw=True)
        plan = batch.planned
        if plan is None or not adopt_inputs(plan, images):
            plan = self._plan(batch, images)
        return launch_plan(plan)

    def release(self) -> None:
        if self.cache is not None:
            self.cache.clear()

