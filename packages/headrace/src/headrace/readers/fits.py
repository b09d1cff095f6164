"""`experimental.readers.fits`: the image HDUs of FITS files, read with astropy.io.fits (the 'fits' extra).

DALI reads them with CFITSIO; astropy gives the same arrays: the HDUs counted as CFITSIO counts them (a tile-compressed
image, stored as a binary table, is one HDU, decompressed on reading), the data in C order (numpy's shape, NAXISn
first), of the type BITPIX with BZERO/BSCALE makes (unsigned for the standard zero offsets, floating for a real
scale). Outputs are native-endian and contiguous. On device='gpu' the arrays are read on the host and the executor
uploads them (DALI's GPU reader decompresses RICE tiles on the GPU; the arrays are the same). Listing, shards,
shuffling and checkpoints are readers.numpy's (IndexedReader)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.ops.sequence_readers import FITS_TYPES
from headrace.readers.file import MAX_SAMPLE_BYTES
from headrace.readers.numpy_files import IndexedReader, file_names
from headrace.schema import short_repr
from headrace_kernels.bounded_io import reason
from headrace_kernels.registry import reader

OP = "experimental.readers.fits"
MAX_FILE_LIST_BYTES = 1 << 30
"""The largest file list read (1 GiB); a larger one, or anything but a regular file, is refused."""
ASTROPY_MISSING = ("experimental.readers.fits reads FITS files with astropy, which is not installed: "
                   "pip install 'headrace[fits]' (or astropy)")


def astropy_fits() -> Any:
    """astropy.io.fits, or an ImportError saying how to install it."""
    try:
        from astropy.io import fits
    except ImportError:
        raise ImportError(ASTROPY_MISSING) from None
    return fits


def file_paths(args: dict, node: str) -> list[str]:
    """The files' paths, from file_list, files or file_root's listing (relative names taken from file_root)."""
    if args.get("file_list") and args.get("files"):
        raise SchemaError(f"{OP} (node '{node}'): file_list and files are mutually exclusive")
    return file_names(args, node, OP)[0]


def read_hdus(fits: Any, path: str, hdu_indices: list[int]) -> list[np.ndarray]:
    """The image of each HDU of `hdu_indices` (1-based) of the FITS file at `path`, native-endian and contiguous;
    ValueError saying which HDU is missing or not an image."""
    try:
        opened = fits.open(path, memmap=False, lazy_load_hdus=True)
    except OSError as exc:
        raise ValueError(f"not a readable FITS file ({str(exc).split('. If this is')[0]})") from None
    with opened as hdus:
        arrays = []
        for index in hdu_indices:
            try:
                hdu = hdus[index - 1]
            except IndexError:
                raise ValueError(f"has no HDU {index} (hdu_indices {list(hdu_indices)}; the file has {len(hdus)} "
                                 "HDUs, counted from 1)") from None
            if not getattr(hdu, "is_image", False):
                raise ValueError(f"HDU {index} (hdu_indices) is a {type(hdu).__name__}, not an image HDU (only image "
                                 "HDUs are read, as in DALI)")
            if not hdu.header.get("ZNAXIS" if hdu.header.get("ZIMAGE") else "NAXIS", 0):
                raise ValueError(f"HDU {index} (hdu_indices) holds no image (NAXIS 0)")
            size = int(np.prod(hdu.shape, dtype=np.int64)) * abs(int(hdu.header.get("BITPIX", 8))) // 8
            if size > MAX_SAMPLE_BYTES:
                raise ValueError(f"HDU {index} is {size:,} bytes, more than a sample may have ({MAX_SAMPLE_BYTES:,})")
            data = np.asarray(hdu.data)
            arrays.append(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("=")))
        return arrays


@reader(OP)
class FitsReader(IndexedReader):
    """Reads one shard of a set of FITS files (readers.file's epochs and order): one array per HDU index."""

    op = OP

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        self.hdu_indices = [int(i) for i in args["hdu_indices"]]
        dtypes = args.get("dtypes")
        if dtypes is not None and len(dtypes) != len(self.hdu_indices):
            raise SchemaError(f"{OP} (node '{node}'): {len(dtypes)} dtypes for {len(self.hdu_indices)} hdu_indices "
                              "(one type per HDU, as DALI)")
        bad = [d for d in dtypes or [] if d not in FITS_TYPES]
        if bad:
            raise SchemaError(f"{OP} (node '{node}'): dtypes {bad} are not supported; supported types are "
                              f"{', '.join(t.name for t in FITS_TYPES)} (as DALI)")
        self.fits = astropy_fits()
        super().__init__(node, args, file_paths(args, node), batch_size, seed, pool)

    def _error(self, index: int, why: str) -> SampleError:
        path = self.paths[index]
        return SampleError(f"{OP} (node '{self.node}'): file {short_repr(path)} (sample {index} of the data set): "
                           f"{why}", node=self.node, op=OP, sample=index, source=path)

    def read_item(self, index: int) -> tuple[np.ndarray, ...]:
        path = self.paths[index]
        try:
            if not os.path.isfile(path):
                raise ValueError("cannot open it (no such regular file)")
            return tuple(read_hdus(self.fits, path, self.hdu_indices))
        except Exception as exc:  # noqa: BLE001 - astropy raises many kinds (OSError, VerifyError, KeyError, ...)
            raise self._error(index, reason(exc)) from None

    def next_batch(self, iteration: int) -> tuple[list[list], list[str]]:
        """(one list of arrays per HDU index, file per sample); as DALI, the arrays of an output in a batch must share
        their type and number of dimensions."""
        outputs, sources = super().next_batch(iteration)
        for k, arrays in enumerate(outputs):
            first = arrays[0]
            for array, source in zip(arrays, sources, strict=True):
                if array.dtype != first.dtype or array.ndim != first.ndim:
                    raise SampleError(f"{OP} (node '{self.node}'): the arrays of HDU {self.hdu_indices[k]} "
                                      f"(hdu_indices) in a batch must share their type and number of dimensions (as "
                                      f"DALI): {short_repr(sources[0])} is {first.dtype} {first.ndim}-D, "
                                      f"{short_repr(source)} is {array.dtype} {array.ndim}-D", node=self.node, op=OP,
                                      source=source)
        return outputs, sources
