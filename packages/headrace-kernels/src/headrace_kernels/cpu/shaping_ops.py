"""CPU kernels of expand_dims, squeeze, reinterpret, cast_like, element_extract and lookup_table. The shape rules
are plain functions of shapes and arguments, shared with the GPU kernels, so both refuse the same samples with the
same messages."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from headrace_kernels.cpu.axes import default_layout
from headrace_kernels.cpu.convert import round_half_away, saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

MAX_KEY = 65535


def expanded_shape(shape: Sequence[int], axes: Sequence[int], names: str | None) -> tuple[int, ...]:
    """`shape` with unit axes at `axes` (positions in the output), DALI's checks."""
    ndim = len(shape) + len(axes)
    if names and len(names) != len(axes):
        raise ValueError(f"argument 'new_axis_names' {names!r} names {len(names)} axes, 'axes' {list(axes)} has "
                         f"{len(axes)}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"argument 'axes' {list(axes)} repeats an axis")
    bad = [x for x in axes if not 0 <= x < ndim]
    if bad:
        raise ValueError(f"argument 'axes' {list(axes)}: {bad[0]} is not an axis of the {ndim}-dimensional output "
                         f"(0 to {ndim - 1}) of a sample of shape {tuple(shape)}")
    given = iter(shape)
    return tuple(1 if i in axes else next(given) for i in range(ndim))


def squeezed_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """`shape` without `axes`, each of extent 1 (or the sample empty before and after), DALI's checks."""
    if len(set(axes)) != len(axes):
        raise ValueError(f"argument 'axes' {list(axes)} repeats an axis")
    bad = [x for x in axes if not 0 <= x < len(shape)]
    if bad:
        raise ValueError(f"argument 'axes' {list(axes)}: {bad[0]} is not an axis of a sample of shape {tuple(shape)}")
    out = tuple(n for i, n in enumerate(shape) if i not in axes)
    if any(shape[x] != 1 for x in axes) and not (math.prod(shape) == 0 and math.prod(out) == 0):
        raise ValueError(f"argument 'axes' {list(axes)}: a sample of shape {tuple(shape)} has an extent other than 1 "
                         "there (squeezing would change its size)")
    return out


def squeeze_axes(args: dict[str, Any], ndim: int) -> list[int]:
    """The axes to remove: `axes`, or `axis_names` read in the layout assumed for `ndim` dimensions (names are
    resolved into axes while the graph is built wherever the input's layout is known)."""
    if args.get("axes") is not None:
        return list(args["axes"])
    names, layout = args.get("axis_names") or "", default_layout(ndim)
    missing = [n for n in names if n not in layout]
    if missing:
        raise ValueError(f"argument 'axis_names' {names!r}: {''.join(missing)!r} not in the layout {layout!r} "
                         f"assumed for a {ndim}-dimensional sample; give `axes`, or a layout to the input")
    return [layout.index(n) for n in names]


def _inferred(extents: list[int], elements: int, what: str) -> tuple[int, ...]:
    """`extents` with its one negative entry worked out for `elements` elements."""
    unknown = [i for i, n in enumerate(extents) if n < 0]
    if len(unknown) > 1:
        raise ValueError(f"{what} {extents}: at most one extent may be negative (inferred)")
    if unknown:
        known = math.prod(n for n in extents if n >= 0)
        extents = list(extents)
        extents[unknown[0]] = elements // known if known else 0
    return tuple(extents)


def reinterpreted_shape(shape: Sequence[int], in_size: int, out_size: int, args: dict[str, Any],
                        shape_input: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of reinterpret for a sample of `shape` and element size `in_size` seen as elements of
    `out_size` bytes (DALI's rules); ValueError naming the argument when the bytes do not match."""
    shape = tuple(int(n) for n in shape)
    in_bytes = math.prod(shape) * in_size
    wanted = list(shape_input) if shape_input is not None else args.get("shape")
    rel, src = args.get("rel_shape"), args.get("src_dims")
    if wanted is not None and rel is not None:
        raise ValueError("arguments 'shape' and 'rel_shape' are mutually exclusive")
    if src is not None:
        bad = [d for d in src if not -1 <= d < len(shape)]
        if bad:
            raise ValueError(f"argument 'src_dims' {list(src)}: {bad[0]} is not an axis of a sample of shape {shape}")
    what = "argument 'shape'"
    if wanted is not None:
        out = _inferred([int(n) for n in wanted], in_bytes // out_size, what)
    elif rel is not None:
        what = "argument 'rel_shape'"
        if src is not None and len(src) != len(rel):
            raise ValueError(f"argument 'rel_shape' {list(rel)} needs one value per entry of 'src_dims' {list(src)}")
        sources = list(src) if src is not None else list(range(len(rel)))
        if src is None and len(rel) > len(shape) and not (len(rel) == len(shape) + 1 and rel[-1] < 0):
            raise ValueError(f"argument 'rel_shape' {list(rel)} has more values than a sample of shape {shape} has "
                             "axes (only a last, negative one may add an axis)")
        extents = []
        for r, d in zip(rel, sources, strict=True):
            base = 1 if d < 0 or d >= len(shape) else shape[d]
            extents.append(-1 if r < 0 else int(round_half_away(np.float32(r) * np.float32(base))))
        out = _inferred(extents, in_bytes // out_size, what)
    elif src is not None:
        what = "argument 'src_dims'"
        out = tuple(1 if d < 0 else shape[d] for d in src)
    elif in_size != out_size:
        if not shape:
            raise ValueError(f"a scalar of {in_size} bytes cannot be seen as elements of {out_size} bytes")
        if (shape[-1] * in_size) % out_size:
            raise ValueError(f"argument 'dtype': the innermost extent of a sample of shape {shape} "
                             f"({shape[-1] * in_size} bytes) is not a multiple of the new type's {out_size} bytes")
        out = (*shape[:-1], shape[-1] * in_size // out_size)
    else:
        out = shape
    if math.prod(out) * out_size != in_bytes:
        raise ValueError(f"{what}: shape {list(out)} of {out_size}-byte elements is {math.prod(out) * out_size} bytes; "
                         f"the sample of shape {list(shape)} is {in_bytes} bytes")
    return out


def check_layout(layout: str | None, ndim: int) -> None:
    """A given `layout` must have one letter per output dimension."""
    if layout and len(layout) != ndim:
        raise ValueError(f"argument 'layout' {layout!r} has {len(layout)} letters; the output has {ndim} dimensions")


def reinterpret_checks(args: dict[str, Any], num_inputs: int) -> None:
    """DALI refuses a reinterpret that changes nothing."""
    if num_inputs < 2 and all(args.get(k) is None for k in ("dtype", "shape", "rel_shape", "src_dims", "layout")):
        raise ValueError("reinterpret changes nothing: give dtype, shape, rel_shape, src_dims or layout")


def extract_indices(length: int, shape: Sequence[int], element_map: Sequence[int]) -> list[int]:
    """The elements of a sequence of `length` that element_map asks for, checked."""
    if len(shape) < 2:
        raise ValueError(f"element_extract needs sequences (an outer axis and at least one more), got shape "
                         f"{tuple(shape)}")
    for index in element_map:
        if not 0 <= index < length:
            raise ValueError(f"argument 'element_map' {list(element_map)}: {index} is not an element of a sequence "
                             f"of {length}")
    return list(element_map)


def lookup_table_array(args: dict[str, Any]) -> tuple[np.ndarray, np.generic, np.dtype]:
    """(table indexed by key, default value, output type): each value converted to the output type, the last of
    repeated keys winning."""
    keys, values = list(args["keys"] or []), list(args["values"] or [])
    if len(keys) != len(values):
        raise ValueError(f"arguments 'keys' ({len(keys)}) and 'values' ({len(values)}) must have the same length")
    if any(not 0 <= k <= MAX_KEY for k in keys):
        raise ValueError(f"argument 'keys': every key must be in [0, {MAX_KEY}]")
    dtype = numpy_dtype(args.get("output_dtype") if args.get("output_dtype") is not None else args["dtype"])
    default = saturate_cast(np.array([args["default_value"]], np.float32), dtype)[0]
    table = np.full(max(keys, default=-1) + 1, default, dtype=dtype)
    if keys:
        table[np.array(keys)] = saturate_cast(np.array(values, np.float32), dtype)
    return table, default, dtype


def check_lookup_input(dtype: np.dtype) -> None:
    if np.dtype(dtype).kind not in "iu":
        raise ValueError(f"lookup_table needs integer inputs (as DALI), got {np.dtype(dtype).name}")


@cpu_kernel("expand_dims")
def expand_dims(inputs, args, ctx):
    data = np.asarray(inputs[0])
    return data.reshape(expanded_shape(data.shape, args["axes"], args["new_axis_names"]))


@cpu_kernel("squeeze")
def squeeze(inputs, args, ctx):
    data = np.asarray(inputs[0])
    return data.reshape(squeezed_shape(data.shape, squeeze_axes(args, data.ndim)))


@cpu_kernel("reinterpret")
def reinterpret(inputs, args, ctx):
    reinterpret_checks(args, len(inputs))
    data = np.ascontiguousarray(inputs[0])
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else data.dtype
    shape_input = np.asarray(inputs[1]).ravel().tolist() if len(inputs) > 1 else None
    shape = reinterpreted_shape(data.shape, data.dtype.itemsize, dtype.itemsize, args, shape_input)
    check_layout(args.get("layout"), len(shape))
    return data.reshape(-1).view(dtype).reshape(shape) if data.size else np.empty(shape, dtype)


@cpu_kernel("cast_like")
def cast_like(inputs, args, ctx):
    return saturate_cast(np.asarray(inputs[0]), np.asarray(inputs[1]).dtype)


@cpu_kernel("element_extract")
def element_extract(inputs, args, ctx):
    data = np.asarray(inputs[0])
    indices = extract_indices(data.shape[0] if data.ndim else 0, data.shape, args["element_map"])
    outs = tuple(data[i].copy() for i in indices)
    return outs if len(outs) > 1 else outs[0]


@cpu_kernel("lookup_table")
def lookup_table(inputs, args, ctx):
    data = np.asarray(inputs[0])
    check_lookup_input(data.dtype)
    table, default, dtype = lookup_table_array(args)
    inside = (data >= 0) & (data < len(table))
    return np.where(inside, table[np.where(inside, data, 0).astype(np.intp)] if len(table) else default,
                    default).astype(dtype)
