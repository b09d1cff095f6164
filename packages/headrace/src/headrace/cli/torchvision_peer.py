"""The torchvision equivalent of a pipeline, for `headrace bench --vs torchvision`: the ResNet-50 training and
validation pipelines (file reader, decoder, resize, crop_mirror_normalize) map onto ImageFolder, a DataLoader and
transforms.v2. Anything else is refused with the reason."""

from __future__ import annotations

import dataclasses

from headrace.cli.common import CliError
from headrace.graph import DataNode, OpNode
from headrace.pipeline import Pipeline
from headrace.types import DALIDataType, DALIImageType, DALIInterpType

_INTERP = {DALIInterpType.INTERP_LINEAR: "BILINEAR", DALIInterpType.INTERP_TRIANGULAR: "BILINEAR",
           DALIInterpType.INTERP_CUBIC: "BICUBIC", DALIInterpType.INTERP_NN: "NEAREST"}
_DTYPES = {DALIDataType.FLOAT: "float32", DALIDataType.FLOAT16: "float16"}


@dataclasses.dataclass
class TorchvisionPlan:
    """What the torchvision side runs: ImageFolder on `root`, these transforms, a DataLoader."""

    root: str
    shuffle: bool
    steps: list[tuple[str, dict]]  # (transforms.v2 class name, keyword arguments), in order
    mean: list[float]
    std: list[float]
    dtype: str

    def describe(self) -> str:
        names = [f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})" for name, kwargs in self.steps]
        names += ["PILToTensor()", "ToDtype(float32, scale=True)", "Normalize(mean/255, std/255)"]
        if self.dtype != "float32":
            names.append(f"ToDtype({self.dtype})")
        return f"ImageFolder({self.root!r}) -> " + ", ".join(names)


def _refuse(reason: str) -> CliError:
    return CliError(f"no torchvision equivalent for this pipeline: {reason} (--vs torchvision knows the ResNet-50 "
                    "training and validation pipelines of `headrace demo`)")


def _pair(values: list[float]) -> list[float]:
    """A (low, high) range; one value means a fixed one."""
    return [values[0], values[0]] if len(values) == 1 else list(values)


def _only_input(node: OpNode, op: str | tuple[str, ...]) -> OpNode:
    ops = (op,) if isinstance(op, str) else op
    if len(node.inputs) != 1 or node.inputs[0].op.schema.name not in ops:
        raise _refuse(f"'{node.name}' ({node.schema.name}) does not read a {' or '.join(ops)} node")
    return node.inputs[0].op


