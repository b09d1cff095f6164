"""headrace: GPU-accelerated data loading and augmentation with a DALI-style API.

Porting a DALI pipeline means changing the import line::

    from headrace import pipeline_def, fn, types
    from headrace import ops, Pipeline      # DALI's legacy class API: ops.readers.File(...), define_graph
"""

import sys

from headrace import backend, fn, math, tensors, types
from headrace.batch import TensorListCPU, TensorListGPU
from headrace.engine.options import ExecutorOptions
from headrace.errors import DeviceError, HeadraceError, InputDataError, PipelineFileError, SampleError, SchemaError
from headrace.graph import newaxis
from headrace.legacy import OpsNamespace
from headrace.pipeline import Pipeline, pipeline_def
from headrace.types import BatchInfo, SampleInfo

ops = OpsNamespace(fallback=sys.modules["headrace.ops"])
"""DALI's legacy `ops` namespace (`ops.Resize`, `ops.readers.File`); the schema modules (headrace.ops.<family>)
stay importable by their names and reachable through it."""

__version__ = "0.1.0"

__all__ = ["BatchInfo", "DeviceError", "ExecutorOptions", "HeadraceError", "InputDataError", "Pipeline",
           "PipelineFileError", "SampleError", "SampleInfo", "SchemaError", "TensorListCPU", "TensorListGPU",
           "backend", "fn", "math", "newaxis", "ops", "pipeline_def", "tensors", "types"]
