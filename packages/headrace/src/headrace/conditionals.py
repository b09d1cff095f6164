"""`if` / `elif` / `else`, `and`, `or` and `not` on per-sample data (`pipeline_def(enable_conditionals=True)`).

The pipeline function is rewritten (see `conditionals_transform`) so that an `if` whose condition is a DataNode
calls `condition(...)` here: both branches are traced, the nodes of each carry a branch token (a `split` output)
as their guard, and every variable assigned in a branch is joined after the `if` by a `merge` node. The executor
runs a guarded node only for the samples that have its token, so each sample takes its own branch. Conditions on
plain Python values run as ordinary Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from headrace.errors import SchemaError
from headrace.graph import DataNode, current_graph

PREDICATE_OPS = ("_conditional.predicate", "_conditional.not_")


class Undefined:
    """What a variable holds after an `if` on data that assigned it in only one branch; any use is an error."""

    def __init__(self, message: str):
        self.undefined_message = message

    def __repr__(self) -> str:
        return f"Undefined({self.undefined_message!r})"

    def _fail(self, *args: Any, **kwargs: Any):
        raise SchemaError(self.undefined_message)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()


for _dunder in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv", "mod",
                "rmod", "pow", "rpow", "and", "rand", "or", "ror", "xor", "rxor", "lt", "le", "gt", "ge", "neg",
                "pos", "invert", "abs", "bool", "getitem", "iter", "len", "call"):
    setattr(Undefined, f"__{_dunder}__", Undefined._fail)

_UNSET = object()


def _fn():
    from headrace import fn

    return fn


def _constant(value: Any) -> DataNode:
    from headrace import types

    return types.Constant(value)


def predicate(value: DataNode) -> DataNode:
    """A per-sample boolean scalar from `value` (checked at run time)."""
    if value.op.schema.name in PREDICATE_OPS:
        return value
    if value.device != "cpu":
        raise SchemaError(f"the condition '{value.name}' ({value.op.schema.name}) is on the GPU; conditions of `if`, "
                          f"`and`, `or` and `not` on data are evaluated on the CPU: use `{value.name}.cpu()`")
    return _fn()._conditional.predicate(value)


class _Branch:
    """Make `token` the guard of the nodes defined until exit."""

    def __init__(self, token: DataNode):
        self.graph, self.token = current_graph(), token

    def __enter__(self) -> None:
        self.outer, self.graph.guard = self.graph.guard, self.token

    def __exit__(self, *exc: Any) -> None:
        self.graph.guard = self.outer


class Condition:
    """One `if` statement of the rewritten function: plain Python (static) or on data (split and merge)."""

    def __init__(self, test: Any, line: int, leaving: str | None = None):
        self.line = line
        self.static = not isinstance(test, DataNode)
        if self.static:
            self.value = bool(test)
            self.run_false = not self.value
            return
        if leaving:
            unsupported(line, leaving)
        self.run_false = True
        self.graph = current_graph()
        self.outer = self.graph.guard
        self.predicate = predicate(test)
        self.tokens = _fn()._conditional.split(self.predicate)
        self.before: dict[str, Any] = {}
        self.if_true: dict[str, Any] = {}

    def _current(self, names: Sequence[str], scope: dict[str, Any]) -> tuple:
        return tuple(scope[n] if n in scope else Undefined(f"'{n}' is not defined (it is assigned only in the "
                                                            f"branch of the `if` at line {self.line} not taken)")
                     for n in names)

    def enter_true(self, names: Sequence[str], scope: dict[str, Any]) -> bool:
        """Whether to run the `if` branch; on data, remember the values before the `if` and trace it."""
        if self.static:
            return self.value
        self.before = {n: scope.get(n, _UNSET) for n in names}
        self.graph.guard = self.tokens[0]
        return True

    def enter_false(self, names: Sequence[str], scope: dict[str, Any]) -> tuple:
        """The variables' values for the `else` branch: on data, those before the `if` (the true branch's are
        kept for the merge); plain Python leaves them as they are."""
        if self.static:
            return self._current(names, scope)
        self.if_true = {n: scope.get(n, _UNSET) for n in names}
        self.graph.guard = self.tokens[1]
        return tuple(self._undefined_before(n) if self.before[n] is _UNSET else self.before[n] for n in names)

    def finish(self, names: Sequence[str], scope: dict[str, Any]) -> tuple:
        """The variables after the `if`: on data, each merged into one value per sample."""
        if self.static:
            return self._current(names, scope)
        self.graph.guard = self.outer
        return tuple(self._merge(n, self.if_true[n], scope.get(n, _UNSET)) for n in names)

    def close(self) -> None:
        if not self.static:
            self.graph.guard = self.outer

    def _undefined_before(self, name: str) -> Undefined:
        return Undefined(f"'{name}' is used in the `else` branch of the `if` on data at line {self.line} but is "
                         "only assigned in its `if` branch")

    def _merge(self, name: str, if_true: Any, if_false: Any) -> Any:
        if if_true is if_false:
            return if_true
        if if_true is _UNSET or if_false is _UNSET or isinstance(if_true, Undefined) \
                or isinstance(if_false, Undefined):
            return Undefined(f"'{name}' is assigned in only one branch of the `if` on data at line {self.line}; "
                             "assign it in both branches (or before the `if`) to use it after the `if`")
        if isinstance(if_true, DataNode) or isinstance(if_false, DataNode):
            return merge(if_true, if_false, self.predicate, f"'{name}' after the `if` at line {self.line}")
        if type(if_true) is type(if_false) and isinstance(if_true, tuple | list) and len(if_true) == len(if_false):
            pairs = enumerate(zip(if_true, if_false, strict=True))
            return type(if_true)(self._merge(f"{name}[{i}]", t, f) for i, (t, f) in pairs)
        if isinstance(if_true, dict) and isinstance(if_false, dict) and if_true.keys() == if_false.keys():
            return {k: self._merge(f"{name}[{k!r}]", if_true[k], if_false[k]) for k in if_true}
        if _same(if_true, if_false):
            return if_true
        if all(isinstance(v, bool | int | float | np.number | np.ndarray) for v in (if_true, if_false)):
            return merge(if_true, if_false, self.predicate, f"'{name}' after the `if` at line {self.line}")
        # only an error if the value is used after the `if`
        return Undefined(f"'{name}' is {if_true!r} in one branch and {if_false!r} in the other of the `if` on data "
                         f"at line {self.line}; a value that differs per sample must be a DataNode or a number")


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b))) if hasattr(a, "shape") else bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are different
        return False


def merge(if_true: Any, if_false: Any, condition: DataNode, what: str) -> DataNode:
    """One value per sample: `if_true` where `condition` holds, else `if_false`; numbers become constants."""
    values = []
    for value in (if_true, if_false):
        if not isinstance(value, DataNode):
            if not isinstance(value, bool | int | float | np.ndarray | np.generic):
                raise SchemaError(f"{what}: a {type(value).__name__} in one branch and a DataNode in the other; "
                                  "both must be DataNodes (or numbers)")
            value = _constant(value)
        values.append(value)
    return _fn()._conditional.merge(values[0], values[1], condition)


def condition(test: Any, line: int, leaving: str | None = None) -> Condition:
    """The rewritten `if test:` statement's handle; `leaving` names a return/break/continue in its branches."""
    return Condition(test, line, leaving)


