"""Schemas of the ops that read a property of their input instead of its values. peek_image_shape: the shape an
encoded image decodes to, from its header. get_property: source_info, layout."""

import numpy as np

from headrace.enums import DALIDataType, DALIImageType
from headrace.output_specs import numpy_dtype
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _image_shape(a: SpecArgs) -> list[OutputSpec]:
    """(height, width, channels) of each encoded image, of element type `dtype`."""
    return [OutputSpec(numpy_dtype(a.args["dtype"]), None, (3,))]


register(OpSchema(
    name="peek_image_shape",
    doc="The shape (height, width, channels) an encoded image (JPEG, PNG, TIFF, BMP, WebP, ... as bytes) decodes "
        "to, read from its header without decoding: channels 3 for RGB, BGR and YCbCr, 1 for GRAY, the image's own "
        "for ANY_DATA; height and width exchanged where the EXIF orientation turns the image and "
        "`adjust_orientation` is set.",
    args=(Arg("adjust_orientation", "bool", True, "Apply the EXIF orientation (a quarter turn exchanges height and "
              "width)."),
          Arg("dtype", "dtype", DALIDataType.INT64, "Element type of the shape."),
          Arg("image_type", "image_type", DALIImageType.RGB, "Colour space the image would be decoded to; it sets "
              "the channel count.")),
    min_inputs=1, max_inputs=1, devices=("cpu",),
    state="none", output_spec=_image_shape,
))


def _property(a: SpecArgs) -> list[OutputSpec]:
    """The property's text as bytes: a 1-D uint8 array per sample."""
    return [OutputSpec(np.uint8, None, (-1,))]


register(OpSchema(
    name="get_property",
    doc="A property of each input sample, as a 1-D uint8 array of its text (DALI's byte array): key 'source_info' "
        "gives where the sample came from (the file a reader read it from: the batch's `source_info`), 'layout' the "
        "input's layout ('' when unknown).",
    args=(Arg("key", "str", REQUIRED, "The property: 'source_info' or 'layout'.", choices=("source_info", "layout")),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_property,
))
