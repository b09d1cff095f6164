"""The usual way to preprocess in Triton, the baseline of benchmarks/triton_preprocess.py: a Python-backend model
with PIL, one image at a time: decode, resize the shorter side to 256 (bilinear), centre-crop 224, normalize,
FP32 NCHW. Input BYTES (one encoded image per element) where the server's numpy is 1.x; under numpy 2 the stub
cannot take BYTES (it corrupts them before execute), so there it takes UINT8 [-1] rows, zero-padded."""

from __future__ import annotations

import io
import json

import numpy as np
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], np.float32) * 255
NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def preprocess(encoded: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(encoded)).convert("RGB")
    width, height = image.size
    scale = 256 / min(width, height)
    image = image.resize((round(width * scale), round(height * scale)), Image.BILINEAR)
    left, top = (image.width - 224) // 2, (image.height - 224) // 2
    image = image.crop((left, top, left + 224, top + 224))
    return ((np.asarray(image, np.float32) - MEAN) / STD).transpose(2, 0, 1)


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        self.bytes_input = json.loads(args["model_config"])["input"][0]["data_type"] == "TYPE_STRING"

    def execute(self, requests: list) -> list:
        pb = self.pb
        responses = []
        for request in requests:
            tensor = pb.get_input_tensor_by_name(request, "images")
            if self.bytes_input:
                encoded = list(tensor.as_numpy().reshape(-1))
            else:
                encoded = [row.tobytes() for row in np.from_dlpack(tensor)]
            batch = np.ascontiguousarray(np.stack([preprocess(e) for e in encoded]))
            if NUMPY_2:
                import torch

                out = pb.Tensor.from_dlpack("normalized", torch.from_numpy(batch))
            else:
                out = pb.Tensor("normalized", batch)
            responses.append(pb.InferenceResponse(output_tensors=[out]))
        return responses
