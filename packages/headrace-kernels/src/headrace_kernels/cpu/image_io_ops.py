"""CPU kernel of dump_image: every image of the batch written as a plain-text PPM file, byte for byte as DALI
writes it, and passed on unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from headrace_kernels.registry import SampleFailureError, cpu_kernel

_VALUES = [f"{v} ".encode() for v in range(256)]  # each value as DALI's text stream writes it: decimal, a space


def ppm_name(index: int, suffix: str) -> str:
    """The file DALI writes sample `index` of a batch to: '<index>-<suffix>-0.ppm' (the 0 is DALI's fixed tag)."""
    return f"{index}-{suffix}-0.ppm"


def ppm_bytes(image: np.ndarray) -> bytes:
    """A uint8 HWC image (1 or 3 channels) as DALI's PPM text: a P2 (grey) or P3 header 'P3\\n<w> <h>\\n255\\n',
    then one line per image row, every value followed by a space; ValueError for any other image."""
    if image.ndim != 3:
        raise ValueError(f"dump_image: images must have three dimensions (HWC), got shape {image.shape}")
    h, w, c = image.shape
    if c not in (1, 3):
        raise ValueError(f"dump_image: only 3-channel and grey (1-channel) images are written, got {c} channels "
                         f"(shape {image.shape})")
    if image.dtype != np.uint8:
        raise ValueError(f"dump_image: images must be uint8, got {image.dtype}")
    if image.size == 0:
        raise ValueError(f"dump_image: the image is empty (shape {image.shape})")
    lookup = _VALUES.__getitem__
    rows = [b"".join(map(lookup, row)) + b"\n" for row in image.reshape(h, w * c).tolist()]
    return b"".join([f"P{3 if c == 3 else 2}\n{w} {h}\n255\n".encode(), *rows])


def dump_images(images: Sequence[np.ndarray], suffix: str, directory: str | Path = ".") -> None:
    """Write every image to `directory`/ppm_name(i, suffix) (CPU and GPU kernels); a SampleFailureError names the
    sample that cannot be written."""
    for index, image in enumerate(images):
        path = Path(directory) / ppm_name(index, suffix)
        try:
            data = ppm_bytes(np.asarray(image))
            path.write_bytes(data)
        except ValueError as exc:
            raise SampleFailureError(index, str(exc)) from None
        except OSError as exc:
            raise SampleFailureError(index, f"dump_image: cannot write {str(path)!r}: {exc.strerror or exc}") \
                from None


@cpu_kernel("dump_image")
def dump_image(batch_inputs, batch_args, contexts):
    """Whole batch (the samples of the node's branch): write sample i to '<i>-<suffix>-0.ppm', return the input."""
    samples = [inputs[0] for inputs in batch_inputs]
    if samples:
        dump_images([np.asarray(s) for s in samples], batch_args[0]["suffix"])
    return samples
