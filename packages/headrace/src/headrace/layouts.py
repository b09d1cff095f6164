"""Layouts known while the graph is built ("HWC", "CHW", ...), so that `axis_names` mean what they mean in DALI and
ops that read images in given layouts say so instead of reading the wrong axes.

A DataNode's layout is part of its output spec (the op schema's `output_spec`); None means unknown, and kernels then
assume a layout from the number of dimensions (HW, HWC, DHWC). `axis_names` are resolved into `axes` here when the
layout is known, so the pipeline file records the axes that were meant.
"""

from __future__ import annotations

from typing import Any

from headrace.errors import SchemaError
from headrace.schema import OpSchema


def resolve(schema: OpSchema, node: str, args: dict[str, Any], inputs: list) -> None:
    """Check and complete `args` against the first input's known layout: ops that read given layouts
    (`schema.input_layouts`) reject others, and `axis_names` (or the schema's `default_axis_names`) become `axes`."""
    layout = inputs[0].layout if inputs else None
    if layout is None:
        return
    if schema.sequence_input(layout):  # processed frame by frame: arguments are about a frame's axes
        layout = layout[1:]
    elif str(args.get("output_layout", "")).startswith("F"):
        raise SchemaError(f"{schema.name} (node '{node}'): output_layout {args['output_layout']!r} has a frame axis "
                          f"'F', but its input '{inputs[0].name}' ({layout}) is not a sequence")
    allowed = schema.input_layouts
    if allowed and layout not in allowed:
        raise SchemaError(f"{schema.name} (node '{node}') needs {' or '.join(allowed)} data, but its input "
                          f"'{inputs[0].name}' has layout {layout}: transpose it first "
                          f"(fn.transpose(x, perm=...))")
    if "axis_names" not in schema.all_args or "axes" in args:
        return
    names = args.get("axis_names") or schema.default_axis_names
    if not names:
        return
    missing = [n for n in names if n not in layout]
    if missing:
        raise SchemaError(f"{schema.name} (node '{node}'): axis_names {names!r} name {''.join(missing)!r}, which is "
                          f"not in the input's layout {layout!r}")
    args["axes"] = [layout.index(n) for n in names]
    args.pop("axis_names", None)
