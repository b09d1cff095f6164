"""Schemas of two readers of DALI's catalogue that read a sample from several pieces: readers.sequence (frame
sequences from one image file per frame) and experimental.readers.fits (image HDUs of FITS files), with DALI's names,
arguments, defaults and outputs. Epochs, shards, padding, shuffling and checkpoints are readers.file's."""

import numpy as np

from headrace.enums import DALIDataType, DALIImageType
from headrace.schema import (
    FILES_PERMUTED,
    READER_BUFFER_ARGS,
    READER_COMPAT_ARGS,
    REQUIRED,
    SHARD_ARGS,
    Arg,
    Limits,
    OpSchema,
    OutputSpec,
    SpecArgs,
    registrar,
    shuffle_args,
)

register = registrar(__name__)

_SEED = Arg("seed", "int", -1, "Seed of random_shuffle; -1 derives it from the pipeline seed.")
SEQUENCE_IMAGE_TYPES = (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY, DALIImageType.ANY_DATA)
"""The colour spaces readers.sequence decodes frames to (DALI's: YCbCr is refused)."""
FITS_TYPES = (DALIDataType.UINT8, DALIDataType.UINT16, DALIDataType.UINT32, DALIDataType.UINT64, DALIDataType.INT8,
              DALIDataType.INT16, DALIDataType.INT32, DALIDataType.INT64, DALIDataType.FLOAT16, DALIDataType.FLOAT,
              DALIDataType.FLOAT64)
"""The element types experimental.readers.fits accepts in `dtypes` (DALI's)."""


# readers.sequence

def _sequence(a: SpecArgs) -> list[OutputSpec]:
    """One FHWC uint8 sequence of `sequence_length` decoded frames (C: 1 for GRAY, else 3)."""
    image_type = a.literal("image_type")
    channels = None if image_type is None else (1 if int(image_type) == int(DALIImageType.GRAY) else 3)
    return [OutputSpec(np.uint8, "FHWC", (a.args["sequence_length"], -1, -1, channels if channels else -1),
                       "frame sequence")]


register(OpSchema(
    name="readers.sequence",
    doc="Reads frame sequences from a folder of streams: each sub-folder of file_root is one stream, one image file "
        "per frame, the frames in the byte order of their paths (as DALI's glob of file_root/*/*; names starting with "
        "'.' and sub-sub-folders are left out). A stream of n frames gives the sequences starting at frames 0, step, "
        "2*step, ... whose last frame, (sequence_length - 1) * stride further, is still in the stream: sequences never "
        "cross a stream's end and are never padded, so a stream shorter than one sequence gives none. Each sequence "
        "is decoded on the CPU into one (F, H, W, C) uint8 tensor; its frames must share their shape.",
    args=(
        Arg("file_root", "str", REQUIRED, "The folder of the streams (one sub-folder per stream)."),
        Arg("sequence_length", "int", REQUIRED, "The number of frames of each sequence.", limits=Limits(1, 2**31 - 1)),
        Arg("step", "int", 1, "The distance between the first frames of consecutive sequences of a stream.",
            limits=Limits(1, 2**31 - 1)),
        Arg("stride", "int", 1, "The distance between consecutive frames of a sequence.", limits=Limits(1, 2**31 - 1)),
        Arg("image_type", "image_type", DALIImageType.RGB, "The colour space the frames are decoded to: RGB, BGR, "
            "GRAY or ANY_DATA (as DALI: YCbCr is refused).", choices=SEQUENCE_IMAGE_TYPES),
        *shuffle_args(FILES_PERMUTED.replace("files", "sequences")),
        _SEED,
        *SHARD_ARGS,
        *READER_COMPAT_ARGS,
        *READER_BUFFER_ARGS,
    ),
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_sequence,
))


# experimental.readers.fits

def _fits_outputs(args: dict) -> int:
    """One output per entry of hdu_indices."""
    return len(args.get("hdu_indices") or [2])


def _fits(a: SpecArgs) -> list[OutputSpec]:
    """One array per HDU of hdu_indices: the image's data, of the type its header gives (BITPIX, BZERO, BSCALE)."""
    return [OutputSpec(None, None, None, f"image of HDU {index}") for index in a.args["hdu_indices"]]


register(OpSchema(
    name="experimental.readers.fits",
    doc="Reads the image HDUs of FITS files (file_root + file_filter, a file_list, or files): one output per entry of "
        "hdu_indices (1-based, as CFITSIO counts: 1 is the primary HDU, so the default [2] is the first extension), "
        "each the HDU's image in C order (NAXISn ... NAXIS1, numpy's shape of it), of the type its header says "
        "(BITPIX with BZERO/BSCALE, as CFITSIO's equivalent type: BITPIX 16 with BZERO 32768 is uint16). "
        "Tile-compressed images (RICE, GZIP, ...) are decompressed. Files are listed as readers.numpy lists them. "
        "Read with astropy (the 'fits' extra); on device='gpu' the arrays are read on the host and uploaded.",
    args=(
        Arg("file_root", "str", None, "Folder of the files; relative file names are taken from it."),
        Arg("file_filter", "str", "*.fits", "Glob pattern of the files taken from file_root and its sub-folders."),
        Arg("file_list", "str", None, "A text file listing one file per line (relative to file_root)."),
        Arg("files", "str", None, "Explicit file names (relative to file_root when it is given).", list_of=True),
        Arg("hdu_indices", "int", [2], "The HDUs to read, 1-based (1: the primary HDU); one output each.",
            list_of=True, limits=Limits(1, 2**31 - 1)),
        Arg("dtypes", "dtype", None, "One element type per HDU, checked as DALI checks it (a supported type, as many "
            "as hdu_indices); the outputs keep the type the headers give, as DALI's.", list_of=True,
            choices=FITS_TYPES),
        *shuffle_args(FILES_PERMUTED),
        _SEED,
        Arg("shuffle_after_epoch", "bool", False, "Shuffle the whole data set every epoch, the same way in every shard "
            "(seed: shuffle_after_epoch_seed, else a fixed one); excludes random_shuffle and stick_to_shard."),
        Arg("shuffle_after_epoch_seed", "int", None, "Seed of shuffle_after_epoch's permutations."),
        *SHARD_ARGS,
        *READER_COMPAT_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=_fits_outputs,
    devices=("cpu", "gpu"),
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_fits,
))
