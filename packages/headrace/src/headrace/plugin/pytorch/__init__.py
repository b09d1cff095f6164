"""DALI's `nvidia.dali.plugin.pytorch` path for headrace-torch: `from headrace.plugin.pytorch import
DALIGenericIterator, LastBatchPolicy` works once headrace-torch is installed."""

try:
    from headrace.plugin.pytorch import fn  # noqa: F401 - DALI's plugin.pytorch.fn.torch_python_function
    from headrace_torch import *  # noqa: F403 - this module is the package under DALI's name
    from headrace_torch import __all__  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError("headrace.plugin.pytorch needs the headrace-torch package: pip install headrace-torch "
                      f"(and torch); import failed with: {exc}") from exc
