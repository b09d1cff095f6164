"""The generic Triton Python backend: serves the pipeline file in the model's version folder. Triton inputs feed
the external sources of the same names, pipeline outputs become Triton outputs, each batch of requests is one
pipeline run (BatchRunner), and a bad request gets its own error while the others are answered.

With the model parameter `respond_in_background: true`, execute only reads its requests and returns; a worker
thread runs them and answers each through its response sender (serving/background.py), so the instance takes its
next batch while this one runs.

Runs inside Triton's Python stub (`triton_python_backend_utils` exists only there). Under numpy 2 the stub's own
numpy conversions are broken (`as_numpy()` repeats the first element; `pb_utils.Tensor(name, ndarray)` arrives
empty), so tensors cross through DLPack: inputs by `np.from_dlpack`, outputs as torch tensors (CPU) or device
arrays (GPU) by `Tensor.from_dlpack`."""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

from headrace.engine.options import ExecutorOptions
from headrace.serving.background import STOP_TIMEOUT_S, BackgroundRunner, Pending
from headrace.serving.batching import BatchRunner, InputSpec, RequestError
from headrace.serving.config import DEFAULT_PIPELINE_FILENAME, NUMPY_OF_TRITON, output_names

NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def _parameters(config: dict) -> dict[str, str]:
    return {k: v.get("string_value", "") for k, v in (config.get("parameters") or {}).items()}


def executor_options(parameters: dict[str, str]) -> ExecutorOptions:
    """The executor options among a model's parameters: `executor.<option>` keys, e.g.
    `parameters { key: "executor.lookahead" value: { string_value: "off" } }`."""
    prefix = "executor."
    return ExecutorOptions.from_strings({k[len(prefix):]: v for k, v in parameters.items() if k.startswith(prefix)})


def background_options(parameters: dict[str, str]) -> dict[str, int] | None:
    """BackgroundRunner's settings among a model's parameters, or None where execute answers its requests itself:
    `respond_in_background` (true / false, default false), `response_threads` (default 2) and
    `background_queue_depth` (hand-overs that may wait for the worker, default 1; 0: execute returns once the worker
    has taken its requests)."""
    switch = parameters.get("respond_in_background", "false").strip().lower()
    if switch not in ("true", "false", "on", "off", "1", "0", ""):
        raise ValueError(f"model parameter 'respond_in_background': {switch!r} is not true or false")
    if switch not in ("true", "on", "1"):
        return None
    options = {}
    for name, key, default in (("response_threads", "senders", 2), ("background_queue_depth", "waiting", 1)):
        text = parameters.get(name, "").strip() or str(default)
        if not text.isdigit():
            raise ValueError(f"model parameter '{name}': {text!r} is not a whole number of at least 0")
        options[key] = int(text)
    return options


def _input_specs(config: dict) -> list[InputSpec]:
    specs = []
    for entry in config["input"]:
        triton_type = entry["data_type"]
        if triton_type not in NUMPY_OF_TRITON:
            raise ValueError(f"input '{entry['name']}': {triton_type} is not supported by headrace's backend (send "
                             "encoded images as TYPE_UINT8 dims [-1] with allow_ragged_batch)")
        specs.append(InputSpec(entry["name"], NUMPY_OF_TRITON[triton_type], tuple(int(d) for d in entry["dims"])))
    return specs


