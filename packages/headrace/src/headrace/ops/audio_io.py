"""Schemas of audio input: decoders.audio (WAV, FLAC, OGG through libsndfile), audio_resample and the NeMo ASR
manifest reader, readers.nemo_asr, with DALI's names, arguments, defaults and outputs."""

import numpy as np

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
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

_DECODE_TYPES = (DALIDataType.INT16, DALIDataType.INT32, DALIDataType.FLOAT)
_RESAMPLE_TYPES = (DALIDataType.INT8, DALIDataType.UINT8, DALIDataType.INT16, DALIDataType.UINT16,
                   DALIDataType.INT32, DALIDataType.UINT32, DALIDataType.FLOAT)
_QUALITY = Arg("quality", "float", 50.0, "Resampling quality from 0 to 100: the windowed sinc has 3 lobes at 0, 16 "
               "at 50 and 64 at 100.", limits=Limits(0.0, 100.0))
_ON_ERROR = ("An audio file that cannot be decoded (truncated, a lying WAV header, empty, not audio): 'raise' an "
             "error naming the op, the sample and its file, or 'skip' it: its slot gets the reader's next sample and "
             "the epoch keeps its length (Pipeline.skipped lists what was skipped). headrace's own: DALI has no such "
             "argument.")


def _audio_spec(dtype: DALIDataType, downmix: bool) -> OutputSpec:
    return OutputSpec(numpy_dtype(dtype), None, (-1,) if downmix else (-1, -1), "audio")


def _decoded(a: SpecArgs) -> list[OutputSpec]:
    """Audio of type `dtype`, (samples, channels) or (samples,) downmixed; its sampling rate (float32 scalar)."""
    return [_audio_spec(a.args["dtype"], a.args["downmix"]),
            OutputSpec(np.float32, None, (), "sampling rate")]


register(OpSchema(
    name="decoders.audio",
    doc="Decodes WAV, FLAC and OGG (Vorbis, Opus) audio through libsndfile; outputs (audio, sampling rate). "
        "Without downmix the audio is (samples, channels), a mono file included, with interleaved channels; "
        "downmix averages the channels into (samples,). Integer files decode to float in -1..1 as libsndfile "
        "scales them. Resampling (`sample_rate`) is DALI's windowed sinc. CPU only, as in DALI. A WAV whose data "
        "chunk declares more bytes than the file holds is refused (DALI decodes what is there).",
    args=(
        Arg("sample_rate", "float", 0.0, "Resample every file to this rate, in Hz; 0 keeps each file's rate.",
            tensor_input=True),
        Arg("downmix", "bool", False, "Average all channels into one: the output is then 1-D."),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the audio: INT16, INT32 or FLOAT (full scale "
            "is -1..1 for FLOAT, the type's range for the integers).", choices=_DECODE_TYPES),
        _QUALITY,
        Arg("on_error", "str", "raise", _ON_ERROR, choices=("raise", "skip")),
    ),
    min_inputs=1, max_inputs=1, num_outputs=2,
    devices=("cpu",),
    state="none", output_spec=_decoded,
))


def _resample_rule(given: frozenset[str]) -> str | None:
    """DALI's: in_rate with out_rate, scale, or out_length, exactly one of the three ways."""
    if ("in_rate" in given) != ("out_rate" in given):
        return "in_rate and out_rate must be given together"
    ways = [w for w in ("in_rate/out_rate", "scale", "out_length") if given & set(w.split("/"))]
    if len(ways) != 1:
        return ("give the resampling ratio one way: in_rate and out_rate, scale, or out_length "
                f"(got {', '.join(ways) if ways else 'none'})")
    return None


def _resampled(a: SpecArgs) -> list[OutputSpec]:
    """The signal resampled: the input's layout and channels, a new length, element type `dtype` or the input's."""
    first = a.first
    dims = first.dims
    if dims is not None:
        length = a.literal("out_length")
        dims = (int(length) if length is not None else -1, *dims[1:])
    dtype = a.args.get("dtype")
    return [OutputSpec(numpy_dtype(dtype) if dtype is not None else first.dtype, first.layout, dims)]


