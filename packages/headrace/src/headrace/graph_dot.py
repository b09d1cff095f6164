"""The graph as Graphviz DOT text, as DALI's `Pipeline.save_graph_to_dot_file` writes it: an edge from each op to
every op that reads its outputs (data or argument inputs); with `show_tensors`, a box per output between them."""

from __future__ import annotations

from headrace.graph import DataNode, OpNode

DEVICE_COLOURS = {"cpu": "blue", "mixed": "#b55e00", "gpu": "#76b900"}
"""The op colours of `use_colors`, by the device an op runs on."""


def _quoted(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tensor(data: DataNode) -> str:
    return f"{data.op.name}[{data.index}]_{data.device}"


def dot_text(nodes: list[OpNode], show_tensors: bool = False, use_colors: bool = False) -> str:
    """The DOT text of the ops `nodes` (in graph order)."""
    lines = ["digraph graphname {"]
    for node in nodes:
        if use_colors:
            lines.append(f'{_quoted(node.name)}[color="{DEVICE_COLOURS.get(node.device, "black")}"];')
        if show_tensors:
            for data in node.outputs:
                lines.append(f"{_quoted(_tensor(data))}[shape=box];")
                lines.append(f"{_quoted(node.name)} -> {_quoted(_tensor(data))}[label={data.index}];")
    for node in nodes:
        reads = [(str(k), data) for k, data in enumerate(node.inputs)]
        reads += [(arg, data) for arg, data in node.arg_inputs.items()]
        for label, data in reads:
            if show_tensors:
                lines.append(f'{_quoted(_tensor(data))} -> {_quoted(node.name)}[label="{label}"];')
            else:
                lines.append(f"{_quoted(data.op.name)} -> {_quoted(node.name)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