class TritonPythonModel:
    """Triton's Python backend contract: initialize, execute (a list of requests), finalize."""

    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        from headrace.pipeline import Pipeline

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = _parameters(config)
        version_dir = Path(args["model_repository"]) / args["model_version"]
        pipeline_path = version_dir / params.get("pipeline_file", DEFAULT_PIPELINE_FILENAME)
        if not pipeline_path.is_file():
            raise FileNotFoundError(f"model '{args['model_name']}': no pipeline file at {pipeline_path}")
        self.on_gpu = args.get("model_instance_kind") == "GPU"
        overrides = {"device_id": int(args.get("model_instance_device_id", 0)) if self.on_gpu else None,
                     "prefetch_queue_depth": 1}
        if "num_threads" in params:
            overrides["num_threads"] = int(params["num_threads"])
        overrides["executor_options"] = executor_options(params)
        background = background_options(params)  # a bad value fails the load before the pipeline is built
        allowed = [m.strip() for m in params.get("allowed_modules", "").split(",") if m.strip()]
        if allowed:  # user code may sit beside the pipeline file, or in the model's folder
            for folder in (version_dir, version_dir.parent):
                if str(folder) not in sys.path:
                    sys.path.append(str(folder))
        self.pipe = Pipeline.load(pipeline_path, allowed_modules=allowed, **overrides)
        self.pipe.build()  # a pipeline that cannot be built fails the model's load, not its first request
        names = params["output_names"].split(",") if params.get("output_names") else output_names(self.pipe)
        configured = [entry["name"] for entry in config["output"]]
        if sorted(names) != sorted(configured):
            raise ValueError(f"model '{args['model_name']}': the config's outputs {configured} are not the "
                             f"pipeline's outputs {names}")
        self.output_dtypes = {e["name"]: NUMPY_OF_TRITON.get(e["data_type"]) for e in config["output"]}
        self.placement_logged: set[str] = set()
        self.runner = BatchRunner(self.pipe, _input_specs(config), names)
        self.input_names = [spec.name for spec in self.runner.inputs]
        self._warm_up(args["model_name"])
        self.timing = ExecuteTiming(int(params.get("log_timing_every", "0") or 0), pb_utils.Logger.log_info,
                                    lambda: {**self.runner.seconds, **self.pipe.gpu_timings})
        self.background = None if background is None else BackgroundRunner(
            self.runner, pb_utils.Logger.log_error, lambda n, ran, answered: self.timing.add(n, 0.0, ran, answered),
            **background)

    def _warm_up(self, model_name: str) -> None:
        """Make the first request as fast as the next (Pipeline.warm_up: the decoders, and one batch of the
        pipeline's own sample input where it has one). Best effort: a failure is logged, and the model still
        loads."""
        start = time.perf_counter()
        try:
            fed = self.pipe.warm_up()
        except Exception as exc:  # noqa: BLE001 - the model serves without a warm-up
            self.pb.Logger.log_warn(f"headrace: model '{model_name}': warm-up failed, the first request will be "
                                    f"slower ({type(exc).__name__}: {exc})")
            return
        what = "one batch of a tiny JPEG" if fed else "the decoders only"
        self.pb.Logger.log_info(f"headrace: model '{model_name}' warmed up ({what}) in "
                                f"{(time.perf_counter() - start) * 1e3:.0f} ms")

    def execute(self, requests: list) -> list | None:
        """One response per request, in order: outputs, or that request's own error. In the background, none: each
        request is answered through its response sender once its run is done."""
        if self.background is not None:
            self._hand_over(requests)
            return None
        start = time.perf_counter()
        arrays = [self._read(request) for request in requests]
        read = time.perf_counter()
        results = self.runner.run(arrays)
        ran = time.perf_counter()
        responses = [self._response(result) for result in results]
        self.timing.add(len(requests), read - start, ran - read, time.perf_counter() - ran)
        return responses

    def _hand_over(self, requests: list) -> None:
        """The requests' inputs, as arrays of their own (a request's memory may go when execute returns), to the
        background runner; a request whose inputs cannot be read is answered at once."""
        pending = []
        for request in requests:
            sender = request.get_response_sender()
            try:
                inputs = {name: _owned(array) for name, array in self._read(request).items()}
            except Exception as exc:  # noqa: BLE001 - answered to this request only
                try:
                    self._send(sender, RequestError(f"its inputs could not be read: {exc}"))
                except Exception as failure:  # noqa: BLE001 - the others are still handed over
                    self.pb.Logger.log_error(f"headrace: a response could not be sent: {failure}")
                continue
            pending.append(Pending(inputs, functools.partial(self._send, sender)))
        if pending:
            self.background.submit(pending)

    def _send(self, sender, result) -> None:
        """One request's only response, through its response sender."""
        sender.send(self._response(result), flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _response(self, result):
        """The response for one request's result: its output tensors, or its error."""
        pb = self.pb
        if isinstance(result, RequestError):
            return pb.InferenceResponse(output_tensors=[], error=_error(pb, str(result)))
        try:
            tensors = [self._tensor(name, value) for name, value in zip(self.runner.output_names, result, strict=True)]
            self._log_placement(tensors)
            return pb.InferenceResponse(output_tensors=tensors)
        except Exception as exc:  # noqa: BLE001 - answered to this request only
            return pb.InferenceResponse(output_tensors=[], error=_error(pb, str(exc)))

    def _read(self, request) -> dict:
        """The request's inputs as host arrays (DLPack: the stub's as_numpy is wrong under numpy 2)."""
        arrays = {}
        for tensor in request.inputs():
            if not tensor.is_cpu():
                import cupy

                arrays[tensor.name()] = cupy.asnumpy(cupy.from_dlpack(tensor.to_dlpack()))
            elif NUMPY_2:
                arrays[tensor.name()] = np.from_dlpack(tensor)
            else:
                arrays[tensor.name()] = tensor.as_numpy()
        return arrays

    def _tensor(self, name: str, value):
        """A Triton output tensor for `value` without a host round trip for GPU arrays."""
        pb = self.pb
        expected = self.output_dtypes.get(name)
        if isinstance(value, np.ndarray):
            if expected is not None and value.dtype != expected:
                raise RequestError(f"output '{name}' has element type {value.dtype}, the config declares {expected}")
            value = np.ascontiguousarray(value)
            if not NUMPY_2:
                return pb.Tensor(name, value)
            try:
                import torch

                return pb.Tensor.from_dlpack(name, torch.from_numpy(value))
            except ImportError:
                return pb.Tensor.from_dlpack(name, value)
        return pb.Tensor.from_dlpack(name, value)  # a device array (CuPy / torch CUDA): zero-copy

    def _log_placement(self, tensors: list) -> None:
        """Say once per output, in the server's log, where its tensors are handed to Triton: GPU outputs go as
        device memory through DLPack (Triton copies them to the response itself), never through the host here."""
        for tensor in tensors:
            name = tensor.name()
            if name in self.placement_logged:
                continue
            self.placement_logged.add(name)
            where = "host memory" if tensor.is_cpu() else "GPU memory through DLPack, no host copy"
            self.pb.Logger.log_info(f"headrace: output '{name}' is handed to Triton in {where}")

    def finalize(self) -> None:
        background = getattr(self, "background", None)
        if background is not None and not background.close(STOP_TIMEOUT_S):
            self.pb.Logger.log_error(f"headrace: a background run did not end within {STOP_TIMEOUT_S:.0f} s; its "
                                     "pipeline is left open")
            return
        pipe = getattr(self, "pipe", None)
        if pipe is not None:
            pipe.close()


class ExecuteTiming:
    """Where `execute` spends its time, logged every `every` calls (the model parameter `log_timing_every`; 0: off):
    reading the inputs, running the pipeline (with splitting its outputs by request), making the responses, and
    the parts of the pipeline run that `details` reports (cumulative seconds by name). In the background, the
    worker's runs and answers (per run, not per execute); execute's reading is not counted there."""

    PARTS = ("read", "pipeline", "respond")

    def __init__(self, every: int, log, details=None):
        self.every, self.log, self.details = every, log, details
        self._reset()

    def _reset(self) -> None:
        self.calls, self.requests, self.seconds = 0, 0, [0.0] * len(self.PARTS)
        self.details_before = dict(self.details()) if self.details is not None and self.every else {}

    def add(self, requests: int, *seconds: float) -> None:
        if not self.every:
            return
        self.calls += 1
        self.requests += requests
        self.seconds = [a + b for a, b in zip(self.seconds, seconds, strict=True)]
        if self.calls >= self.every:
            parts = [f"{name} {total / self.calls * 1e3:.2f} ms" for name, total in
                     zip(self.PARTS, self.seconds, strict=True)]
            if self.details is not None:
                parts += [f"{name} {(total - self.details_before.get(name, 0.0)) / self.calls * 1e3:.2f} ms"
                          for name, total in self.details().items()]
            self.log(f"headrace: execute over {self.calls} calls, {self.requests / self.calls:.1f} requests each: "
                     f"{', '.join(parts)}")
            self._reset()


def _owned(array: np.ndarray) -> np.ndarray:
    """`array`, or a copy where its memory belongs to something else (a request's tensor)."""
    return array if array.flags.owndata else np.array(array, copy=True)


def _error(pb, message: str):
    try:
        return pb.TritonError(message, pb.TritonError.INVALID_ARG)
    except (AttributeError, TypeError):
        return pb.TritonError(message)


__all__ = ["ExecuteTiming", "TritonPythonModel", "background_options", "executor_options"]
