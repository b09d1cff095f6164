"""Triton's own overhead, the floor of benchmarks/triton_preprocess.py: a Python-backend model with the preprocess
model's inputs and outputs (encoded images in, FP32 [3, 224, 224] per image out) that does no work. It answers each
request with a cached zero tensor on its instance's device, handed over through DLPack like headrace's outputs, so
the difference between the two is what preprocessing adds. Its parameter `work_us` makes it spin that long per
execute (holding the GIL, as Python work does): how much of a model's own time reaches the client. With `gpu_kernel`
1 it runs one tiny kernel per execute on a stream of its own and waits for it: what using the GPU at all costs. With
`fresh_outputs` 1 it does what any GPU model must: it reads each request's input, and answers with a new tensor that
one kernel fills on its own stream, waited for."""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np
import torch


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        self.dims = [int(d) for d in config["output"][0]["dims"]]
        self.dtype = {"TYPE_FP32": torch.float32, "TYPE_FP16": torch.float16}[config["output"][0]["data_type"]]
        gpu = args.get("model_instance_kind") == "GPU"
        self.device = torch.device(f"cuda:{args['model_instance_device_id']}" if gpu else "cpu")
        self.zeros: dict[int, torch.Tensor] = {}
        params = {k: v.get("string_value", "") for k, v in (config.get("parameters") or {}).items()}
        self.work_seconds = float(params.get("work_us") or 0) * 1e-6
        self.fresh = params.get("fresh_outputs") == "1"
        self.tiny = torch.zeros(256, device=self.device) if gpu and params.get("gpu_kernel") == "1" else None
        self.stream = torch.cuda.Stream(self.device) if gpu and (self.fresh or self.tiny is not None) else None

    def execute(self, requests: list) -> list:
        pb = self.pb
        if self.work_seconds:
            end = time.perf_counter() + self.work_seconds
            while time.perf_counter() < end:
                pass
        if self.tiny is not None:
            with torch.cuda.stream(self.stream):
                self.tiny.add_(1.0)
            self.stream.synchronize()
        if self.fresh:
            return self._fresh(requests)
        responses = []
        for request in requests:
            size = pb.get_input_tensor_by_name(request, "images").shape()[0]
            if size not in self.zeros:
                self.zeros[size] = torch.zeros([size, *self.dims], dtype=self.dtype, device=self.device)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
            out = pb.Tensor.from_dlpack("normalized", self.zeros[size])
            responses.append(pb.InferenceResponse(output_tensors=[out]))
        return responses

    def _fresh(self, requests: list) -> list:
        """Each request's input read, and its answer a new tensor filled by one kernel (on the instance's stream)."""
        pb = self.pb
        outputs = []
        with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
            for request in requests:
                images = np.from_dlpack(pb.get_input_tensor_by_name(request, "images"))
                out = torch.empty([images.shape[0], *self.dims], dtype=self.dtype, device=self.device)
                outputs.append(out.fill_(float(images[0, 0] % 7)))
        if self.stream is not None:
            self.stream.synchronize()
        return [pb.InferenceResponse(output_tensors=[pb.Tensor.from_dlpack("normalized", out)]) for out in outputs]
