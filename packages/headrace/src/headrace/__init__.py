"""headrace: GPU-accelerated data loading and augmentation with a DALI-style API.

Porting a DALI pipeline means changing the import line::

    from headrace import pipeline_def, fn, types
"""

from headrace import fn, types
from headrace.batch import TensorListCPU
from headrace.engine.options import ExecutorOptions
from headrace.errors import DeviceError, HeadraceError, InputDataError, PipelineFileError, SampleError, SchemaError
from headrace.pipeline import Pipeline, pipeline_def

__version__ = "0.1.0"

__all__ = ["DeviceError", "ExecutorOptions", "HeadraceError", "InputDataError", "Pipeline", "PipelineFileError",
           "SampleError", "SchemaError", "TensorListCPU", "fn", "pipeline_def", "types"]
