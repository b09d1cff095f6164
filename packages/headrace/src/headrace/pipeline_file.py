"""The pipeline file: a versioned, validated JSON description of a graph. Loading it never runs code.

A file is hostile data (issue 24): every field's type, range and finiteness is checked before anything is built, and
whatever is wrong is a PipelineFileError that names the node and the field, never another exception.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from headrace import function_refs, layouts
from headrace.errors import PipelineFileError, SchemaError
from headrace.graph import SPLIT_OP, DataNode, Graph, OpNode, check_branch_visibility
from headrace.schema import INT64_RANGE, SCHEMAS, short_repr
from headrace_kernels.bounded_io import read_bounded

FORMAT = "headrace-pipeline"
FORMAT_VERSION = 1
PIPELINE_PARAMS = {"batch_size": int, "num_threads": int, "device_id": (int, type(None)), "seed": int,
                   "prefetch_queue_depth": int, "enable_checkpointing": bool, "enable_conditionals": bool}
PIPELINE_LIMITS = {"batch_size": (1, 1 << 20), "num_threads": (-1, 1024), "device_id": (0, 1023),
                   "seed": INT64_RANGE, "prefetch_queue_depth": (1, 256)}
"""Ranges of the integer pipeline parameters: far above any real pipeline's, far below what exhausts a machine
(threads, batches in flight)."""
MAX_TEXT_CHARS = 256 << 20
"""The longest file parsed: 256 Mi characters (a `files` list of ImageNet's 1.28 million paths takes about 80)."""


MAX_NESTING = 32
"""The deepest nesting of JSON arrays and objects (a valid file nests 5 deep)."""
MAX_NODES = 100_000
"""The most nodes a file may declare (real pipelines have tens)."""
MAX_NAME_CHARS = 1024
"""The longest node name (names appear in every error message about the node)."""


def graph_to_dict(params: dict[str, Any], nodes: list[OpNode], outputs: list[DataNode],
                  for_file: bool = True) -> dict:
    """The file's content for a graph: pipeline parameters, the nodes (only the arguments given), the outputs.
    User functions are stored by reference (a SchemaError for one that cannot be); with `for_file=False` (a
    fingerprint of the graph) by name only."""
    out_nodes = []
    for node in nodes:
        schema_args = node.schema.all_args
        args = {k: _arg_to_json(node, schema_args[k], v, for_file) for k, v in sorted(node.args.items())
                if schema_args[k].serializable and k not in ("device", "name")}
        entry: dict[str, Any] = {"name": node.name, "op": node.schema.name, "device": node.device}
        if node.schema.plugin_module:
            entry["plugin"] = node.schema.plugin_module
        if node.inputs:
            entry["inputs"] = [[d.op.name, d.index] for d in node.inputs]
        if node.arg_inputs:
            entry["arg_inputs"] = {k: [d.op.name, d.index] for k, d in sorted(node.arg_inputs.items())}
        if node.guard is not None:
            entry["guard"] = [node.guard.op.name, node.guard.index]
        if args:
            entry["args"] = args
        out_nodes.append(entry)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "pipeline": params, "nodes": out_nodes,
            "outputs": [[o.op.name, o.index] for o in outputs]}


def _arg_to_json(node: OpNode, arg: Any, value: Any, for_file: bool) -> Any:
    if arg.kind != "function" or value is None:
        return arg.to_json(value)
    if not for_file:
        return function_refs.short_name(value)
    return function_refs.reference(value, f"{node.schema.name} (node '{node.name}') argument '{arg.name}'")


def dumps(content: dict) -> str:
    return json.dumps(content, indent=1, sort_keys=False) + "\n"


