"""Schema of the copy between host and GPU that `.gpu()` and `.cpu()` insert."""

from headrace.schema import OpSchema, register

register(OpSchema(
    name="copy",
    doc="Copies data to the node's device: device='gpu' uploads, device='cpu' downloads. Built by .gpu() / .cpu().",
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))
