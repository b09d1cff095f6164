"""The pipeline file: a versioned, validated JSON description of a graph. Loading it never runs code."""

from __future__ import annotations

import json
from typing import Any

from headrace.errors import PipelineFileError, SchemaError
from headrace.graph import SPLIT_OP, DataNode, Graph, OpNode, check_branch_visibility
from headrace.schema import SCHEMAS

FORMAT = "headrace-pipeline"
FORMAT_VERSION = 1
PIPELINE_PARAMS = {"batch_size": int, "num_threads": int, "device_id": (int, type(None)), "seed": int,
                   "prefetch_queue_depth": int, "enable_checkpointing": bool, "enable_conditionals": bool}


def graph_to_dict(params: dict[str, Any], nodes: list[OpNode], outputs: list[DataNode]) -> dict:
    """The file's content for a graph: pipeline parameters, the nodes (only the arguments given), the outputs."""
    out_nodes = []
    for node in nodes:
        schema_args = node.schema.all_args
        args = {k: schema_args[k].to_json(v) for k, v in sorted(node.args.items())
                if schema_args[k].serializable and k not in ("device", "name")}
        entry: dict[str, Any] = {"name": node.name, "op": node.schema.name, "device": node.device}
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


def dumps(content: dict) -> str:
    return json.dumps(content, indent=1, sort_keys=False) + "\n"


def _fail(message: str) -> PipelineFileError:
    return PipelineFileError(f"invalid pipeline file: {message}")


def _ref(value: Any, where: str) -> tuple[str, int]:
    if (not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], str)
            or not isinstance(value[1], int) or isinstance(value[1], bool)):
        raise _fail(f"{where}: expected [node name, output index], got {value!r}")
    return value[0], value[1]


def parse(text: str) -> tuple[dict[str, Any], Graph, list[DataNode]]:
    """Validate a pipeline file's text and build its graph: (pipeline parameters, graph, outputs)."""
    try:
        content = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"not JSON ({exc})") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise _fail(f"'format' must be '{FORMAT}'")
    version = content.get("format_version")
    if version != FORMAT_VERSION:
        raise _fail(f"format_version {version!r} is not supported (this headrace reads version {FORMAT_VERSION})")
    unknown = set(content) - {"format", "format_version", "pipeline", "nodes", "outputs"}
    if unknown:
        raise _fail(f"unknown top-level keys {sorted(unknown)}")
    params = content.get("pipeline", {})
    if not isinstance(params, dict):
        raise _fail("'pipeline' must be an object")
    for key, value in params.items():
        if key not in PIPELINE_PARAMS:
            raise _fail(f"pipeline parameter '{key}' is unknown (known: {', '.join(PIPELINE_PARAMS)})")
        expected = PIPELINE_PARAMS[key]
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is int):
            raise _fail(f"pipeline parameter '{key}' has the wrong type ({type(value).__name__})")
        if key in ("batch_size", "prefetch_queue_depth") and value < 1 or key == "num_threads" and value < -1:
            raise _fail(f"pipeline parameter '{key}' must be positive, got {value}")
    raw_nodes = content.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _fail("'nodes' must be a non-empty list")

    entries: dict[str, dict] = {}
    for position, entry in enumerate(raw_nodes):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise _fail(f"node #{position} has no name")
        name = entry["name"]
        if name in entries:
            raise _fail(f"node '{name}' appears twice")
        extra = set(entry) - {"name", "op", "device", "inputs", "arg_inputs", "args", "guard"}
        if extra:
            raise _fail(f"node '{name}': unknown keys {sorted(extra)}")
        entries[name] = entry

    for name, entry in entries.items():
        refs = [_ref(r, f"node '{name}' input") for r in entry.get("inputs", [])]
        arg_inputs = entry.get("arg_inputs", {})
        if not isinstance(arg_inputs, dict):
            raise _fail(f"node '{name}': 'arg_inputs' must be an object")
        refs += [_ref(r, f"node '{name}' argument input '{k}'") for k, r in arg_inputs.items()]
        if "guard" in entry:
            refs.append(_ref(entry["guard"], f"node '{name}' guard"))
        for source, _ in refs:
            if source not in entries:
                raise _fail(f"node '{name}' reads from node '{source}', which does not exist")
    order = _topological_order(entries)

    graph = Graph()
    for name in order:
        graph.add(_build_node(entries[name], graph))
    outputs = []
    for position, value in enumerate(content.get("outputs") or []):
        source, index = _ref(value, f"output #{position}")
        if source not in graph:
            raise _fail(f"output #{position} names node '{source}', which does not exist")
        outputs.append(_output_of(graph[source], index, f"output #{position}"))
        if outputs[-1].op.guard is not None:
            raise _fail(f"output #{position} reads node '{source}', which is inside a conditional branch")
    if not outputs:
        raise _fail("'outputs' must name at least one node output")
    return params, graph, outputs


