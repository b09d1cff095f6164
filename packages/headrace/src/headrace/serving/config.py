"""config.pbtxt for a pipeline file: inputs from its fed external sources, outputs from its outputs (dtype and dims
from the nodes' output specs), batching and instance group. The generic backend reads the same names back."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from headrace.errors import SchemaError
from headrace.schema import OutputSpec

if TYPE_CHECKING:
    from headrace.pipeline import Pipeline

BACKEND_NAME = "headrace"
DEFAULT_PIPELINE_FILENAME = "pipeline.json"
INSTANCE_KINDS = ("KIND_CPU", "KIND_GPU")
# instances per kind that served the image preprocess pipeline fastest with no batching delay (docs/serving.md,
# "Instances and batching delay"): the example repository and the Docker image use them; triton_config's default is 1
MEASURED_INSTANCE_COUNTS = {"KIND_CPU": 1, "KIND_GPU": 8}
_TRITON_TYPES = {np.dtype(k): v for k, v in {
    np.bool_: "TYPE_BOOL", np.uint8: "TYPE_UINT8", np.uint16: "TYPE_UINT16", np.uint32: "TYPE_UINT32",
    np.uint64: "TYPE_UINT64", np.int8: "TYPE_INT8", np.int16: "TYPE_INT16", np.int32: "TYPE_INT32",
    np.int64: "TYPE_INT64", np.float16: "TYPE_FP16", np.float32: "TYPE_FP32", np.float64: "TYPE_FP64"}.items()}
NUMPY_OF_TRITON = {v: k for k, v in _TRITON_TYPES.items()}


def triton_type(dtype) -> str:
    """The config's TYPE_* name of a numpy dtype."""
    try:
        return _TRITON_TYPES[np.dtype(dtype)]
    except KeyError:
        raise SchemaError(f"dtype {np.dtype(dtype)} has no Triton equivalent") from None


def load_pipeline(pipeline_file: str | os.PathLike | Pipeline, allowed_modules: Sequence[str] = ()) -> Pipeline:
    from headrace.pipeline import Pipeline

    if isinstance(pipeline_file, Pipeline):
        return pipeline_file
    return Pipeline.load(pipeline_file, allowed_modules=allowed_modules)


def output_names(pipe: Pipeline) -> list[str]:
    """Default Triton names of a pipeline's outputs: the producing node's name when the user gave one
    (`name="normalized"`, with `_i` for output i > 0 of a multi-output node), else OUTPUT<position>."""
    names = []
    for position, out in enumerate(pipe.outputs):
        if out.op.name.startswith("__"):
            names.append(f"OUTPUT{position}")
        else:
            names.append(out.op.name if out.index == 0 else f"{out.op.name}_{out.index}")
    if len(set(names)) != len(names):
        raise SchemaError(f"pipeline outputs have clashing names {names}: pass output_names")
    return names


def served_inputs(pipe: Pipeline) -> list[tuple[str, OutputSpec]]:
    """The fed external sources (the model's inputs) with their declared dtype and ndim; a pipeline that reads
    files or calls a Python source cannot be served, and an input without dtype/ndim cannot be declared."""
    inputs = []
    for node in pipe.graph.nodes:
        if node.schema.name == "external_source" and node.arg("source") is not None:
            raise SchemaError(f"external_source '{node.name}' has a Python source; a served pipeline takes its data "
                              "from requests (no source)")
        if node.schema.stateful and node.schema.name != "external_source":
            raise SchemaError(f"{node.schema.name} (node '{node.name}') reads its own data; a served pipeline takes "
                              "its data from requests through external_source nodes")
    for name in pipe.fed_inputs:
        spec = pipe.graph[name].outputs[0].spec
        if spec.dtype is None or spec.dims is None:
            raise SchemaError(f"external_source '{name}': give it dtype= and ndim= so that the Triton input can be "
                              "declared")
        inputs.append((name, spec))
    if not inputs:
        raise SchemaError("the pipeline has no external_source to feed: nothing for a request to carry")
    return inputs


def served_outputs(pipe: Pipeline, names: Sequence[str] | None = None,
                   dims: Mapping[str, Sequence[int]] | None = None,
                   dtypes: Mapping[str, object] | None = None) -> list[tuple[str, OutputSpec]]:
    """The model's outputs: names (default `output_names`), dtype and dims from the graph or the overrides."""
    names = list(names) if names is not None else output_names(pipe)
    if len(names) != len(pipe.outputs):
        raise SchemaError(f"{len(names)} output names for {len(pipe.outputs)} pipeline outputs")
    result = []
    for name, spec in zip(names, [out.spec for out in pipe.outputs], strict=True):
        dtype = np.dtype(dtypes[name]) if dtypes and name in dtypes else spec.dtype
        shape = tuple(dims[name]) if dims and name in dims else spec.dims
        if dtype is None or shape is None:
            raise SchemaError(f"output '{name}': its dtype or dims cannot be inferred from the graph; pass "
                              f"output_dtypes={{'{name}': ...}} / output_dims={{'{name}': [...]}}")
        result.append((name, dataclasses.replace(spec, dtype=dtype, dims=shape)))
    return result


