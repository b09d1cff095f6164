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


@cpu_kernel("stack")
def stack(inputs, args, ctx):
    arrays = [np.asarray(x) for x in inputs]
    _same_type(arrays, "stack")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"stack: inputs have different shapes {sorted(shapes)}")
    axis = args["axis"]
    if not -arrays[0].ndim - 1 <= axis <= arrays[0].ndim:
        raise ValueError(f"stack: axis {axis} is out of range for {arrays[0].ndim}-dimensional inputs")
    return np.stack(arrays, axis=axis)


@cpu_kernel("cat")
def cat(inputs, args, ctx):
    arrays = [np.asarray(x) for x in inputs]
    _same_type(arrays, "cat")
    axis = args["axis"]
    ndim = arrays[0].ndim
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


@cpu_kernel("transpose")
def transpose(inputs, args, ctx):
    data = np.asarray(inputs[0])
    perm = list(args["perm"])
    if sorted(perm) != list(range(data.ndim)):
        raise ValueError(f"perm {perm} is not a permutation of the {data.ndim} axes of shape {data.shape}")
    return np.ascontiguousarray(data.transpose(perm))


@cpu_kernel("one_hot")
def one_hot(inputs, args, ctx):
    labels = np.asarray(inputs[0])
    if labels.dtype.kind not in "iub":
        if labels.dtype.kind != "f" or not np.all(labels == np.round(labels)):
            raise ValueError(f"one_hot needs integer class labels, got {labels.dtype}")
        labels = labels.astype(np.int64)
    classes = args["num_classes"]
    if classes <= 0:
        raise ValueError(f"num_classes must be positive, got {classes}")
    if labels.ndim == 1 and labels.size == 1:
        labels = labels.reshape(())  # a one-element label is a scalar, as in DALI
    axis = args["axis"]
    ndim = labels.ndim + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for a {ndim}-dimensional output")
    hot = labels[..., None] == np.arange(classes)
    values = np.where(hot, args["on_value"], args["off_value"])
    return saturate_cast(np.moveaxis(values, -1, axis % ndim), numpy_dtype(args["dtype"]))


def pad_extents(shapes: list[tuple[int, ...]], batch_args: list[dict]) -> list[tuple[int, ...]]:
    """The padded shape of every sample (CPU and GPU kernels): its `axes` grown to the batch's largest extent (or
    the sample's `shape`, -1 meaning the largest), aligned up to `align`."""
    ndims = {len(s) for s in shapes}
    if len(ndims) > 1:
        raise ValueError(f"pad: samples have different numbers of dimensions {sorted(ndims)}")
    ndim = ndims.pop()
    args = batch_args[0]
    axes = resolve_axes(args["axes"], args["axis_names"], ndim)
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
    outputs = []
    for sample, extents in zip(samples, pad_extents([s.shape for s in samples], batch_args), strict=True):
        out = saturate_cast(np.full(extents, batch_args[0]["fill_value"], dtype=np.float64), sample.dtype)
        out[tuple(slice(0, n) for n in sample.shape)] = sample
        outputs.append(out)
    return outputs
