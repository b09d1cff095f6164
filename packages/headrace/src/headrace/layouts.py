"""Layouts known while the graph is built ("HWC", "CHW", ...), so that `axis_names` mean what they mean in DALI and
ops that need images in a given layout say so instead of reading the wrong axes.

A DataNode's layout comes from where it was made (an external_source's `layout`, a decoder's HWC,
crop_mirror_normalize's `output_layout`, a transpose) and passes through ops that keep it; None means unknown, and
kernels then assume a layout from the number of dimensions (HW, HWC, DHWC). `axis_names` are resolved into `axes`
here when the layout is known, so the pipeline file records the axes that were meant.
"""

from __future__ import annotations

from typing import Any

from headrace.errors import SchemaError

KEEPS_LAYOUT = {"math.binary", "math.unary", "cast", "copy", "resize", "crop", "flip", "random_resized_crop",
                "gaussian_blur", "erase", "paste", "hsv", "color_twist", "brightness_contrast", "rotate",
                "warp_affine", "pad", "cat"}
IMAGE_LAYOUTS = {"gaussian_blur": ("HW", "HWC"), "hsv": ("HWC",), "color_twist": ("HWC",), "rotate": ("HW", "HWC"),
                 "warp_affine": ("HW", "HWC"), "paste": ("HWC",)}
DEFAULT_AXIS_NAMES = {"erase": "HW"}


def _input_layout(inputs: list) -> str | None:
    return getattr(inputs[0], "layout", None) if inputs else None


def output_layout(op: str, args: dict[str, Any], inputs: list) -> str | None:
    """The layout of the op's first output, when it can be known while building."""
    given = _input_layout(inputs)
    if op == "external_source" or op == "constant":
        return args.get("layout") or None
    if op.startswith("decoders."):
        return "HWC"
    if op == "crop_mirror_normalize":
        return args.get("output_layout", "CHW")
    if op in KEEPS_LAYOUT:
        return given
    if op == "_conditional.merge":
        other = getattr(inputs[1], "layout", None)
        return given if given == other else None
    if op == "transpose":
        if args.get("output_layout"):
            return args["output_layout"]
        perm = args.get("perm")
        if given and args.get("transpose_layout", True) and perm and sorted(perm) == list(range(len(given))):
            return "".join(given[p] for p in perm)
        return None
    if op == "reshape":
        return args.get("layout") or None
    if op.startswith("reductions."):
        axes = args.get("axes")
        if given is None or axes is None or args.get("keep_dims"):
            return given if args.get("keep_dims") else None
        dropped = {a % len(given) for a in axes}
        return "".join(c for i, c in enumerate(given) if i not in dropped)
    if op == "stack" and given and args.get("axis_name"):
        axis = args.get("axis", 0) % (len(given) + 1)
        return given[:axis] + args["axis_name"] + given[axis:]
    return None


def resolve(op: str, node: str, args: dict[str, Any], inputs: list, arg_names: dict) -> None:
    """Check and complete `args` against the input's known layout: `axis_names` become `axes`, and ops that read
    images in a given layout reject others."""
    layout = _input_layout(inputs)
    if layout is None:
        return
    allowed = IMAGE_LAYOUTS.get(op)
    if allowed and layout not in allowed:
        raise SchemaError(f"{op} (node '{node}') needs {' or '.join(allowed)} data, but its input "
                          f"'{inputs[0].name}' has layout {layout}: transpose it first "
                          f"(fn.transpose(x, perm=...))")
    if "axis_names" not in arg_names or "axes" in args:
        return
    names = args.get("axis_names") or DEFAULT_AXIS_NAMES.get(op)
    if not names:
        return
    missing = [n for n in names if n not in layout]
    if missing:
        raise SchemaError(f"{op} (node '{node}'): axis_names {names!r} name {''.join(missing)!r}, which is not in "
                          f"the input's layout {layout!r}")
    args["axes"] = [layout.index(n) for n in names]
    args.pop("axis_names", None)