def _fail(message: str) -> PipelineFileError:
    return PipelineFileError(f"invalid pipeline file: {message}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when a key appears twice (json keeps the last: two readers could disagree)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _fail(f"key {short_repr(key)} appears twice in one object")
        out[key] = value
    return out


def _load_json(text: str) -> Any:
    """The parsed file, its size and nesting bounded; a PipelineFileError for anything that is not such JSON."""
    if not isinstance(text, str):
        raise _fail(f"expected the file's text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise _fail(f"{len(text)} characters, more than the limit of {MAX_TEXT_CHARS}")
    try:
        content = json.loads(text, object_pairs_hook=_unique_keys)
    except PipelineFileError:
        raise
    except RecursionError:
        raise _fail(f"arrays or objects nested too deeply (the limit is {MAX_NESTING} levels)") from None
    except json.JSONDecodeError as exc:
        raise _fail(f"not JSON ({exc})") from None
    except ValueError:  # an integer of more digits than Python converts
        raise _fail(f"a number has more than {sys.get_int_max_str_digits()} digits") from None
    stack = [(content, 1)] if isinstance(content, dict | list) else []
    while stack:  # iterative: a recursive walk is what a hostile file would overflow
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise _fail(f"arrays or objects nested too deeply (the limit is {MAX_NESTING} levels)")
        items = value.values() if isinstance(value, dict) else value
        stack += [(item, depth + 1) for item in items if isinstance(item, dict | list)]
    return content


def _ref(value: Any, where: str) -> tuple[str, int]:
    if (not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], str)
            or not isinstance(value[1], int) or isinstance(value[1], bool)):
        raise _fail(f"{where}: expected [node name, output index], got {short_repr(value)}")
    return value[0], value[1]


@dataclasses.dataclass
class _Refs:
    """What a node entry reads: its inputs, argument inputs and guard, each (node name, output index)."""

    inputs: list[tuple[str, int]]
    arg_inputs: dict[str, tuple[str, int]]
    guard: tuple[str, int] | None

    @property
    def sources(self) -> set[str]:
        guard = [self.guard] if self.guard is not None else []
        return {s for s, _ in [*self.inputs, *self.arg_inputs.values(), *guard]}


def _refs_of(name: str, entry: dict) -> _Refs:
    inputs = entry.get("inputs", [])
    if not isinstance(inputs, list):
        raise _fail(f"node '{name}': 'inputs' must be a list of [node name, output index], got {short_repr(inputs)}")
    arg_inputs = entry.get("arg_inputs", {})
    if not isinstance(arg_inputs, dict):
        raise _fail(f"node '{name}': 'arg_inputs' must be an object, got {short_repr(arg_inputs)}")
    return _Refs([_ref(r, f"node '{name}' input") for r in inputs],
                 {k: _ref(r, f"node '{name}' argument input {short_repr(k)}") for k, r in arg_inputs.items()},
                 _ref(entry["guard"], f"node '{name}' guard") if "guard" in entry else None)


def _check_params(params: Any) -> None:
    if not isinstance(params, dict):
        raise _fail("'pipeline' must be an object")
    for key, value in params.items():
        if key not in PIPELINE_PARAMS:
            raise _fail(f"pipeline parameter {short_repr(key)} is unknown (known: {', '.join(PIPELINE_PARAMS)})")
        expected = PIPELINE_PARAMS[key]
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise _fail(f"pipeline parameter '{key}' has the wrong type ({type(value).__name__})")
        if key in PIPELINE_LIMITS and value is not None:
            low, high = PIPELINE_LIMITS[key]
            if not low <= value <= high:
                want = f"positive and at most {high}" if low == 1 else f"from {low} to {high}"
                raise _fail(f"pipeline parameter '{key}' must be {want}, got {short_repr(value)}")


def read_file(path: str | os.PathLike) -> str:
    """The text of a pipeline file: a regular file of at most MAX_TEXT_CHARS bytes, else a PipelineFileError."""
    try:
        data = read_bounded(path, MAX_TEXT_CHARS)
    except ValueError as exc:
        raise PipelineFileError(f"the pipeline file '{path}' {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineFileError(f"the pipeline file '{path}' is not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start})") from None


