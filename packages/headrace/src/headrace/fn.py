"""The `fn` namespace: one callable per op schema, as in `nvidia.dali.fn` (`fn.readers.file`, `fn.resize`, ...)."""

from __future__ import annotations

import difflib

from headrace import ops  # noqa: F401  (registers the schemas)
from headrace.graph import op_function
from headrace.legacy.namespace import deprecated_target
from headrace.schema import SCHEMAS


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
        return op_function(SCHEMAS[full_name])
    if any(n.startswith(full_name + ".") for n in SCHEMAS):
        return _Namespace(full_name)
    alias = deprecated_target(full_name) if "." not in full_name else None
    if alias is not None:  # DALI's older top-level names (fn.image_decoder, fn.uniform, fn.file_reader)
        return op_function(SCHEMAS[alias])
    if full_name.startswith("__"):  # dunder probes (copy, inspect) get the plain error
        raise AttributeError(full_name)
    names = sorted(SCHEMAS) + sorted({n.rsplit(".", 1)[0] for n in SCHEMAS if "." in n})
    close = difflib.get_close_matches(full_name, names, n=3, cutoff=0.7) if len(full_name) < 100 else []
    hint = f" Did you mean {' or '.join(f'fn.{c}' for c in close)}?" if close else ""
    raise AttributeError(f"headrace.fn has no op '{full_name}'.{hint}")


def __getattr__(attr: str):
    return _lookup(attr)


def __dir__():
    return sorted({n.split(".")[0] for n in SCHEMAS})
