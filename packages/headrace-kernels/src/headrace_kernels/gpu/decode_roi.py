"""`device="mixed"` decoders.image_crop and decoders.image_slice: the mixed decoder of gpu/decode.py with each
sample's window chosen by the CPU kernels' rules (cpu/decode_roi.py) from its header, its arguments and, for
image_slice, its anchor and shape inputs; only the window is decoded (ROI decode), as on the CPU."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.decode_roi import crop_region, slice_region, slice_regions
from headrace_kernels.gpu.decode import MixedDecodeKernel, sample_list
from headrace_kernels.registry import gpu_kernel


def _host(value) -> list | None:
    """A CPU input's samples as numpy arrays (a GPU one copied back), or None. The rows of one array (a Column with
    `dense`) stay as they are: slice_regions reads that array whole."""
    if value is None:
        return None
    if hasattr(value, "as_cpu"):
        value = value.as_cpu()
    if getattr(value, "dense", None) is not None:
        return value
    return [np.asarray(v) for v in value]


@gpu_kernel("decoders.image_crop", "decoders.image_slice")
class MixedRoiDecodeKernel(MixedDecodeKernel):
    """The mixed ROI decoders: headers, windows and sub code streams in `prepare` (the CPU stage), then the decode of
    the windows alone on the pipeline's stream."""

    def __init__(self, setup):
        super().__init__(setup)
        self.op = setup.op

    def _region(self, batch):
        """region(i, height, width) -> sample i's window, from its arguments (and anchor / shape inputs)."""
        sample_args = batch.sample_args()
        if self.op == "decoders.image_crop":
            return lambda i, height, width: crop_region(height, width, sample_args[i])
        count = batch.num_inputs()
        if count == 2:
            raise ValueError("decoders.image_slice: give both positional inputs, anchor and shape, or neither")
        anchors = _host(batch.value(1)) if count == 3 else None
        shapes = _host(batch.value(2)) if count == 3 else None
        if anchors is None:
            return lambda i, height, width: slice_region(height, width, sample_args[i])

        def region(i: int, height: int, width: int):
            return slice_region(height, width, sample_args[i], anchors[i], shapes[i])

        if all(args is sample_args[0] for args in sample_args):  # the batch's windows in one pass where it can
            region.batch = lambda heights, widths: slice_regions(heights, widths, sample_args[0], anchors, shapes)
        return region

    def prepare(self, batch):
        encoded = batch.value(0)
        if hasattr(encoded, "as_cpu"):  # it came out of the GPU stage
            encoded = encoded.as_cpu()
        prepared = self.decoder.prepare(sample_list(encoded), self.seed, batch.first_sample,
                                        region=self._region(batch))
        with batch.active():  # the outputs' memory and records now: the next steps can plan on them
            self.decoder.allocate(prepared, batch.stream)
        return prepared
