"""CPU kernels of transforms.*: affine matrices built in float64 on the host, chained onto an input matrix, written
as (ndim, ndim + 1) float32, as DALI's. The builders are shared with the GPU kernels."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from headrace_kernels.cpu.warp_ops import cos_sin_f32
from headrace_kernels.registry import cpu_kernel


def values(args: dict, name: str) -> np.ndarray | None:
    """Argument `name` as a flat float64 vector (a literal list or a per-sample array), None when not given."""
    value = args.get(name)
    return None if value is None else np.asarray(value, dtype=np.float64).ravel()


def input_ndim(inputs: list) -> int | None:
    """The ndim of the input matrix, checked to be (ndim, ndim + 1); None without an input."""
    if not inputs:
        return None
    matrix = np.asarray(inputs[0])
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] != matrix.shape[0] + 1:
        raise ValueError(f"the input must be an affine matrix of shape (ndim, ndim + 1), got shape {matrix.shape}")
    return matrix.shape[0]


def broadcast(vector: np.ndarray, ndim: int, name: str) -> np.ndarray:
    """`vector` of ndim values: one value repeated, else exactly ndim."""
    if vector.size == 1:
        return np.full(ndim, vector[0])
    if vector.size != ndim:
        raise ValueError(f"argument '{name}' needs 1 or {ndim} values (the transform is {ndim}D), got {vector.size}")
    return vector


def homogeneous(linear: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
    """The (ndim + 1) square matrix of x -> linear @ x + shift."""
    ndim = linear.shape[0]
    out = np.eye(ndim + 1)
    out[:ndim, :ndim] = linear
    if shift is not None:
        out[:ndim, ndim] = shift
    return out


def lifted(matrix) -> np.ndarray:
    """The (ndim + 1) square matrix of an (ndim, ndim + 1) affine matrix."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return homogeneous(matrix[:, :-1], matrix[:, -1])


def about_center(linear: np.ndarray, args: dict) -> np.ndarray:
    """The homogeneous matrix of `linear` applied about `center` (x -> L (x - c) + c), the origin if not given."""
    center = values(args, "center")
    ndim = linear.shape[0]
    if center is None:
        return homogeneous(linear)
    center = broadcast(center, ndim, "center")
    return homogeneous(linear, center - linear @ center)


def translation(args: dict, ndim: int | None) -> np.ndarray:
    offset = values(args, "offset")
    if ndim is not None:
        offset = broadcast(offset, ndim, "offset")
    return homogeneous(np.eye(offset.size), offset)


def scale(args: dict, ndim: int | None) -> np.ndarray:
    factors = values(args, "scale")
    if ndim is None:
        ndim = factors.size if factors.size > 1 or args.get("ndim") is None else int(args["ndim"])
    if ndim < 1:
        raise ValueError(f"argument 'ndim' must be at least 1, got {ndim}")
    return about_center(np.diag(broadcast(factors, ndim, "scale")), args)


def rotation(args: dict, ndim: int | None) -> np.ndarray:
    degrees = float(np.asarray(args["angle"]).ravel()[0])
    angle = math.radians(degrees)
    cos, sin = math.cos(angle), math.sin(angle)
    axis = values(args, "axis")
    want = 2 if axis is None else 3
    if ndim is not None and ndim != want:
        raise ValueError(f"a {want}D rotation ({'no axis' if axis is None else 'axis given'}) cannot apply to a "
                         f"{ndim}D input matrix")
    if axis is None:
        return rotation_2d(degrees, values(args, "center"))
    if axis.size != 3:
        raise ValueError(f"argument 'axis' needs 3 values, got {axis.size}")
    norm = float(np.linalg.norm(axis))
    if norm == 0:
        raise ValueError("argument 'axis' must have a non-zero length")
    k = axis / norm
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return about_center(cos * np.eye(3) + sin * cross + (1 - cos) * np.outer(k, k), args)  # Rodrigues


