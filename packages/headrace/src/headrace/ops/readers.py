"""Schemas of the readers: the stateful batch ops at the root of a pipeline."""

import numpy as np

from headrace.enums import DALIDataType
from headrace.output_specs import declared, numpy_dtype
from headrace.schema import (
    FILES_PERMUTED,
    MAPPING_READER_ARGS,
    READER_BUFFER_ARGS,
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

IMAGE_EXTENSIONS = ("*.jpg", "*.jpeg", "*.png", "*.bmp", "*.tif", "*.tiff", "*.pnm", "*.ppm", "*.pgm", "*.pbm",
                    "*.jp2", "*.webp", "*.flac", "*.ogg", "*.wav")
"""readers.file's default file_filters, DALI's: the image formats and the audio ones."""
_DALI_HINT = "Accepted for DALI compatibility; headrace reads files directly and ignores it."

def _file_and_label(a: SpecArgs) -> list[OutputSpec]:
    """Each file's bytes (uint8, its length varies) and its label (int32, one value)."""
    return [OutputSpec(np.uint8, None, (-1,), "encoded file"), OutputSpec(np.int32, None, (1,), "label")]


register(OpSchema(
    name="readers.file",
    doc="Reads files from a folder-per-class tree, a file list, or explicit files; outputs (encoded bytes, label).",
    args=(
        Arg("file_root", "str", None, "Root folder; its sub-folders, sorted, are the classes 0..N-1."),
        Arg("file_list", "str", None, "A text file of 'path label' lines, paths relative to file_root."),
        Arg("files", "str", None, "Explicit file paths (relative to file_root when it is given).", list_of=True),
        Arg("labels", "int", None, "Labels of `files`; default 0..len(files)-1.", list_of=True),
        Arg("file_filters", "str", list(IMAGE_EXTENSIONS), "Glob patterns of files taken from file_root's class "
            "folders (only the files directly inside them: deeper folders are not read, as in DALI).",
            list_of=True),
        Arg("dir_filters", "str", None, "Glob patterns of the class folders taken from file_root; the labels "
            "number the folders kept, in order. Ignored with file_list or files.", list_of=True),
        Arg("case_sensitive_filter", "bool", False, "Match file_filters and dir_filters case-sensitively."),
        *shuffle_args(FILES_PERMUTED),
        Arg("shuffle_after_epoch", "bool", False, "Shuffle the whole data set every epoch, with a seed all shards "
            "share (shuffle_after_epoch_seed, else this reader's `seed`, else a fixed one), so an epoch's shards "
            "still partition the data set."),
        Arg("shuffle_after_epoch_seed", "int", None, "Seed of shuffle_after_epoch's permutations; every shard's "
            "reader must be given the same one. Default: `seed` where given, else a fixed seed (the same order in "
            "every run)."),
        Arg("seed", "int", -1, "Seed of the shuffle; -1 derives it from the pipeline seed."),
        *SHARD_ARGS,
        Arg("on_error", "str", "raise", "A file that cannot be read (gone, no permission): 'raise' an error naming "
            "it, or 'skip' it: its slot gets the next sample and the epoch keeps its length (a repeat at its end); "
            "Pipeline.skipped lists what was skipped. headrace's own: DALI has no such argument.",
            choices=("raise", "skip")),
        *MAPPING_READER_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=2,
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_file_and_label,
))

def _external(a: SpecArgs) -> list[OutputSpec]:
    """The data the source gives, of the element type, layout and number of dimensions declared (every output)."""
    return declared(a) * (a.args.get("num_outputs") or 1)


register(OpSchema(
    name="external_source",
    doc="Data fed from Python: a `source` callable or iterable, or, when there is none (as in a loaded pipeline "
        "file or the Triton backend), arrays passed to `run(name=...)` or `feed_input(name, ...)`.",
    args=(
        Arg("source", "callable", None, "A callable (returning a batch, or a sample when batch=False) or an "
            "iterable of batches. Not stored in the pipeline file.", serializable=False),
        Arg("batch", "bool", True, "Whether `source` returns a whole batch (True) or one sample per call."),
        Arg("batch_info", "bool", False, "Call `source` with the iteration index."),
        Arg("cycle", "any", False, "For an iterable source: False/'raise' ends the epoch with StopIteration, "
            "True/'quiet' restarts it."),
        Arg("dtype", "dtype", None, "Expected element type; a mismatching sample is an error."),
        Arg("ndim", "int", None, "Expected number of dimensions of each sample."),
        Arg("layout", "str", None, "Layout of each sample, e.g. 'HWC'."),
        Arg("repeat_last", "bool", False, "For a fed source (no `source`): a run that finds no batch fed since the "
            "last one uses the last batch again, as DALI's (for inputs that change rarely, e.g. in a server). "
            "Incompatible with `source`."),
        Arg("no_copy", "bool", False, _DALI_HINT),
        Arg("blocking", "bool", False, _DALI_HINT),
        Arg("num_outputs", "int", None, "The number of outputs: the source then gives a tuple of that many "
            "batches (batch=True) or of samples (batch=False), and the op returns a tuple of DataNodes.",
            limits=Limits(1, 1024)),
        Arg("parallel", "bool", False, "Run the callable `source` in the pipeline's worker processes "
            "(Pipeline's py_num_workers, py_start_method), results handed back in shared memory: per sample "
            "(batch=False, samples of a batch split across the workers) or per batch (batch=True)."),
        Arg("prefetch_queue_depth", "int", 1, "With parallel=True, how many batches the workers compute ahead."),
        Arg("cuda_stream", "any", None, _DALI_HINT, serializable=False),
        Arg("use_copy_kernel", "bool", False, _DALI_HINT),
    ),
    num_outputs=lambda args: args.get("num_outputs") or 1,
    devices=("cpu", "gpu"),
    stateful=True,
    batch_op=True,
    state="source", output_spec=_external,
))

def _constant(a: SpecArgs) -> list[OutputSpec]:
    """The tensor `fdata` or `idata` give, of `dtype` (default FLOAT for fdata, INT32 for idata), in `shape`."""
    dtype = a.args["dtype"]
    if dtype is None:
        dtype = DALIDataType.INT32 if a.args["idata"] is not None else DALIDataType.FLOAT
    values = a.args["idata"] if a.args["idata"] is not None else a.args["fdata"] or []
    dims = tuple(a.args["shape"]) or ((len(values),) if len(values) > 1 else ())  # no shape: a flat list
    return [OutputSpec(numpy_dtype(dtype), a.args["layout"], dims)]


def _one_data_form(given: frozenset[str]) -> str | None:
    if ("fdata" in given) == ("idata" in given):
        return "give the values as fdata (floats) or idata (integers), one of them"
    return None


register(OpSchema(
    name="constant",
    doc="The same tensor for every sample (what `types.Constant` and scalar arithmetic build).",
    args=(
        Arg("fdata", "float", None, "The values as floats, flattened, row-major.", list_of=True),
        Arg("idata", "int", None, "The values as integers, flattened, row-major.", list_of=True),
        Arg("shape", "int", [], "The shape of each sample.", list_of=True),
        Arg("dtype", "dtype", None, "The element type (default: FLOAT for fdata, INT32 for idata)."),
        Arg("layout", "str", "", "Layout name of the tensor."),
    ),
    devices=("cpu", "gpu"), rule=_one_data_form,
    state="none", output_spec=_constant,
))
