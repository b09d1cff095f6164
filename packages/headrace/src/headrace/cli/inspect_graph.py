"""`headrace inspect FILE`: the graph of a pipeline file as text (ops, devices, arguments, inputs and outputs,
random and stateful ops) and, with --out, as a picture (SVG or PNG)."""

from __future__ import annotations

import argparse
import enum
from pathlib import Path

from headrace.cli.common import CliError, add_command, say
from headrace.cli.loading import add_loading_options, load_pipeline
from headrace.graph import OpNode, needed_nodes
from headrace.schema import OutputSpec

PICTURE_FORMATS = (".svg", ".png")


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "inspect", "the graph of a pipeline file as text, and as a picture with --out",
                         main)
    add_loading_options(parser)
    parser.add_argument("--out", type=Path, help="also draw the graph to this .svg or .png file")
    parser.add_argument("--all-args", action="store_true", help="list every argument, defaults included")


def _value(value) -> str:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value)


def _ref(node: OpNode, index: int) -> str:
    return f"{node.name}:{index}" if len(node.outputs) > 1 else node.name


def edge_specs(nodes: list[OpNode]) -> dict[tuple[str, int], OutputSpec]:
    """What flows along each edge: the output spec of every node output, by (node name, output index)."""
    return {(node.name, index): spec for node in nodes for index, spec in enumerate(node.output_specs)}


def node_traits(node: OpNode) -> list[str]:
    """'random' / 'stateful' and what a checkpoint keeps of the node."""
    traits = []
    if node.schema.random:
        traits.append("random")
    if node.schema.stateful:
        traits.append(f"stateful ({node.schema.state})")
    return traits


def describe(nodes: list[OpNode], outputs, params: dict, all_args: bool = False) -> list[str]:
    """The text form of a graph: one block per node in execution order, then outputs, random and stateful ops;
    edges are labelled with their output specs."""
    edges = edge_specs(nodes)
    readers_of: dict[tuple[str, int], list[str]] = {}
    for node in nodes:
        for data in node.inputs:
            readers_of.setdefault((data.op.name, data.index), []).append(node.name)
        for arg, data in node.arg_inputs.items():
            readers_of.setdefault((data.op.name, data.index), []).append(f"{node.name} (argument {arg})")
    for position, out in enumerate(outputs):
        readers_of.setdefault((out.op.name, out.index), []).append(f"pipeline output {position}")
    needed = {n.name for n in needed_nodes(nodes, outputs)}

    lines = ["parameters: " + "  ".join(f"{k}={v}" for k, v in params.items()),
             f"{len(nodes)} nodes, in execution order:"]
    for node in nodes:
        traits = node_traits(node) + ([] if node.name in needed else ["unused"])
        lines.append(f"  {node.name}  [{node.schema.name}]  device={node.device}"
                     + (f"  {', '.join(traits)}" if traits else ""))
        if node.inputs:
            lines.append("      inputs:  " + ", ".join(
                f"{_ref(d.op, d.index)} ({edges[(d.op.name, d.index)].label})" for d in node.inputs))
        for arg, data in node.arg_inputs.items():
            lines.append(f"      argument input: {arg} <- {_ref(data.op, data.index)} "
                         f"({edges[(data.op.name, data.index)].label})")
        shown = {name: node.arg(name) for name in node.schema.all_args if name not in ("device", "name")} \
            if all_args else node.args
        shown = {k: v for k, v in shown.items() if k not in node.arg_inputs}
        if shown:
            lines.append("      args:    " + "  ".join(f"{k}={_value(v)}" for k, v in sorted(shown.items())))
        for index in range(len(node.outputs)):
            consumers = readers_of.get((node.name, index), [])
            lines.append(f"      output {index}: {edges[(node.name, index)].label}"
                         + (f" -> {', '.join(consumers)}" if consumers else " (not read)"))
    lines.append("outputs:")
    lines += [f"  {i}: {_ref(o.op, o.index)} ({edges[(o.op.name, o.index)].label}, on {o.device})"
              for i, o in enumerate(outputs)]
    randoms = [n.name for n in nodes if n.schema.random]
    stateful = [n.name for n in nodes if n.schema.stateful]
    lines.append("random ops (draws keyed by seed, node and sample): " + (", ".join(randoms) or "none"))
    lines.append("stateful ops (kept in a checkpoint): " + (", ".join(stateful) or "none"))
    return lines


def main(args: argparse.Namespace) -> int:
    if args.out is not None and args.out.suffix.lower() not in PICTURE_FORMATS:
        raise CliError(f"--out {args.out}: the picture must be a {' or '.join(PICTURE_FORMATS)} file")
    loaded = load_pipeline(args, for_running=False)
    pipe = loaded.pipe
    say(f"pipeline file: {loaded.path}" + (f" ({'; '.join(loaded.changes)})" if loaded.changes else ""))
    for line in describe(pipe.graph.nodes, pipe.outputs, pipe.params, args.all_args):
        say(line)
    if args.out is not None:
        from headrace.cli.graph_picture import draw

        width, height = draw(pipe.graph.nodes, pipe.outputs, args.out)
        say(f"graph picture written to {args.out} ({width} x {height} px)")
    return 0
