"""DALI's legacy class API (`ops.readers.File(...)`, `ops.Resize(...)`, `ops.random.CoinFlip()`): an op object made
with its arguments and called with its inputs in `define_graph`, driven by the same schemas as `fn`."""

from headrace.legacy.namespace import Operator, OpsNamespace, camel_case

__all__ = ["OpsNamespace", "Operator", "camel_case"]