def match(pipe: Pipeline) -> TorchvisionPlan:
    """The torchvision plan of `pipe`: outputs (images, labels) from reader -> decoder -> resize -> normalize."""
    outputs: list[DataNode] = pipe.outputs
    if len(outputs) != 2:
        raise _refuse(f"it has {len(outputs)} outputs, not (images, labels)")
    normalize, labels = outputs[0].op, outputs[1]
    if normalize.schema.name != "crop_mirror_normalize":
        raise _refuse(f"output 0 comes from {normalize.schema.name}, not crop_mirror_normalize")
    if labels.op.schema.name != "readers.file" or labels.index != 1:
        raise _refuse("output 1 is not the file reader's labels")
    if {"mean", "std", "crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y"} & set(normalize.arg_inputs):
        raise _refuse("crop_mirror_normalize takes mean, std or its crop window per sample")
    if normalize.arg("output_layout") != "CHW" or normalize.arg("pad_output"):
        raise _refuse("crop_mirror_normalize does not write plain CHW")
    if normalize.arg("scale") != 1.0 or normalize.arg("shift") != 0.0:
        raise _refuse("crop_mirror_normalize uses scale or shift")
    if normalize.arg("dtype") not in _DTYPES:
        raise _refuse(f"crop_mirror_normalize writes {normalize.arg('dtype').name}")
    resize = _only_input(normalize, "resize")
    decoder = _only_input(resize, ("decoders.image", "decoders.image_random_crop"))
    reader = _only_input(decoder, "readers.file")
    if reader is not labels.op or decoder.inputs[0].index != 0:
        raise _refuse("the images and the labels come from different readers")
    if not reader.arg("file_root") or reader.arg("file_list") or reader.arg("files") or reader.arg("num_shards") > 1:
        raise _refuse("the reader does not read a whole class-folder tree (file_root)")
    if decoder.arg("output_type") != DALIImageType.RGB:
        raise _refuse("the decoder does not write RGB")
    if resize.arg_inputs or resize.arg("interp_type") not in _INTERP or not resize.arg("antialias") \
            or resize.arg("mode") not in ("default", "stretch") or resize.arg("max_size") or resize.arg("size") \
            or any(resize.arg(name) is not None for name in ("min_filter", "mag_filter", "roi_start", "roi_end")) \
            or resize.arg("save_attrs") or any((resize.arg(name) or 0) < 0 for name in ("resize_x", "resize_y")):
        raise _refuse("the resize uses options torchvision's Resize has no match for")
    interpolation = _INTERP[resize.arg("interp_type")]
    width, height, shorter = resize.arg("resize_x"), resize.arg("resize_y"), resize.arg("resize_shorter")
    steps: list[tuple[str, dict]] = []
    if decoder.schema.name == "decoders.image_random_crop":
        if not (width and height):
            raise _refuse("a random-crop decoder is followed by a resize to something else than a fixed size")
        area, ratio = decoder.arg("random_area"), decoder.arg("random_aspect_ratio")
        steps.append(("RandomResizedCrop", {"size": [int(height), int(width)], "scale": _pair(area),
                                            "ratio": _pair(ratio), "interpolation": interpolation,
                                            "antialias": True}))
    elif width and height:
        steps.append(("Resize", {"size": [int(height), int(width)], "interpolation": interpolation,
                                 "antialias": True}))
    elif shorter and not (width or height or resize.arg("resize_longer")):
        steps.append(("Resize", {"size": int(shorter), "interpolation": interpolation, "antialias": True}))
    else:
        raise _refuse("the resize is neither to a fixed size nor of the shorter side")
    crop = normalize.arg("crop")
    if crop or normalize.arg("crop_h") or normalize.arg("crop_w"):
        if normalize.arg("crop_pos_x") != 0.5 or normalize.arg("crop_pos_y") != 0.5:
            raise _refuse("crop_mirror_normalize crops off centre")
        size = [int(v) for v in crop] if crop else [int(normalize.arg("crop_h")), int(normalize.arg("crop_w"))]
        steps.append(("CenterCrop", {"size": size}))
    if "mirror" in normalize.arg_inputs:
        flip = normalize.arg_inputs["mirror"].op
        if flip.schema.name != "random.coin_flip" or flip.arg_inputs:
            raise _refuse("mirror comes from something else than random.coin_flip(probability=p)")
        steps.append(("RandomHorizontalFlip", {"p": flip.arg("probability")}))
    elif normalize.arg("mirror"):
        steps.append(("RandomHorizontalFlip", {"p": 1.0}))
    channels = 3
    mean = list(normalize.arg("mean")) * (channels if len(normalize.arg("mean")) == 1 else 1)
    std = list(normalize.arg("std")) * (channels if len(normalize.arg("std")) == 1 else 1)
    return TorchvisionPlan(reader.arg("file_root"), bool(reader.arg("random_shuffle")), steps, mean, std,
                           _DTYPES[normalize.arg("dtype")])


def require_torchvision() -> None:
    """A one-line error unless torch and torchvision are installed (found, not imported: importing torch would
    add its memory to headrace's measurement, which runs first)."""
    import importlib.util

    for package in ("torch", "torchvision"):
        if importlib.util.find_spec(package) is None:
            raise CliError(f"--vs torchvision: the Python package '{package}' is not installed, so there is nothing "
                           "to compare with (pip install torchvision)")


def build_loader(plan: TorchvisionPlan, batch_size: int, workers: int):
    """The DataLoader over ImageFolder that `plan` describes, with `workers` worker processes."""
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import InterpolationMode, v2

    steps = []
    for name, kwargs in plan.steps:
        kwargs = dict(kwargs)
        if "interpolation" in kwargs:
            kwargs["interpolation"] = InterpolationMode[kwargs["interpolation"]]
        steps.append(getattr(v2, name)(**kwargs))
    steps += [v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True),
              v2.Normalize([m / 255 for m in plan.mean], [s / 255 for s in plan.std])]
    if plan.dtype != "float32":
        steps.append(v2.ToDtype(getattr(torch, plan.dtype)))
    dataset = ImageFolder(plan.root, transform=v2.Compose(steps))
    return DataLoader(dataset, batch_size=batch_size, shuffle=plan.shuffle, num_workers=workers,
                      persistent_workers=workers > 0, drop_last=False)
