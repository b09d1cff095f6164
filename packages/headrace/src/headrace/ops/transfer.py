"""Schema of the copy between host and GPU that `.gpu()` and `.cpu()` insert."""

from headrace.output_specs import same_as_input
from headrace.schema import OpSchema, registrar

register = registrar(__name__)

register(OpSchema(
    name="copy",
    doc="Copies data to the node's device: device='gpu' uploads, device='cpu' downloads. Built by .gpu() / .cpu().",
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=same_as_input,
))
