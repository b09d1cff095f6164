"""The peer of benchmarks/triton_preprocess.py: the same preprocess pipeline written with NVIDIA DALI (the graph of
scripts/make_model_repository.py with DALI's import line) in a Python-backend model, run as headrace's backend runs
its own: an execute's requests fed as one batch, the answers handed to Triton through DLPack. DALI reuses its
output buffers on the next run, so each answer is copied out first (DALI's own `feed_ndarray`, on a stream of the
instance's, waited for). A bad image fails its whole execute (DALI 2.4's pipeline runs the next batch after a failed
one): the model is a speed reference, not a server."""

import json

import numpy as np
import torch

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
DTYPES = {"TYPE_FP32": torch.float32, "TYPE_FP16": torch.float16}


def build(batch_size: int, threads: int, device_id: int | None, dtype: str, hw_decoder_load: float) -> object:
    """model_repository's preprocess graph with DALI: decode, shorter side to 256, centre crop 224, normalize, CHW."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=0, prefetch_queue_depth=1)
    def preprocess():
        jpegs = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
        if device_id is not None:
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_decoder_load)
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=256)
        return fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT16 if dtype == "TYPE_FP16"
                                        else types.FLOAT, output_layout="CHW", mean=MEAN, std=STD)

    pipe = preprocess()
    pipe.build()
    return pipe


class DaliPreprocess:
    """The pipeline and its answers copied out: `__call__` takes a batch's encoded images and returns one torch
    tensor of their normalized images, complete, on the instance's device."""

    def __init__(self, batch_size: int, threads: int, device_id: int | None, out_type: str, hw_decoder_load: float,
                 dims: list[int]):
        from nvidia.dali.plugin.pytorch import feed_ndarray

        self.feed_ndarray, self.dims, self.dtype = feed_ndarray, dims, DTYPES[out_type]
        self.device = torch.device(f"cuda:{device_id}" if device_id is not None else "cpu")
        self.stream = torch.cuda.Stream(self.device) if device_id is not None else None
        self.pipe = build(batch_size, threads, device_id, out_type, hw_decoder_load)

    def __call__(self, images: list[np.ndarray]) -> torch.Tensor:
        self.pipe.feed_input("images", images)
        (batch,) = self.pipe.run()
        out = torch.empty([len(images), *self.dims], dtype=self.dtype, device=self.device)
        if self.stream is not None:
            self.feed_ndarray(batch.as_tensor(), out, cuda_stream=self.stream)
            self.stream.synchronize()
        else:
            self.feed_ndarray(batch.as_tensor(), out)
        return out


class TritonPythonModel:
    """Triton's entry points: a DaliPreprocess per instance, on the instance's device."""

    def initialize(self, args: dict) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in (config.get("parameters") or {}).items()}
        gpu = args.get("model_instance_kind") == "GPU"
        self.preprocess = DaliPreprocess(
            int(config["max_batch_size"]), int(params.get("threads") or 2),
            int(args["model_instance_device_id"]) if gpu else None, config["output"][0]["data_type"],
            float(params.get("hw_decoder_load") or 1.0), [int(d) for d in config["output"][0]["dims"]])

    def execute(self, requests: list) -> list:
        """The requests' images as one batch; each request's answer is its rows of the batch's output."""
        pb = self.pb
        counts, images = [], []
        for request in requests:
            rows = np.from_dlpack(pb.get_input_tensor_by_name(request, "images"))
            counts.append(len(rows))
            images.extend(rows)
        try:
            out = self.preprocess(images)
        except Exception as error:  # noqa: BLE001 - every request of the execute gets DALI's message
            return [pb.InferenceResponse(error=pb.TritonError(f"DALI: {error}")) for _ in requests]
        responses, start = [], 0
        for count in counts:
            responses.append(pb.InferenceResponse(
                output_tensors=[pb.Tensor.from_dlpack("normalized", out[start:start + count])]))
            start += count
        return responses

    def finalize(self) -> None:
        del self.preprocess