def parse(text: str, allowed_modules: Sequence[str] = ()) -> tuple[dict[str, Any], Graph, list[DataNode]]:
    """Validate a pipeline file's text and build its graph: (pipeline parameters, graph, outputs). User code (the
    functions of python_function and the like, user ops' modules) is imported only from `allowed_modules`."""
    content = _load_json(text)
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise _fail(f"'format' must be '{FORMAT}'")
    version = content.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # type: `true == 1`
        raise _fail(f"format_version {short_repr(version)} is not supported (this headrace reads version "
                    f"{FORMAT_VERSION})")
    unknown = set(content) - {"format", "format_version", "pipeline", "nodes", "outputs"}
    if unknown:
        raise _fail(f"unknown top-level keys {[short_repr(k) for k in sorted(unknown)]}")
    params = content.get("pipeline", {})
    _check_params(params)
    raw_nodes = content.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _fail("'nodes' must be a non-empty list")
    if len(raw_nodes) > MAX_NODES:
        raise _fail(f"{len(raw_nodes)} nodes, more than the limit of {MAX_NODES}")

    entries: dict[str, dict] = {}
    for position, entry in enumerate(raw_nodes):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise _fail(f"node #{position} has no name")
        name = entry["name"]
        if len(name) > MAX_NAME_CHARS:
            raise _fail(f"node #{position}: its name {short_repr(name)} is longer than {MAX_NAME_CHARS} characters")
        if name in entries:
            raise _fail(f"node '{name}' appears twice")
        extra = set(entry) - {"name", "op", "device", "inputs", "arg_inputs", "args", "guard", "plugin"}
        if extra:
            raise _fail(f"node '{name}': unknown keys {[short_repr(k) for k in sorted(extra)]}")
        entries[name] = entry

    refs = {name: _refs_of(name, entry) for name, entry in entries.items()}
    for name, node_refs in refs.items():
        for source in sorted(node_refs.sources):
            if source not in entries:
                raise _fail(f"node '{name}' reads from node {short_repr(source)}, which does not exist")
    order = _topological_order({name: node_refs.sources for name, node_refs in refs.items()})

    graph = Graph()
    for name in order:
        graph.add(_build_node(entries[name], refs[name], graph, tuple(allowed_modules)))
    raw_outputs = content.get("outputs", [])
    if not isinstance(raw_outputs, list):
        raise _fail(f"a value has the wrong type: 'outputs' must be a list of [node name, output index], got "
                    f"{short_repr(raw_outputs)}")
    if not raw_outputs:
        raise _fail("'outputs' must name at least one node output")
    outputs = []
    for position, value in enumerate(raw_outputs):
        source, index = _ref(value, f"output #{position}")
        if source not in graph:
            raise _fail(f"output #{position} names node {short_repr(source)}, which does not exist")
        outputs.append(_output_of(graph[source], index, f"output #{position}"))
        if outputs[-1].op.guard is not None:
            raise _fail(f"output #{position} reads node '{source}', which is inside a conditional branch")
    return params, graph, outputs


def _output_of(node: OpNode, index: int, where: str) -> DataNode:
    if not 0 <= index < len(node.outputs):
        raise _fail(f"{where} reads output {short_repr(index)} of node '{node.name}', which has "
                    f"{len(node.outputs)} outputs")
    return node.outputs[index]


def _topological_order(deps: dict[str, set[str]]) -> list[str]:
    """Node names ordered so that every node comes after those it reads (each node's sources visited in sorted
    order, depth first, without recursion: a chain of many nodes must not overflow the stack); a cycle is an error
    that names it."""
    order: list[str] = []
    done: set[str] = set()
    for root in deps:
        if root in done:
            continue
        path, stack = [root], [iter(sorted(deps[root]))]
        while stack:
            for dep in stack[-1]:
                if dep in path:
                    cycle = path[path.index(dep):] + [dep]
                    raise _fail(f"node '{dep}' is part of a cycle: {' -> '.join(repr(n) for n in cycle)}")
                if dep not in done:
                    path.append(dep)
                    stack.append(iter(sorted(deps[dep])))
                    break
            else:
                stack.pop()
                done.add(path[-1])
                order.append(path.pop())
    return order


def _user_op(name: str, op: Any, module: Any, allowed_modules: tuple[str, ...]) -> None:
    """Import the trusted module that declares user op `op` (the node's "plugin" entry)."""
    if not isinstance(module, str):
        raise _fail(f"node '{name}': 'plugin' must be the name of the module that declares its op")
    function_refs.import_trusted(module, allowed_modules, f"op {short_repr(op)} (node '{name}')")
    schema = SCHEMAS.get(op) if isinstance(op, str) else None
    if schema is None or schema.plugin_module != module:
        raise _fail(f"node '{name}': module '{module}' does not declare op {short_repr(op)}")


