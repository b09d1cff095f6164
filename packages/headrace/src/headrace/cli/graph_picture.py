"""The graph as a picture: networkx lays the nodes out in layers (topological generations), matplotlib draws them,
coloured by device, with each edge labelled by what flows along it."""

from __future__ import annotations

from pathlib import Path

from headrace.cli.common import need
from headrace.graph import DataNode, OpNode

DEVICE_COLOURS = {"cpu": "#9ecae1", "mixed": "#d4b9f0", "gpu": "#a1d99b"}
OUTPUT_COLOUR = "#e0e0e0"
DPI = 100
COLUMN_INCHES = 2.8
ROW_INCHES = 1.4
MARGIN_INCHES = 0.8


def canvas_inches(layers: int, widest: int) -> tuple[float, float]:
    """Width and height of the picture of a graph with `layers` rows, the widest holding `widest` nodes."""
    return (max(6.0, COLUMN_INCHES * widest + 2 * MARGIN_INCHES),
            max(3.0, ROW_INCHES * (layers - 1) + 2 * MARGIN_INCHES + 0.3))


def output_key(index: int) -> str:
    return f"output {index}"


def layered_graph(nodes: list[OpNode], outputs: list[DataNode]):
    """A networkx MultiDiGraph of the ops and the pipeline outputs, each node carrying its 'layer': ops by
    topological generation, the outputs together in the last row."""
    nx = need("networkx", "drawing the graph")
    graph = nx.MultiDiGraph()
    for node in nodes:
        graph.add_node(node.name, kind="op", op=node)
    for node in nodes:
        for data in node.inputs:
            graph.add_edge(data.op.name, node.name, spec=data.spec, arg=None)
        for arg, data in node.arg_inputs.items():
            graph.add_edge(data.op.name, node.name, spec=data.spec, arg=arg)
    generations = list(nx.topological_generations(graph))
    for layer, names in enumerate(generations):
        for name in names:
            graph.nodes[name]["layer"] = layer
    for index, out in enumerate(outputs):
        graph.add_node(output_key(index), kind="output", layer=len(generations))
        graph.add_edge(out.op.name, output_key(index), spec=out.spec, arg=None)
    return graph


def _positions(graph, layers: int, width: float, height: float) -> dict[str, tuple[float, float]]:
    """Evenly spaced rows, one per layer; within a row, nodes ordered by the mean position of the nodes they read
    (the barycentre heuristic), which keeps edges short and mostly uncrossed."""
    order = {name: i for i, name in enumerate(graph.nodes)}
    pos: dict[str, tuple[float, float]] = {}
    for layer in range(layers):
        row = [name for name, data in graph.nodes(data=True) if data["layer"] == layer]
        if layer:
            def barycentre(name: str) -> tuple[float, int]:
                sources = [pos[s][0] for s in graph.predecessors(name)]
                return (sum(sources) / len(sources) if sources else width / 2, order[name])

            row.sort(key=barycentre)
        y = height - MARGIN_INCHES - 0.3 - layer * ROW_INCHES
        for i, name in enumerate(row):
            pos[name] = (width / 2 + (i - (len(row) - 1) / 2) * COLUMN_INCHES, y)
    return pos


def _node_label(node: OpNode) -> str:
    name = node.name if len(node.name) <= 30 else node.name[:28] + "…"
    lines = [name, node.schema.name]
    traits = [t for t, on in (("random", node.schema.random), ("stateful", node.schema.stateful)) if on]
    if traits:
        lines.append(", ".join(traits))
    return "\n".join(lines)


def draw(nodes: list[OpNode], outputs: list[DataNode], path: Path) -> tuple[int, int]:
    """Draw the graph to `path` (.svg or .png); returns the picture's size (pixels for PNG, points for SVG)."""
    need("matplotlib", "drawing the graph")
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    graph = layered_graph(nodes, outputs)
    layers = 1 + max(data["layer"] for _, data in graph.nodes(data=True))
    widest = max(sum(1 for _, d in graph.nodes(data=True) if d["layer"] == k) for k in range(layers))
    width, height = canvas_inches(layers, widest)
    pos = _positions(graph, layers, width, height)
    centre = width / 2

    figure = Figure(figsize=(width, height), dpi=DPI)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(0, height)
    axes.axis("off")
    boxes = {}
    for name, data in graph.nodes(data=True):
        if data["kind"] == "op":
            node = data["op"]
            text, colour, style = _node_label(node), DEVICE_COLOURS.get(node.device, "white"), "round,pad=0.45"
        else:
            text, colour, style = name, OUTPUT_COLOUR, "round4,pad=0.35"
        boxes[name] = axes.text(*pos[name], text, ha="center", va="center", fontsize=8, zorder=2,
                                bbox={"boxstyle": style, "facecolor": colour, "edgecolor": "#404040"})
    seen: dict[tuple[str, str], int] = {}
    for source, target, data in graph.edges(data=True):
        repeat = seen[(source, target)] = seen.get((source, target), -1) + 1
        (x1, y1), (x2, y2) = pos[source], pos[target]
        span = graph.nodes[target]["layer"] - graph.nodes[source]["layer"]
        bend = 0.25 * repeat + (0.2 if span > 1 else 0.0)  # edges that skip rows bow outwards, past the nodes
        rad = -bend if (x1 + x2) / 2 >= centre else bend
        axes.annotate("", xy=pos[target], xytext=pos[source], zorder=3, arrowprops={
            "arrowstyle": "-|>", "color": "#303030", "lw": 1.0, "shrinkA": 1, "shrinkB": 1,
            "linestyle": "--" if data["arg"] else "-", "connectionstyle": f"arc3,rad={rad}",
            "patchA": boxes[source].get_bbox_patch(), "patchB": boxes[target].get_bbox_patch()})
        label = data["spec"].label
        if data["arg"]:
            label = f"{data['arg']}: {label}"
        mid_x, mid_y = (x1 + x2) / 2 + rad * (y2 - y1) / 2, (y1 + y2) / 2 - rad * (x2 - x1) / 2
        axes.text(mid_x, mid_y, label, ha="center", va="center", fontsize=7, color="#202020", zorder=4,
                  bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    used = sorted({d["op"].device for _, d in graph.nodes(data=True) if d["kind"] == "op"})
    handles = [Patch(facecolor=DEVICE_COLOURS.get(d, "white"), edgecolor="#404040", label=d) for d in used]
    handles.append(Patch(facecolor=OUTPUT_COLOUR, edgecolor="#404040", label="pipeline output"))
    axes.legend(handles=handles, loc="upper left", fontsize=7, title="device", title_fontsize=7, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    if path.suffix.lower() == ".svg":
        return round(width * 72), round(height * 72)
    return round(width * DPI), round(height * DPI)