def _dims(dims: Sequence[int]) -> str:
    return "[ " + ", ".join(str(d) for d in dims) + " ]" if dims else "[ 1 ]"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def triton_config(pipeline_file: str | os.PathLike | Pipeline, model_name: str, max_batch_size: int | None = None,
                  instance_kind: str = "KIND_CPU", instance_count: int = 1, *,
                  output_names: Sequence[str] | None = None, output_dims: Mapping[str, Sequence[int]] | None = None,
                  output_dtypes: Mapping[str, object] | None = None, max_queue_delay_us: int = 0,
                  preferred_batch_sizes: Sequence[int] = (),
                  gpus: Sequence[int] | None = None, pipeline_filename: str = DEFAULT_PIPELINE_FILENAME,
                  num_threads: int | None = None, backend: str = BACKEND_NAME,
                  parameters: Mapping[str, str] | None = None, allowed_modules: Sequence[str] = ()) -> str:
    """The config.pbtxt text serving `pipeline_file` with headrace's backend.

    max_batch_size defaults to the pipeline's batch_size and may not exceed it (a run takes at most batch_size
    samples). Inputs with a variable extent (encoded images: UINT8 [-1]) allow ragged batching, so requests with
    images of different lengths share a pipeline run. `parameters` adds backend parameters (e.g. log_timing_every:
    log where execute spends its time every that many calls). `allowed_modules` are the modules trusted for the
    user code the file names; the backend imports them from the model's folder or its Python path."""
    pipe = load_pipeline(pipeline_file, allowed_modules)
    batch_size = pipe.batch_size
    max_batch_size = batch_size if max_batch_size is None else int(max_batch_size)
    if not 1 <= max_batch_size <= batch_size:
        raise SchemaError(f"max_batch_size must be between 1 and the pipeline's batch_size ({batch_size}), "
                          f"got {max_batch_size}")
    if instance_kind not in INSTANCE_KINDS:
        raise SchemaError(f"instance_kind must be one of {INSTANCE_KINDS}, got {instance_kind!r}")
    if instance_count < 1:
        raise SchemaError(f"instance_count must be at least 1, got {instance_count}")
    if max_queue_delay_us < 0:
        raise SchemaError(f"max_queue_delay_us must be at least 0, got {max_queue_delay_us}")
    inputs = served_inputs(pipe)
    outputs = served_outputs(pipe, output_names, output_dims, output_dtypes)

    lines = [f"name: {_quote(model_name)}", f"backend: {_quote(backend)}", f"max_batch_size: {max_batch_size}",
             "input ["]
    for i, (name, spec) in enumerate(inputs):
        ragged = "\n    allow_ragged_batch: true" if -1 in spec.dims else ""
        comma = "," if i < len(inputs) - 1 else ""
        lines.append(f"  {{\n    name: {_quote(name)}\n    data_type: {triton_type(spec.dtype)}\n"
                     f"    dims: {_dims(spec.dims)}{ragged}\n  }}{comma}")
    lines.append("]\noutput [")
    for i, (name, spec) in enumerate(outputs):
        comma = "," if i < len(outputs) - 1 else ""
        lines.append(f"  {{\n    name: {_quote(name)}\n    data_type: {triton_type(spec.dtype)}\n"
                     f"    dims: {_dims(spec.dims)}\n  }}{comma}")
    lines.append("]")
    preferred = f"\n  preferred_batch_size: {_dims(preferred_batch_sizes)}" if preferred_batch_sizes else ""
    lines.append(f"dynamic_batching {{{preferred}\n  max_queue_delay_microseconds: {int(max_queue_delay_us)}\n}}")
    gpu_line = f"\n    gpus: {_dims(list(gpus))}" if gpus and instance_kind == "KIND_GPU" else ""
    lines.append(f"instance_group [\n  {{\n    count: {instance_count}\n    kind: {instance_kind}{gpu_line}\n  }}\n]")
    params = {"pipeline_file": pipeline_filename, "output_names": ",".join(name for name, _ in outputs)}
    if num_threads is not None:
        params["num_threads"] = str(int(num_threads))
    if allowed_modules:
        params["allowed_modules"] = ",".join(allowed_modules)
    params.update({str(k): str(v) for k, v in (parameters or {}).items()})
    for key, value in params.items():
        lines.append(f"parameters {{\n  key: {_quote(key)}\n  value: {{ string_value: {_quote(value)} }}\n}}")
    return "\n".join(lines) + "\n"
