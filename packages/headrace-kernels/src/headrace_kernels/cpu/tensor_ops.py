"""CPU kernels of stack, cat, reshape, transpose, one_hot (per sample) and pad (whole batch)."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.axes import resolve_axes
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def _same_type(arrays: list[np.ndarray], op: str) -> None:
    types = {a.dtype for a in arrays}
    if len(types) > 1:
        raise ValueError(f"{op}: inputs have different types {sorted(str(t) for t in types)}")


def _no_layout_hint(layout: str) -> str:
    return " (it has none: give its source a layout, e.g. external_source(layout=...))" if not layout else ""


def join_axis(op: str, ndim: int, args: dict, layouts: tuple[str, ...]) -> int:
    """The axis stack / cat (CPU and GPU) work on for `ndim`-dimensional inputs, checked as DALI checks it: stack's
    new axis `axis` in [-ndim, ndim] (an `axis_name` needs the first input's layout unless the inputs are scalars);
    cat's `axis`, or the letter `axis_name` looked up in the first input's layout."""
    layout = layouts[0] if layouts else ""
    name, axis = args["axis_name"], args["axis"]
    if op == "stack":
        if not -ndim <= axis <= ndim:
            raise ValueError(f"stack: axis {axis} is out of range [{-ndim}, {ndim}] for {ndim}-dimensional inputs")
        if name is not None and ndim and not layout:
            raise ValueError(f"stack: axis_name {name!r} names the new axis in the first input's layout, which "
                             f"non-scalar inputs need{_no_layout_hint(layout)}")
        return axis
    if name is None:
        return axis
    if name not in layout:
        raise ValueError(f"cat: axis_name {name!r} is not an axis of the first input's layout {layout!r}"
                         f"{_no_layout_hint(layout)}")
    return layout.index(name)


@cpu_kernel("stack")
def stack(inputs, args, ctx):
    arrays = [np.asarray(x) for x in inputs]
    _same_type(arrays, "stack")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"stack: inputs have different shapes {sorted(shapes)}")
    return np.stack(arrays, axis=join_axis("stack", arrays[0].ndim, args, ctx.input_layouts))


@cpu_kernel("cat")
def cat(inputs, args, ctx):
    arrays = [np.asarray(x) for x in inputs]
    _same_type(arrays, "cat")
    ndim = arrays[0].ndim
    axis = join_axis("cat", ndim, args, ctx.input_layouts)
    if any(a.ndim != ndim for a in arrays) or not -ndim <= axis < ndim:
        raise ValueError(f"cat: axis {axis} with input shapes {[a.shape for a in arrays]}")
    rest = {a.shape[:axis % ndim] + a.shape[axis % ndim + 1:] for a in arrays}
    if len(rest) > 1:
        raise ValueError(f"cat: extents other than axis {axis} differ: {[a.shape for a in arrays]}")
    return np.concatenate(arrays, axis=axis)


def infer_shape(shape: list[int], size: int, given: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with its -1 extent (at most one) inferred for `size` elements; ValueError naming `given` if none fits."""
    unknown = [i for i, n in enumerate(shape) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in shape):
        raise ValueError(f"shape {shape}: at most one extent may be -1 and none may be negative")
    if unknown:
        known = int(np.prod([n for n in shape if n != -1]))
        if known == 0 or size % known:
            raise ValueError(f"cannot infer the -1 extent of {shape} for {size} elements (input shape {given})")
        shape = [size // known if n == -1 else n for n in shape]
    if int(np.prod(shape)) != size:
        raise ValueError(f"shape {shape} has {int(np.prod(shape))} elements; the input {given} has {size}")
    return tuple(shape)


@cpu_kernel("reshape")
def reshape(inputs, args, ctx):
    data = np.asarray(inputs[0])
    given = [args[k] is not None for k in ("shape", "rel_shape", "src_dims")]
    if sum(given) > 1:
        raise ValueError("give only one of shape, rel_shape and src_dims")
    if args["src_dims"] is not None:
        dims = args["src_dims"]
        kept = [d for d in dims if d != -1]
        if any(not 0 <= d < data.ndim for d in kept) or len(set(kept)) != len(kept):
            raise ValueError(f"src_dims {dims} for a {data.ndim}-dimensional input")
        dropped = [d for d in range(data.ndim) if d not in kept]
        if any(data.shape[d] != 1 for d in dropped):
            raise ValueError(f"src_dims {dims} drops axes of extent > 1 (input shape {data.shape})")
        # like every reshape, src_dims only relabels extents: the elements keep their order (as in DALI)
        return data.reshape([1 if d == -1 else data.shape[d] for d in dims])
    if args["rel_shape"] is not None:
        rel = args["rel_shape"]
        if len(rel) != data.ndim:
            raise ValueError(f"rel_shape {rel} needs one value per input axis ({data.ndim})")
        shape = [-1 if r == -1 else int(round(r * n)) for r, n in zip(rel, data.shape, strict=True)]
        return data.reshape(infer_shape(shape, data.size, data.shape))
    if args["shape"] is None:  # only a layout (DALI relabels the data): the shape kept
        return data
    return data.reshape(infer_shape(list(args["shape"]), data.size, data.shape))


def transpose_perm(ndim: int, perm: list[int] | None, shape: tuple) -> list[int]:
    """`perm` checked against a sample's axes (CPU and GPU); None (transpose's default) reverses them."""
    if perm is None:
        return list(range(ndim))[::-1]
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"perm {list(perm)} is not a permutation of the {ndim} axes of shape {shape}")
    return list(perm)


@cpu_kernel("transpose")
def transpose(inputs, args, ctx):
    data = np.asarray(inputs[0])
    return np.ascontiguousarray(data.transpose(transpose_perm(data.ndim, args["perm"], data.shape)))


def one_hot_axis(ndim: int, args: dict, layout: str) -> int:
    """Where one_hot's new axis goes for labels of `ndim` dimensions (after a one-element label became a scalar),
    checked as DALI checks it: `axis` in [-1, ndim]; an `axis_name` needs a layout of the labels' dimensions."""
    axis = args["axis"]
    if not -1 <= axis <= ndim:
        raise ValueError(f"one_hot: axis {axis} is out of range [-1, {ndim}] for {ndim}-dimensional labels")
    name = args["axis_name"]
    if name is not None and ndim and len(layout) != ndim:
        raise ValueError(f"one_hot: axis_name {name!r} is inserted into the input's layout, which must have "
                         f"{ndim} letters for {ndim}-dimensional labels; it is {layout!r}{_no_layout_hint(layout)}")
    return ndim if axis == -1 else axis


@cpu_kernel("one_hot")
def one_hot(inputs, args, ctx):
    labels = np.asarray(inputs[0])
    if labels.dtype.kind == "f":  # truncated toward zero, as DALI casts them; NaN and infinities match no class
        labels = np.where(np.isfinite(labels), np.trunc(labels), -1).astype(np.int64)
    elif labels.dtype.kind not in "iub":
        raise ValueError(f"one_hot needs numeric class labels, got {labels.dtype}")
    classes = args["num_classes"]
    if classes < 0:
        raise ValueError(f"num_classes must be 0 or more, got {classes}")
    if labels.ndim == 1 and labels.size == 1:
        labels = labels.reshape(())  # a one-element label is a scalar, as in DALI
    axis = one_hot_axis(labels.ndim, args, ctx.input_layouts[0] if ctx.input_layouts else "")
    hot = labels[..., None] == np.arange(classes)
    values = np.where(hot, args["on_value"], args["off_value"])
    return saturate_cast(np.moveaxis(values, -1, axis), numpy_dtype(args["dtype"]))


def pad_axes(args: dict, ndim: int, layout: str) -> list[int]:
    """The axes pad grows: `axes`, else the letters `axis_names` in the input's `layout` (only where the graph did not
    know the layout to resolve them; DALI refuses a letter the layout lacks), else all."""
    names = args["axis_names"]
    if args["axes"] is not None or names is None:
        return resolve_axes(args["axes"], None, ndim)
    missing = "".join(n for n in names if n not in layout)
    if missing:
        raise ValueError(f"pad: axis_names {names!r}: {missing!r} is not an axis of the input's layout {layout!r}"
                         f"{_no_layout_hint(layout)}")
    return [layout.index(n) for n in names]


def pad_extents(shapes: list[tuple[int, ...]], batch_args: list[dict], layout: str = "") -> list[tuple[int, ...]]:
    """The padded shape of every sample (CPU and GPU kernels): its `axes` grown to the batch's largest extent (or
    the sample's `shape`, -1 meaning the largest), aligned up to `align`; `layout` is the input's ('' if none)."""
    ndims = {len(s) for s in shapes}
    if len(ndims) > 1:
        raise ValueError(f"pad: samples have different numbers of dimensions {sorted(ndims)}")
    ndim = ndims.pop()
    args = batch_args[0]
    axes = pad_axes(args, ndim, layout)
    align = list(args["align"] or [1])
    if len(align) not in (1, len(axes)) or any(a < 1 for a in align):
        raise ValueError(f"align {align} needs one positive value or one per padded axis ({len(axes)})")
    align = align * len(axes) if len(align) == 1 else align
    largest = [max(s[a] for s in shapes) for a in axes]
    padded = []
    for index, (shape, sample_args) in enumerate(zip(shapes, batch_args, strict=True)):
        wanted = sample_args["shape"]
        if wanted is not None and len(wanted) != len(axes):
            raise ValueError(f"sample {index}: shape {wanted} needs one extent per padded axis ({len(axes)})")
        extents = list(shape)
        for k, axis in enumerate(axes):
            target = largest[k] if wanted is None or wanted[k] == -1 else wanted[k]
            target = -(-target // align[k]) * align[k]
            if target < shape[axis]:
                raise ValueError(f"sample {index}: shape {wanted} is smaller than the sample's extent "
                                 f"{shape[axis]} on axis {axis}")
            extents[axis] = target
        padded.append(tuple(extents))
    return padded


@cpu_kernel("pad")
def pad(batch_inputs, batch_args, contexts):
    """Whole batch: every sample's `axes` grow to the batch's largest extent (or `shape`), aligned up."""
    samples = [np.asarray(inputs[0]) for inputs in batch_inputs]
    if not samples:
        return []
    layouts = contexts[0].input_layouts if contexts else ()
    extents_all = pad_extents([s.shape for s in samples], batch_args, layouts[0] if layouts else "")
    outputs = []
    fills = {}
    for sample, extents in zip(samples, extents_all, strict=True):
        if sample.dtype not in fills:
            fills[sample.dtype] = saturate_cast(np.array(batch_args[0]["fill_value"], np.float64), sample.dtype)
        out = np.empty(extents, sample.dtype)
        out[tuple(slice(0, n) for n in sample.shape)] = sample
        for axis, n in enumerate(sample.shape):  # the padding: past the sample on each axis
            if extents[axis] > n:
                out[(slice(None),) * axis + (slice(n, None),)] = fills[sample.dtype]
        outputs.append(out)
    return outputs