def _build_node(entry: dict, refs: _Refs, graph: Graph, allowed_modules: tuple[str, ...] = ()) -> OpNode:
    """The node of a validated entry, checked as `fn.*` checks a call: arguments, inputs, devices, layouts,
    branches and output specs."""
    name, op = entry["name"], entry.get("op")
    if "plugin" in entry:
        _user_op(name, op, entry["plugin"], allowed_modules)
    schema = SCHEMAS.get(op) if isinstance(op, str) else None
    if schema is None:
        raise _fail(f"node '{name}': unknown op {short_repr(op)}")
    device = entry.get("device", schema.devices[0])
    if not isinstance(device, str) or device not in schema.devices:
        raise _fail(f"node '{name}' ({op}): device {short_repr(device)} is not one of {list(schema.devices)}")
    args = entry.get("args", {})
    if not isinstance(args, dict):
        raise _fail(f"node '{name}': 'args' must be an object")
    for key in args:
        arg = schema.all_args.get(key)
        if arg is not None and not arg.serializable:
            raise _fail(f"node '{name}' ({op}): argument '{key}' cannot be stored in a pipeline file")
        if key in ("device", "name"):
            raise _fail(f"node '{name}' ({op}): '{key}' belongs to the node, not to 'args'")
    functions = {key: function_refs.resolve(value, allowed_modules, f"{op} (node '{name}') argument '{key}'")
                 for key, value in args.items() if key in schema.all_args
                 and schema.all_args[key].kind == "function" and value is not None}
    args = {**args, **functions}
    try:
        canonical = schema.validate_args(name, args, per_sample=refs.arg_inputs)
        schema.check_rule(name, set(canonical) | set(refs.arg_inputs))
    except SchemaError as exc:
        raise _fail(str(exc)) from None
    inputs = [_output_of(graph[s], i, f"node '{name}' input") for s, i in refs.inputs]
    arg_inputs = {k: _output_of(graph[s], i, f"node '{name}' argument {short_repr(k)}")
                  for k, (s, i) in refs.arg_inputs.items()}
    if not schema.min_inputs <= len(inputs) <= schema.max_inputs:
        raise _fail(f"node '{name}' ({op}) takes {schema.min_inputs} to {schema.max_inputs} inputs, "
                    f"has {len(inputs)}")
    if device == "cpu" and schema.name != "copy" and any(i.device == "gpu" for i in inputs):
        source = next(i for i in inputs if i.device == "gpu")
        raise _fail(f"node '{name}' ({op}): a CPU op cannot read GPU data ('{source.op.name}')")
    for key, source in arg_inputs.items():
        arg = schema.all_args.get(key)
        if arg is None or not arg.tensor_input:
            raise _fail(f"node '{name}' ({op}): argument {short_repr(key)} cannot be a per-sample input")
        if key in args:
            raise _fail(f"node '{name}' ({op}): argument '{key}' is given both in 'args' and in 'arg_inputs'")
        if source.device != "cpu":
            raise _fail(f"node '{name}' ({op}): argument '{key}' reads GPU data from '{source.op.name}'; argument "
                        "inputs live on the CPU")
    guard = _output_of(graph[refs.guard[0]], refs.guard[1], f"node '{name}' guard") if refs.guard else None
    if guard is not None and guard.op.schema.name != SPLIT_OP:
        raise _fail(f"node '{name}' ({op}): its guard must be an output of a {SPLIT_OP} node, not of "
                    f"'{guard.op.name}' ({guard.op.schema.name})")
    if guard is not None and schema.batch_op:
        raise _fail(f"node '{name}' ({op}): readers and external sources cannot be inside a conditional branch")
    node = OpNode(name, schema, device, canonical, inputs, arg_inputs, guard=guard)
    try:
        layouts.resolve(schema, name, canonical, inputs)
        check_branch_visibility(node)
        node.outputs = [DataNode(node, i, "gpu" if device == "mixed" else device)
                        for i in range(schema.outputs_for(canonical, len(inputs)))]
        _ = node.output_specs  # as `fn.*` does: an input of the wrong kind is refused now, not in a kernel
    except SchemaError as exc:
        raise _fail(str(exc)) from None
    return node