def _output_of(node: OpNode, index: int, where: str) -> DataNode:
    if not 0 <= index < len(node.outputs):
        raise _fail(f"{where} reads output {index} of node '{node.name}', which has {len(node.outputs)} outputs")
    return node.outputs[index]


def _topological_order(entries: dict[str, dict]) -> list[str]:
    """Node names ordered so that every node comes after those it reads; a cycle is an error that names it."""
    deps = {name: {r[0] for r in [*e.get("inputs", []), *e.get("arg_inputs", {}).values(),
                                  *([e["guard"]] if "guard" in e else [])]}
            for name, e in entries.items()}
    order, done, visiting = [], set(), []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            cycle = visiting[visiting.index(name):] + [name]
            raise _fail(f"node '{name}' is part of a cycle: {' -> '.join(repr(n) for n in cycle)}")
        visiting.append(name)
        for dep in sorted(deps[name]):
            visit(dep)
        visiting.pop()
        done.add(name)
        order.append(name)

    for name in entries:
        visit(name)
    return order


def _build_node(entry: dict, graph: Graph) -> OpNode:
    name, op = entry["name"], entry.get("op")
    schema = SCHEMAS.get(op) if isinstance(op, str) else None
    if schema is None:
        raise _fail(f"node '{name}': unknown op {op!r}")
    device = entry.get("device", schema.devices[0])
    if device not in schema.devices:
        raise _fail(f"node '{name}' ({op}): device {device!r} is not one of {list(schema.devices)}")
    args = entry.get("args", {})
    if not isinstance(args, dict):
        raise _fail(f"node '{name}': 'args' must be an object")
    for key in args:
        arg = schema.all_args.get(key)
        if arg is not None and not arg.serializable:
            raise _fail(f"node '{name}' ({op}): argument '{key}' cannot be stored in a pipeline file")
        if key in ("device", "name"):
            raise _fail(f"node '{name}' ({op}): '{key}' belongs to the node, not to 'args'")
    try:
        canonical = schema.validate_args(name, args, per_sample=entry.get("arg_inputs", {}))
        schema.check_rule(name, set(canonical) | set(entry.get("arg_inputs", {})))
    except SchemaError as exc:
        raise _fail(str(exc)) from None
    inputs = [_output_of(graph[s], i, f"node '{name}' input") for s, i in entry.get("inputs", [])]
    arg_inputs = {k: _output_of(graph[s], i, f"node '{name}' argument '{k}'")
                  for k, (s, i) in entry.get("arg_inputs", {}).items()}
    if not schema.min_inputs <= len(inputs) <= schema.max_inputs:
        raise _fail(f"node '{name}' ({op}) takes {schema.min_inputs} to {schema.max_inputs} inputs, "
                    f"has {len(inputs)}")
    for key in arg_inputs:
        arg = schema.all_args.get(key)
        if arg is None or not arg.tensor_input:
            raise _fail(f"node '{name}' ({op}): argument '{key}' cannot be a per-sample input")
        if key in args:
            raise _fail(f"node '{name}' ({op}): argument '{key}' is given both in 'args' and in 'arg_inputs'")
    guard = _output_of(graph[entry["guard"][0]], entry["guard"][1], f"node '{name}' guard") \
        if "guard" in entry else None
    if guard is not None and guard.op.schema.name != SPLIT_OP:
        raise _fail(f"node '{name}' ({op}): its guard must be an output of a {SPLIT_OP} node, not of "
                    f"'{guard.op.name}' ({guard.op.schema.name})")
    node = OpNode(name, schema, device, canonical, inputs, arg_inputs, guard=guard)
    try:
        check_branch_visibility(node)
    except SchemaError as exc:
        raise _fail(str(exc)) from None
    out_device = "gpu" if device == "mixed" else device
    node.outputs = [DataNode(node, i, out_device) for i in range(schema.outputs_for(canonical))]
    return node
