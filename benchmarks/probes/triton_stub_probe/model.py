"""benchmarks/probes/triton_stub_probe.py's model: for each request (one JPEG), time the units of
stub_probe_units.py in this Python-backend stub and answer with the seconds each took (FP64 [units]). Parameters:
`sys_path` (folders to import headrace and the units from, os.pathsep-separated; the stub ignores PYTHONPATH),
`pipeline_file` and `order` (the units to run, comma-separated, in order)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        sys.path[:0] = [p for p in params["sys_path"].split(os.pathsep) if p and p not in sys.path]
        from stub_probe_units import Units

        gpu = args.get("model_instance_kind") == "GPU"
        self.units = Units(params["pipeline_file"], int(args["model_instance_device_id"]) if gpu else None,
                           tuple(params["order"].split(",")))

    def execute(self, requests: list) -> list:
        pb = self.pb
        responses = []
        for request in requests:
            # through DLPack both ways: the stub's own numpy conversions are wrong under numpy 2 (README)
            jpeg = np.from_dlpack(pb.get_input_tensor_by_name(request, "images"))[0]
            times = self.units.run(np.ascontiguousarray(jpeg))
            out = pb.Tensor.from_dlpack("seconds", torch.from_numpy(times[None]))
            responses.append(pb.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self) -> None:
        self.units.close()
