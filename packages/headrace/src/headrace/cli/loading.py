"""Loading a pipeline file for a subcommand: clear errors for missing or malformed files, `--data` and `--set`
overrides (so a file written on another machine runs here), pipeline parameter overrides, and `--device`."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from headrace import pipeline_file
from headrace.cli.common import CliError
from headrace.errors import PipelineFileError, SchemaError
from headrace.pipeline import Pipeline
from headrace.schema import SCHEMAS

DEVICES = ("cpu", "gpu")


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    return _whole_number(text, 0)


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a number of at least {least}, got {value}")
    return value


def add_loading_options(parser: argparse.ArgumentParser) -> None:
    """FILE and the options that change how it is loaded."""
    parser.add_argument("file", metavar="FILE", type=Path, help="a pipeline file (JSON)")
    group = parser.add_argument_group("loading the pipeline file")
    group.add_argument("--data", action="append", default=[], metavar="[READER=]DIR",
                       help="read this folder instead of the file_root written in the file; name the reader node "
                            "when there are several (repeatable)")
    group.add_argument("--set", action="append", default=[], metavar="NODE.ARG=VALUE", dest="overrides",
                       help="override a node argument; VALUE is JSON (a number, true, [1, 2], \"text\") or plain "
                            "text (repeatable)")
    group.add_argument("--allow-module", action="append", default=[], metavar="MODULE", dest="allowed_modules",
                       help="trust this module (or package) for the user code the file names: python_function's "
                            "functions, user ops (repeatable; nothing is imported otherwise)")
    group.add_argument("--batch-size", type=positive_int, help="override the file's batch_size")
    group.add_argument("--threads", type=positive_int, help="override the file's num_threads")
    group.add_argument("--seed", type=int, help="override the file's seed")
    group.add_argument("--device", choices=DEVICES,
                       help="cpu: run every node on the CPU; gpu: decoders become 'mixed' and the ops after them "
                            "'gpu' where their schema allows (default: as written in the file)")


@dataclasses.dataclass
class Loaded:
    """A pipeline loaded for a subcommand, with the file content it came from (after overrides)."""

    pipe: Pipeline
    path: Path
    content: dict[str, Any]
    changes: list[str]

    @property
    def uses_gpu(self) -> bool:
        return any(entry.get("device") in ("gpu", "mixed") for entry in self.content["nodes"])


def read_pipeline_file(path: Path) -> dict[str, Any]:
    """The validated content of a pipeline file, or a one-line error naming the file."""
    if not path.exists():
        raise CliError(f"pipeline file '{path}' does not exist")
    if path.is_dir():
        raise CliError(f"'{path}' is a folder, not a pipeline file")
    try:
        text = pipeline_file.read_file(path)
    except PipelineFileError as exc:
        if "not UTF-8" in str(exc):
            raise CliError(f"'{path}' is not a pipeline file (not UTF-8 text)") from None
        raise CliError(str(exc)) from None
    try:
        pipeline_file.parse(text)
    except (PipelineFileError, SchemaError) as exc:
        raise CliError(f"{path}: {exc}") from None
    return json.loads(text)


def load_pipeline(args: argparse.Namespace, *, for_running: bool = True) -> Loaded:
    """Load `args.file` with every override applied. `for_running` also checks that the data and the device asked
    for exist here (inspect skips that: it only looks at the graph)."""
    content = read_pipeline_file(args.file)
    edited = copy.deepcopy(content)
    changes = [*apply_data_overrides(edited, args.data), *apply_arg_overrides(edited, args.overrides)]
    if args.device is not None:
        changes += place_on_device(edited, args.device)
    text = pipeline_file.dumps(edited)
    try:
        pipeline_file.parse(text, args.allowed_modules)
    except PipelineFileError as exc:
        raise CliError(f"{args.file} after the overrides ({'; '.join(changes)}): {exc}") from None
    if for_running:
        check_data_folders(edited)
        if args.device == "gpu" or any(e.get("device") in ("gpu", "mixed") for e in edited["nodes"]):
            require_gpu(asked=args.device == "gpu")
    params = {key: value for key, value in (("batch_size", args.batch_size), ("num_threads", args.threads),
                                            ("seed", args.seed)) if value is not None}
    pipe = Pipeline.load(text, allowed_modules=args.allowed_modules, **params)
    changes += [f"{key}={value}" for key, value in params.items()]
    return Loaded(pipe, args.file, edited, changes)


def _node_entries(content: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in content["nodes"]}


def apply_data_overrides(content: dict, values: list[str]) -> list[str]:
    """Point readers at other folders: `DIR` (the only reader) or `READER=DIR`."""
    readers = [e for e in content["nodes"] if e["op"] == "readers.file"]
    by_name = {e["name"]: e for e in readers}
    changes = []
    for value in values:
        name, sep, folder = value.partition("=")
        if sep and name in by_name:
            targets = [by_name[name]]
        elif sep and name and not os.path.exists(value) and "/" not in name:
            raise CliError(f"--data {value}: there is no reader node '{name}' (readers: "
                           f"{', '.join(by_name) or 'none'})")
        else:
            folder = value
            if len(readers) != 1:
                raise CliError(f"--data {value}: the pipeline has {len(readers)} file readers "
                               f"({', '.join(by_name) or 'none'}); write --data READER=DIR")
            targets = readers
        if not os.path.isdir(folder):
            raise CliError(f"--data {value}: '{folder}' is not a folder")
        for entry in targets:
            entry.setdefault("args", {})["file_root"] = folder
            changes.append(f"{entry['name']}.file_root={folder}")
    return changes


def apply_arg_overrides(content: dict, values: list[str]) -> list[str]:
    """`NODE.ARG=VALUE` overrides; VALUE is read as JSON when it parses, else as text."""
    entries = _node_entries(content)
    changes = []
    for value in values:
        target, sep, raw = value.partition("=")
        node, dot, arg = target.rpartition(".")
        if not sep or not dot or not node or not arg:
            raise CliError(f"--set {value}: expected NODE.ARG=VALUE")
        if node not in entries:
            raise CliError(f"--set {value}: there is no node '{node}' (nodes: {', '.join(entries)})")
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            parsed = raw
        if arg == "device":
            entries[node]["device"] = parsed
        else:
            entries[node].setdefault("args", {})[arg] = parsed
        changes.append(f"{node}.{arg}={raw}")
    return changes


def place_on_device(content: dict, device: str) -> list[str]:
    """Move the nodes to `device`. For 'gpu', as DALI users write it: decoders become 'mixed', and every op that
    reads GPU data and has a GPU implementation becomes 'gpu'. Readers, ops without a GPU implementation (the random
    generators) and producers of per-sample arguments stay on the CPU, reading GPU data through a host copy."""
    before = {e["name"]: e.get("device", SCHEMAS[e["op"]].devices[0]) for e in content["nodes"]}
    if device == "cpu":
        for entry in content["nodes"]:
            entry["device"] = "cpu"
    else:
        _place_on_gpu(content)
        if content.get("pipeline", {}).get("device_id") is None:
            content.setdefault("pipeline", {})["device_id"] = 0
    return [f"{e['name']}: {before.get(e['name'], 'new')} -> {e['device']}" for e in content["nodes"]
            if before.get(e["name"]) != e["device"]]


def _place_on_gpu(content: dict) -> None:
    entries = content["nodes"]
    arg_producers = {ref[0] for e in entries for ref in e.get("arg_inputs", {}).values()}
    on_gpu: set[str] = set()  # nodes whose outputs live on the GPU
    for entry in entries:  # a pipeline file lists nodes in topological order
        schema = SCHEMAS[entry["op"]]
        data_inputs = [ref[0] for ref in entry.get("inputs", [])]
        reads_gpu = any(name in on_gpu for name in data_inputs)
        movable = not schema.batch_op and entry["name"] not in arg_producers
        if entry["op"] == "copy":
            if entry.get("device") == "gpu" or (reads_gpu and entry.get("device") != "cpu"):
                on_gpu.add(entry["name"])
            continue
        if movable and "mixed" in schema.devices and not reads_gpu:
            entry["device"] = "mixed"
        elif movable and "gpu" in schema.devices and (reads_gpu or entry.get("device") == "gpu"):
            entry["device"] = "gpu"
        else:
            entry["device"] = "cpu" if "cpu" in schema.devices else entry.get("device", schema.devices[0])
            _read_gpu_inputs_through_host_copies(content, entry, on_gpu)
        if entry["device"] in ("gpu", "mixed"):
            on_gpu.add(entry["name"])
    _constants_follow_their_readers(content, on_gpu)


def _read_gpu_inputs_through_host_copies(content: dict, entry: dict, on_gpu: set[str]) -> None:
    """A CPU node cannot read GPU data: give each GPU input a copy to the host."""
    names = {e["name"] for e in content["nodes"]}
    for position, (source, index) in enumerate(entry.get("inputs", [])):
        if source not in on_gpu:
            continue
        copy_name = f"{source}_{index}_to_cpu"
        if copy_name not in names:
            where = next(i for i, e in enumerate(content["nodes"]) if e is entry)
            content["nodes"].insert(where, {"name": copy_name, "op": "copy", "device": "cpu",
                                            "inputs": [[source, index]]})
            names.add(copy_name)
        entry["inputs"][position] = [copy_name, 0]


def _constants_follow_their_readers(content: dict, on_gpu: set[str]) -> None:
    """Input-less nodes (constants) read only as data by GPU nodes move to the GPU with them."""
    entries = content["nodes"]
    for entry in entries:
        schema = SCHEMAS[entry["op"]]
        if entry.get("inputs") or schema.batch_op or "gpu" not in schema.devices:
            continue
        readers = [e for e in entries if any(ref[0] == entry["name"] for ref in e.get("inputs", []))]
        as_argument = any(ref[0] == entry["name"] for e in entries for ref in e.get("arg_inputs", {}).values())
        if readers and not as_argument and all(e["name"] in on_gpu for e in readers):
            entry["device"] = "gpu"
            on_gpu.add(entry["name"])


def check_data_folders(content: dict) -> None:
    """Each file reader's file_root exists here, or a one-line error that says how to point it elsewhere."""
    for entry in content["nodes"]:
        if entry["op"] != "readers.file":
            continue
        args = entry.get("args", {})
        root = args.get("file_root")
        if root is not None and not args.get("file_list") and not args.get("files") and not os.path.isdir(root):
            raise CliError(f"reader '{entry['name']}' reads file_root '{root}', which is not a folder here; pass "
                           f"--data DIR to read another one")
        if args.get("file_list") and not os.path.isfile(args["file_list"]):
            raise CliError(f"reader '{entry['name']}' reads file_list '{args['file_list']}', which does not exist "
                           f"here; pass --set {entry['name']}.file_list=PATH")


def gpu_count() -> tuple[int, str]:
    """(number of usable GPUs, why none when 0)."""
    try:
        import cupy
    except ImportError:
        return 0, "CuPy is not installed (pip install 'headrace-kernels[cuda13]' or '[cuda12]' on a GPU machine)"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - CUDA's own errors: no driver, no device
        return 0, f"CUDA reports no usable device ({' '.join(str(exc).split())})"
    return count, "" if count else "CUDA reports 0 devices"


def require_gpu(asked: bool) -> None:
    """A one-line error unless a GPU can be used here."""
    count, why = gpu_count()
    if count == 0:
        if asked:
            raise CliError(f"--device gpu needs an NVIDIA GPU, and none can be used here: {why}")
        raise CliError(f"this pipeline file places nodes on the GPU, and none can be used here ({why}); pass "
                       "--device cpu to run it on the CPU")
