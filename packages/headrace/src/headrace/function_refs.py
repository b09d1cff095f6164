"""User code in a pipeline file, by reference: a function is stored as its module, its qualified name and a hash of
its source, never as pickled code. Loading resolves a reference only inside modules the caller trusts."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any

from headrace.errors import PipelineFileError, SchemaError

REFERENCE_KEYS = frozenset({"module", "qualname", "sha256"})
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def source_hash(function: Callable) -> str:
    """SHA-256 of the function's source text: what a loaded file checks its module still defines."""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = getattr(getattr(function, "__code__", None), "co_code", b"").hex()  # compiled only: its bytecode
    return hashlib.sha256(source.encode()).hexdigest()


def reference(function: Callable, where: str) -> dict[str, str]:
    """The file form of `function`: {"module", "qualname", "sha256"}; a SchemaError (naming `where`, the op and
    argument) for a function that cannot be found again by name: a lambda, a nested function, a bound method."""
    function = getattr(function, "py_func", function)  # a numba dispatcher: the Python function it compiled
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        what = "a lambda or a nested function" if qualname and "<" in qualname else (
            "defined in __main__" if module == "__main__" else f"a {type(function).__name__}")
        raise SchemaError(f"{where}: a pipeline file stores a function by its module and name, and "
                          f"{short_name(function)} is {what}; define it at the top level of an importable module")
    found = _lookup(module, qualname)
    if getattr(found, "py_func", found) is not function:
        raise SchemaError(f"{where}: {module}.{qualname} is not the function given (it was redefined or wrapped)")
    return {"module": module, "qualname": qualname, "sha256": source_hash(function)}


def short_name(function: Any) -> str:
    return getattr(function, "__qualname__", None) or type(function).__name__


def is_reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == REFERENCE_KEYS and all(isinstance(v, str) for v in value.values())


def trusted(module: str, allowed_modules: Iterable[str]) -> bool:
    """Whether `module` is one of `allowed_modules` or inside one of those packages."""
    return any(module == allowed or module.startswith(allowed + ".") for allowed in allowed_modules)


def resolve(value: Any, allowed_modules: Iterable[str], where: str) -> Callable:
    """The function a file's reference names, imported only when its module is trusted and checked against the
    stored hash; a PipelineFileError naming `where` (node, op, argument) and the module otherwise."""
    if not is_reference(value):
        raise PipelineFileError(f"invalid pipeline file: {where}: expected a function reference "
                                f"{{'module', 'qualname', 'sha256'}}")
    module, qualname = value["module"], value["qualname"]
    if not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(qualname):
        raise PipelineFileError(f"invalid pipeline file: {where}: {module!r}.{qualname!r} is not a dotted name")
    allowed = list(allowed_modules)
    if not trusted(module, allowed):
        raise PipelineFileError(f"{where} calls {module}.{qualname}; the pipeline file was not loaded because module "
                                f"'{module}' is not trusted (pass allowed_modules=['{module}'] to load it)")
    try:
        function = _lookup(module, qualname)
    except SchemaError as exc:
        raise PipelineFileError(f"{where}: {exc}") from None
    digest = source_hash(getattr(function, "py_func", function))
    if digest != value["sha256"]:
        raise PipelineFileError(f"{where}: the source of {module}.{qualname} changed since the pipeline file was "
                                f"written (sha256 {digest[:12]}..., the file has {value['sha256'][:12]}...)")
    return function


def import_trusted(module: str, allowed_modules: Iterable[str], where: str) -> None:
    """Import `module` (it declares a user op) when it is trusted; a PipelineFileError otherwise."""
    if not _DOTTED.fullmatch(module):
        raise PipelineFileError(f"invalid pipeline file: {where}: {module!r} is not a module name")
    if not trusted(module, allowed_modules):
        raise PipelineFileError(f"{where} is declared by module '{module}', which is not trusted (pass "
                                f"allowed_modules=['{module}'] to load it)")
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001  (the trusted module's own failure, reported as the file's)
        raise PipelineFileError(f"{where}: importing module '{module}' failed: {type(exc).__name__}: {exc}") from None


def _lookup(module: str, qualname: str) -> Callable:
    try:
        found: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001  (user code: whatever it raises becomes one SchemaError)
        raise SchemaError(f"module '{module}' cannot be imported: {type(exc).__name__}: {exc}") from None
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise SchemaError(f"module '{module}' has no {qualname}")
    if not callable(found):
        raise SchemaError(f"{module}.{qualname} is not callable")
    return found