register(OpSchema(
    name="audio_resample",
    doc="Resamples (samples,) or (samples, channels) signals with DALI's Hann-windowed sinc (its lobes set by "
        "`quality`), the ratio given as in_rate and out_rate, scale, or out_length; the output has "
        "ceil(length * out_rate / in_rate) samples. Like DALI's it does not low-pass when it downsamples. A new "
        "`dtype` rescales to its range (integers as -1..1 or 0..1 of their range). CPU bit-exact with DALI's on "
        "x86-64; GPU within 2e-7 of the CPU (float32).",
    args=(
        Arg("in_rate", "float", None, "Input sampling rate (any unit, the same as out_rate's).", tensor_input=True),
        Arg("out_rate", "float", None, "Output sampling rate (any unit, the same as in_rate's).", tensor_input=True),
        Arg("scale", "float", None, "Output rate / input rate: scale=2 doubles the number of samples.",
            tensor_input=True),
        Arg("out_length", "int", None, "The output's number of samples; the ratio is out_length / input length.",
            tensor_input=True, limits=Limits(0, 1 << 31)),
        _QUALITY,
        Arg("dtype", "dtype", None, "Output element type (INT8, UINT8, INT16, UINT16, INT32, UINT32 or FLOAT); "
            "default the input's.", choices=_RESAMPLE_TYPES),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    rule=_resample_rule,
    state="none", output_spec=_resampled,
))


def _nemo_outputs(args: dict) -> int:
    """1 (audio) + the sampling rate, text and index outputs that read_sample_rate, read_text, read_idxs ask for."""
    return 1 + sum(bool(args.get(name, default)) for name, default in
                   (("read_sample_rate", True), ("read_text", True), ("read_idxs", False)))


def _nemo_read(a: SpecArgs) -> list[OutputSpec]:
    """Decoded audio, then as asked the file's rate (float32), the text (uint8 UTF-8) and the index (int64)."""
    specs = [_audio_spec(a.args["dtype"], a.args["downmix"])]
    if a.args["read_sample_rate"]:
        specs.append(OutputSpec(np.float32, None, (), "sampling rate"))
    if a.args["read_text"]:
        specs.append(OutputSpec(np.uint8, None, (-1,), "text"))
    if a.args["read_idxs"]:
        specs.append(OutputSpec(np.int64, None, (1,), "manifest index"))
    return specs


register(OpSchema(
    name="readers.nemo_asr",
    doc="Reads speech data from NVIDIA NeMo manifests (JSON lines with audio_filepath, and optionally duration, "
        "offset and text) and decodes the audio as decoders.audio does; outputs audio, then the sampling rate, "
        "the text and the manifest index as read_sample_rate / read_text / read_idxs ask. Paths are opened as "
        "written (relative ones from the working directory, as DALI); a line that is not a JSON object or has no "
        "audio_filepath is skipped with a warning; `duration` and `offset` (seconds) cut the audio. Sharding and "
        "epochs as readers.file, random_shuffle included.",
    args=(
        Arg("manifest_filepaths", "str", REQUIRED, "The NeMo manifest files (JSON lines).", list_of=True),
        Arg("sample_rate", "float", -1.0, "Resample every file to this rate, in Hz; <= 0 keeps each file's rate."),
        Arg("downmix", "bool", True, "Average all channels into one: the audio is then 1-D."),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the audio: INT16, INT32 or FLOAT.",
            choices=_DECODE_TYPES),
        _QUALITY,
        Arg("read_sample_rate", "bool", True, "Output each file's sampling rate (float32; the file's own, even "
            "when `sample_rate` resamples it, as DALI)."),
        Arg("read_text", "bool", True, "Output each entry's transcript (uint8 UTF-8 bytes; empty when absent)."),
        Arg("read_idxs", "bool", False, "Output each entry's index among the kept entries of its manifest (int64)."),
        Arg("max_duration", "float", 0.0, "If > 0, leave out entries whose `duration` is longer (seconds)."),
        Arg("min_duration", "float", 0.0, "If > 0, leave out entries whose `duration` is shorter (seconds); an entry "
            "without one counts as -1."),
        *shuffle_args(FILES_PERMUTED),
        Arg("shuffle_after_epoch", "bool", False, "Shuffle the whole data set every epoch, the same way in every "
            "shard (seed: shuffle_after_epoch_seed, else a fixed one); implies stick_to_shard, and excludes "
            "random_shuffle and an explicit stick_to_shard=True."),
        Arg("shuffle_after_epoch_seed", "int", None, "Seed of shuffle_after_epoch's permutations."),
        Arg("seed", "int", -1, "Seed of random_shuffle; -1 derives it from the pipeline seed."),
        *SHARD_ARGS,
        Arg("on_error", "str", "raise", _ON_ERROR.replace("An audio file that cannot be decoded",
                                                          "An audio file that cannot be read or decoded"),
            choices=("raise", "skip")),
        *READER_COMPAT_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=_nemo_outputs,
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_nemo_read,
))
