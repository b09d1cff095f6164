"""The `fn` namespace: one callable per op schema, as in `nvidia.dali.fn` (`fn.readers.file`, `fn.resize`, ...)."""

from __future__ import annotations

from headrace import ops  # noqa: F401  (registers the schemas)
from headrace.graph import add_op
from headrace.schema import SCHEMAS, OpSchema


def _op_function(schema: OpSchema):
    def call(*inputs, **kwargs):
        return add_op(schema.name, inputs, kwargs)

    call.__name__ = schema.name.rsplit(".", 1)[-1]
    call.__qualname__ = schema.name
    call.__doc__ = schema.docstring()
    return call


class _Namespace:
    """A dotted group of ops, e.g. `fn.readers` or `fn.decoders`."""

    def __init__(self, prefix: str):
        self._prefix = prefix

    def __getattr__(self, attr: str):
        return _lookup(f"{self._prefix}.{attr}")

    def __dir__(self):
        return sorted({n[len(self._prefix) + 1:].split(".")[0] for n in SCHEMAS if n.startswith(self._prefix + ".")})


def _lookup(full_name: str):
    if full_name in SCHEMAS:
        return _op_function(SCHEMAS[full_name])
    if any(n.startswith(full_name + ".") for n in SCHEMAS):
        return _Namespace(full_name)
    raise AttributeError(f"headrace.fn has no op '{full_name}'")


def __getattr__(attr: str):
    return _lookup(attr)


def __dir__():
    return sorted({n.split(".")[0] for n in SCHEMAS})
