"""headrace's generic Triton Python backend: serves the pipeline file in the model's version folder."""

from headrace.serving.triton_backend import TritonPythonModel  # noqa: F401
