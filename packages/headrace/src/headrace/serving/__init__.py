"""Serving a pipeline file with Triton Inference Server: config.pbtxt generation, the generic Python backend, and a
launcher for a local server."""

from headrace.serving.config import output_names, triton_config
from headrace.serving.server import TritonServer, start_server

__all__ = ["TritonServer", "output_names", "start_server", "triton_config"]