def not_(value: Any) -> Any:
    """`not value`: a node on data, plain Python otherwise."""
    return _fn()._conditional.not_(value) if isinstance(value, DataNode) else not value


def _logical(left: DataNode, right: Callable[[], Any], is_and: bool) -> DataNode:
    """`left and right()` / `left or right()` per sample; `right` is traced in the branch where it is evaluated,
    so each sample short-circuits as in Python."""
    left = predicate(left)
    tokens = _fn()._conditional.split(left)
    with _Branch(tokens[0] if is_and else tokens[1]):
        value = right()
        right_value = predicate(value if isinstance(value, DataNode) else _constant(bool(value)))
    if is_and:
        return _fn()._conditional.merge(right_value, left, left)
    return _fn()._conditional.merge(left, right_value, left)


def and_(*operands: Callable[[], Any]) -> Any:
    """`a and b and ...`, each operand given as a thunk so it is evaluated only where needed."""
    value = operands[0]()
    for operand in operands[1:]:
        if isinstance(value, DataNode):
            value = _logical(value, operand, is_and=True)
        elif not value:
            return value
        else:
            value = operand()
    return value


def or_(*operands: Callable[[], Any]) -> Any:
    """`a or b or ...`, each operand given as a thunk so it is evaluated only where needed."""
    value = operands[0]()
    for operand in operands[1:]:
        if isinstance(value, DataNode):
            value = _logical(value, operand, is_and=False)
        elif value:
            return value
        else:
            value = operand()
    return value


def if_exp(test: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], line: int) -> Any:
    """`a if test else b`: per sample on data, plain Python otherwise."""
    if not isinstance(test, DataNode):
        return if_true() if test else if_false()
    cond = Condition(test, line)
    with _Branch(cond.tokens[0]):
        true_value = if_true()
    with _Branch(cond.tokens[1]):
        false_value = if_false()
    return cond._merge("the conditional expression", true_value, false_value)


def loop_test(value: Any, line: int) -> Any:
    """The condition of a `while`: plain Python only."""
    if isinstance(value, DataNode):
        raise SchemaError(f"`while` on data (line {line}) is not supported: loop up to a maximum count with "
                          "`for i in range(MAX):` and put `if <per-sample condition>:` inside (max-length unrolling)")
    return value


def unsupported(line: int, what: str) -> None:
    """Raised where an `if` on data holds a statement that leaves the branch."""
    raise SchemaError(f"`{what}` inside an `if` on data (line {line}) is not supported: assign the result to a "
                      f"variable in both branches and {what} after the `if`")


def convert(func: Callable) -> Callable:
    """`func` rewritten so that `if`, `and`, `or` and `not` work on DataNodes."""
    from headrace.conditionals_transform import rewrite

    return rewrite(func, runtime=__import__(__name__, fromlist=["condition"]))
