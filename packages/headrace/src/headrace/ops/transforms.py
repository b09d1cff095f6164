"""Schemas of the affine transform generators (transforms.*): each makes an (ndim, ndim+1) float32 matrix, applied to
an optional input matrix, as DALI's; their output feeds warp_affine's `matrix` and coord_transform's `MT`."""

from __future__ import annotations

import numpy as np

from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

REVERSE_ORDER = Arg("reverse_order", "bool", False, "False: this op's transform is applied after the input's "
                    "(result = op @ input); True: before it (result = input @ op). Ignored without an input.")
CENTER = Arg("center", "float", None, "The point the transform keeps in place; one value per dimension.",
             list_of=True, tensor_input=True)


def _matrix(a: SpecArgs, ndim: int | None) -> list[OutputSpec]:
    """One float32 affine matrix of (ndim, ndim + 1) per sample."""
    if ndim is None and a.inputs and a.first.dims is not None and len(a.first.dims) == 2:
        ndim = a.first.dims[0]
    dims = (ndim, ndim + 1) if ndim is not None and ndim >= 0 else (-1, -1)
    return [OutputSpec(np.float32, "**", dims)]  # DALI names neither axis


def _from_arg(name: str):
    def spec(a: SpecArgs) -> list[OutputSpec]:
        values = a.literal(name)
        if values is not None and (len(values) > 1 or not a.inputs):
            return _matrix(a, len(values))
        return _matrix(a, None)
    spec.__doc__ = f"One float32 affine matrix of (ndim, ndim + 1) per sample, ndim from `{name}` or the input."
    return spec


def _scale_spec(a: SpecArgs) -> list[OutputSpec]:
    """One float32 affine matrix of (ndim, ndim + 1) per sample, ndim from `scale`, `ndim` or the input."""
    values = a.literal("scale")
    if values is not None and len(values) > 1:
        return _matrix(a, len(values))
    if a.inputs:
        return _matrix(a, None)
    return _matrix(a, a.args["ndim"] or (1 if values is not None else None))


def _rotation_spec(a: SpecArgs) -> list[OutputSpec]:
    """One float32 affine matrix per sample: (3, 4) when `axis` is given, else (2, 3)."""
    return _matrix(a, 3 if a.args["axis"] is not None or "axis" in a.per_sample else 2)


def _shear_spec(a: SpecArgs) -> list[OutputSpec]:
    """One float32 affine matrix per sample: (2, 3) from 2 shear values, (3, 4) from 6."""
    values = a.literal("shear") or a.literal("angles")
    return _matrix(a, {2: 2, 6: 3}.get(len(values)) if values is not None else None)


def _crop_spec(a: SpecArgs) -> list[OutputSpec]:
    """One float32 affine matrix of (ndim, ndim + 1) per sample, ndim the longest of the four corners."""
    names = ("from_start", "from_end", "to_start", "to_end")
    if any(n in a.per_sample for n in names):
        return _matrix(a, None)
    longest = max(len(a.args[n]) for n in names)
    return _matrix(a, longest if longest > 1 or not a.inputs else None)


def _combined(a: SpecArgs) -> list[OutputSpec]:
    """One float32 affine matrix per sample, of the inputs' (ndim, ndim + 1)."""
    return _matrix(a, None)


def _shear_rule(given: frozenset[str]) -> str | None:
    if "shear" in given and "angles" in given:
        return "give `shear` or `angles`, not both"
    if "shear" not in given and "angles" not in given:
        return "give `shear` or `angles`"
    return None


def _generator(name: str, doc: str, args: tuple, spec, rule=None) -> None:
    register(OpSchema(name=name, doc=doc + " With an input matrix, the transform is combined with it "
                                           "(see reverse_order).",
                      args=(*args, REVERSE_ORDER), min_inputs=0, max_inputs=1, devices=("cpu", "gpu"),
                      state="none", output_spec=spec, rule=rule))


_generator("transforms.translation", "An affine matrix that translates by `offset`; ndim is its length.",
           (Arg("offset", "float", REQUIRED, "The translation vector.", list_of=True, tensor_input=True),),
           _from_arg("offset"))
_generator("transforms.scale", "An affine matrix that scales by `scale` per dimension, about `center` (default "
           "the origin).",
           (Arg("scale", "float", REQUIRED, "Scale factor per dimension (one value: the same for all).",
                list_of=True, tensor_input=True), CENTER,
            Arg("ndim", "int", None, "Number of dimensions where `scale` is one value and there is no input.")),
           _scale_spec)
_generator("transforms.rotation", "An affine matrix that rotates by `angle` degrees (counter-clockwise for x right, "
           "y up) about `center`; 3D about `axis` when it is given.",
           (Arg("angle", "float", REQUIRED, "Angle in degrees.", tensor_input=True),
            Arg("axis", "float", None, "Axis of a 3D rotation (any non-zero length).", list_of=True, list_len=(3, 3),
                tensor_input=True), CENTER),
           _rotation_spec)
_generator("transforms.shear", "An affine matrix that shears by factors `shear` (or `angles` in degrees, factor "
           "tan(angle)): 2 values (x, y) for 2D, 6 (xy, xz, yx, yz, zx, zy) for 3D.",
           (Arg("shear", "float", None, "Shear factors.", list_of=True, list_len=(2, 6), tensor_input=True),
            Arg("angles", "float", None, "Shear angles in degrees, in (-90, 90).", list_of=True, list_len=(2, 6),
                tensor_input=True), CENTER),
           _shear_spec, _shear_rule)
_CORNER = "One value per dimension, or one for all."
_generator("transforms.crop", "An affine matrix that maps the box [from_start, from_end] onto [to_start, to_end] "
           "(to adjust coordinates after a crop).",
           (Arg("from_start", "float", [0.0], "Lower corner of the source box. " + _CORNER, list_of=True,
                tensor_input=True),
            Arg("from_end", "float", [1.0], "Upper corner of the source box. " + _CORNER, list_of=True,
                tensor_input=True),
            Arg("to_start", "float", [0.0], "Lower corner of the destination box. " + _CORNER, list_of=True,
                tensor_input=True),
            Arg("to_end", "float", [1.0], "Upper corner of the destination box. " + _CORNER, list_of=True,
                tensor_input=True),
            Arg("absolute", "bool", False, "Swap a start and an end where the start is the larger.")),
           _crop_spec)

register(OpSchema(
    name="transforms.combine",
    doc="Combines two or more affine matrices (inputs) into one: by default applying the result equals applying "
        "the inputs in the order listed (T3(T2(T1(x)))); with reverse_order the opposite (T1(T2(T3(x)))).",
    args=(REVERSE_ORDER,),
    min_inputs=2, max_inputs=99, devices=("cpu", "gpu"), state="none", output_spec=_combined,
))