def rotation_2d(degrees: float, center: np.ndarray | None) -> np.ndarray:
    """DALI's 2D rotation matrix, in float32 as DALI builds it (cosf / sinf of float32 radians, the shift
    c - R c in float32), so that a nearest warp by it picks DALI's pixels."""
    cos, sin = cos_sin_f32(degrees)
    linear = np.array([[cos, -sin], [sin, cos]], np.float32)
    if center is None:
        return homogeneous(linear.astype(np.float64))
    c = broadcast(center, 2, "center").astype(np.float32)
    shift = c - np.array([linear[0, 0] * c[0] + linear[0, 1] * c[1], linear[1, 0] * c[0] + linear[1, 1] * c[1]],
                         np.float32)
    return homogeneous(linear.astype(np.float64), shift.astype(np.float64))


def shear(args: dict, ndim: int | None) -> np.ndarray:
    factors, name = values(args, "shear"), "shear"
    if factors is None:
        angles, name = values(args, "angles"), "angles"
        if angles is None:
            raise ValueError("give 'shear' or 'angles'")
        if np.any(np.abs(angles) >= 90):
            raise ValueError(f"argument 'angles' must lie in (-90, 90) degrees, got {angles.tolist()}")
        factors = np.tan(np.radians(angles))
    dims = {2: 2, 6: 3}.get(factors.size)
    if dims is None:
        raise ValueError(f"argument '{name}' needs 2 values (2D) or 6 (3D), got {factors.size}")
    if ndim is not None and ndim != dims:
        raise ValueError(f"argument '{name}' gives a {dims}D shear, the input matrix is {ndim}D")
    if dims == 2:
        linear = np.array([[1, factors[0]], [factors[1], 1]])
    else:
        xy, xz, yx, yz, zx, zy = factors
        linear = np.array([[1, xy, xz], [yx, 1, yz], [zx, zy, 1]])
    return about_center(linear, args)


def crop(args: dict, ndim: int | None) -> np.ndarray:
    names = ("from_start", "from_end", "to_start", "to_end")
    corners = {n: values(args, n) for n in names}
    if ndim is None:
        ndim = max(v.size for v in corners.values())
    start, end, to_start, to_end = (broadcast(corners[n], ndim, n) for n in names)
    if args.get("absolute"):
        start, end = np.minimum(start, end), np.maximum(start, end)
        to_start, to_end = np.minimum(to_start, to_end), np.maximum(to_start, to_end)
    extent = end - start
    if np.any(extent == 0):
        raise ValueError(f"arguments 'from_start' and 'from_end' must differ in every dimension, got "
                         f"{start.tolist()} and {end.tolist()}")
    factors = (to_end - to_start) / extent
    return homogeneous(np.diag(factors), to_start - factors * start)


BUILDERS: dict[str, Callable[[dict, int | None], np.ndarray]] = {
    "transforms.translation": translation, "transforms.scale": scale, "transforms.rotation": rotation,
    "transforms.shear": shear, "transforms.crop": crop,
}


def chained(op: str, inputs: list, args: dict) -> np.ndarray:
    """The (ndim, ndim + 1) float32 matrix of generator `op`, combined with the input matrix if there is one."""
    ndim = input_ndim(inputs)
    own = BUILDERS[op](args, ndim)
    if ndim is not None:
        given = lifted(inputs[0])
        own = given @ own if args.get("reverse_order") else own @ given
    return own[:-1].astype(np.float32)


def combined(inputs: list, args: dict) -> np.ndarray:
    """transforms.combine: the product of the input matrices, last listed applied last (first with reverse_order)."""
    ndims = [input_ndim([m]) for m in inputs]
    if len(set(ndims)) != 1:
        raise ValueError(f"the input matrices must all have one shape, got {[np.shape(m) for m in inputs]}")
    out = np.eye(ndims[0] + 1)
    for matrix in map(lifted, inputs):
        out = out @ matrix if args.get("reverse_order") else matrix @ out
    return out[:-1].astype(np.float32)


def _generator_kernel(op: str):
    @cpu_kernel(op)
    def kernel(inputs, args, ctx):
        return chained(op, inputs, args)

    kernel.__doc__ = f"The {op} matrix of this sample's arguments, chained onto the input matrix if given."
    return kernel


for _op in BUILDERS:
    _generator_kernel(_op)


@cpu_kernel("transforms.combine")
def combine(inputs, args, ctx):
    return combined(inputs, args)
