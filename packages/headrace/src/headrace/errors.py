"""The errors headrace raises; each names what the user must look at (node, op, argument, sample)."""


class HeadraceError(Exception):
    """Base class of headrace's own errors."""


class SchemaError(HeadraceError, ValueError):
    """A graph or an op call does not fit an op's schema."""


class InputDataError(HeadraceError, ValueError):
    """Data handed to the pipeline (an external_source's batch) does not fit what the source declares."""


class PipelineFileError(HeadraceError, ValueError):
    """A pipeline file is malformed: wrong version, unknown op, bad argument, cycle or dangling input."""


class SampleError(HeadraceError, RuntimeError):
    """An op failed on one sample; the message names the op, the node and the sample's source."""

    def __init__(self, message: str, *, node: str = "", op: str = "", sample: int = -1, source: str = ""):
        super().__init__(message)
        self.node, self.op, self.sample, self.source = node, op, sample, source


class DeviceError(HeadraceError, RuntimeError):
    """A GPU was asked for where none can be used."""
