"""Rewrites a pipeline function's syntax tree so that `if`, `and`, `or`, `not`, `x if c else y` and `while` call
`headrace.conditionals`, which decides at trace time whether a condition is plain Python or per-sample data.

An `if` becomes (names: the variables either branch assigns; each branch's code appears once)::

    _hr_cond_7 = _hr_.condition(<test>, <line>, <'return' if a branch leaves it, else None>)
    try:
        if _hr_cond_7.enter_true(names, locals()):     # plain Python: the test's truth; data: always
            <body>
        (x, y) = _hr_cond_7.enter_false(names, locals())  # data: the values from before the `if`
        if _hr_cond_7.run_false:
            <orelse>
        (x, y) = _hr_cond_7.finish(names, locals())       # data: merged per sample
    finally:
        _hr_cond_7.close()
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Callable
from types import ModuleType

from headrace.errors import SchemaError

RUNTIME = "_hr_"
PREFIX = "_hr_"

_IF_TEMPLATE = """
{cond} = {rt}.condition(_hr_test_, {line}, {leaving})
try:
    if {cond}.enter_true({names}, locals()):
        _hr_body_
    {target}{cond}.enter_false({names}, locals())
    if {cond}.run_false:
        _hr_orelse_
    {target}{cond}.finish({names}, locals())
finally:
    {cond}.close()
"""


class _Placeholders(ast.NodeTransformer):
    """Fills a template: a statement `_hr_x_` becomes a list of statements, a name `_hr_test_` an expression."""

    def __init__(self, statements: dict[str, list[ast.stmt]], expressions: dict[str, ast.expr]):
        self.statements, self.expressions = statements, expressions

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Name) and node.value.id in self.statements:
            return self.statements[node.value.id]
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        return self.expressions.get(node.id, node)


def _assigned_names(statements: list[ast.stmt], excluded: set[str]) -> list[str]:
    """Names bound by `statements` in the enclosing function's scope (not inside nested functions or classes)."""
    found: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = None
            for decorator in node.decorator_list:
                visit(decorator)
            return
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found[node.id] = None
        elif isinstance(node, ast.alias):
            found[(node.asname or node.name).split(".")[0]] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found[node.name] = None
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return [n for n in found if n not in excluded and not n.startswith(PREFIX)]


def _leaving_statement(statements: list[ast.stmt]) -> str | None:
    """'return', 'break' or 'continue' if one of `statements` would leave the branch, else None."""

    def visit(node: ast.AST, in_loop: bool) -> str | None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return None
        if isinstance(node, ast.Return):
            return "return"
        if isinstance(node, ast.Break | ast.Continue) and not in_loop:
            return "break" if isinstance(node, ast.Break) else "continue"
        loop = isinstance(node, ast.For | ast.AsyncFor | ast.While)
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, ast.AST):
                    # a loop's own body may break out of that loop; its `else` and header may not
                    found = visit(child, in_loop or (loop and field == "body"))
                    if found:
                        return found
        return None

    for statement in statements:
        found = visit(statement, False)
        if found:
            return found
    return None


class _Rewriter(ast.NodeTransformer):
    """The rewrite of one function body; `global`/`nonlocal` names are never merged."""

    def __init__(self, excluded: set[str]):
        self.excluded = excluded
        self.counter = itertools.count()

    def _thunk(self, expression: ast.expr) -> ast.Lambda:
        arguments = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                  defaults=[])
        return ast.Lambda(args=arguments, body=expression)

    def _call(self, name: str, *args: ast.expr) -> ast.Call:
        function = ast.Attribute(value=ast.Name(id=RUNTIME, ctx=ast.Load()), attr=name, ctx=ast.Load())
        return ast.Call(func=function, args=list(args), keywords=[])

    def visit_If(self, node: ast.If):
        names = _assigned_names(node.body + node.orelse, self.excluded)
        self.generic_visit(node)
        body, orelse = node.body, node.orelse or [ast.Pass()]
        cond = f"{PREFIX}cond_{next(self.counter)}"
        target = f"({', '.join(names)},) = " if names else ""
        leaving = _leaving_statement(node.body + node.orelse)
        source = _IF_TEMPLATE.format(cond=cond, rt=RUNTIME, line=node.lineno, leaving=repr(leaving),
                                     names=repr(tuple(names)), target=target)
        template = ast.parse(source).body
        for part in ast.walk(ast.Module(body=template, type_ignores=[])):
            if "lineno" in part._attributes:
                ast.copy_location(part, node)
        filled = _Placeholders({"_hr_body_": body, "_hr_orelse_": orelse},
                               {"_hr_test_": node.test}).visit(ast.Module(body=template, type_ignores=[]))
        return filled.body

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        if any(isinstance(n, ast.NamedExpr) for value in node.values for n in ast.walk(value)):
            return node  # a walrus would bind inside the thunk: leave such expressions to plain Python
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(self._call(name, *(self._thunk(v) for v in node.values)), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(self._call("not_", node.operand), node)
        return node

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        if any(isinstance(n, ast.NamedExpr) for part in (node.body, node.orelse) for n in ast.walk(part)):
            return node
        call = self._call("if_exp", node.test, self._thunk(node.body), self._thunk(node.orelse),
                          ast.Constant(node.lineno))
        return ast.copy_location(call, node)

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        node.test = ast.copy_location(self._call("loop_test", node.test, ast.Constant(node.lineno)), node.test)
        return node


def _declared_outside(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
    return names


def rewrite(func: Callable, runtime: ModuleType) -> Callable:
    """A new function with `func`'s code rewritten, its globals, closure values, defaults and name."""
    target = inspect.unwrap(func)
    try:
        source = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError) as exc:
        raise SchemaError(f"enable_conditionals needs the source of '{target.__qualname__}' ({exc}); define the "
                          "pipeline function in a file") from None
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SchemaError(f"enable_conditionals cannot parse the source of '{target.__qualname__}' ({exc})") from None
    ast.increment_lineno(tree, target.__code__.co_firstlineno - 1)  # messages and tracebacks name the file's lines
    function = tree.body[0] if tree.body else None
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or function.name != target.__name__:
        raise SchemaError(f"enable_conditionals: cannot find the definition of '{target.__qualname__}' in its "
                          "source (a lambda or a generated function cannot be rewritten)")
    function.decorator_list = []
    function = _Rewriter(_declared_outside(function)).visit(function)
    free = [n for n in target.__code__.co_freevars if n != "__class__"]
    factory = ast.parse(f"def {PREFIX}factory_({', '.join([RUNTIME, *free])}):\n    pass\n").body[0]
    factory.body = [function, ast.Return(value=ast.Name(id=function.name, ctx=ast.Load()))]
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, inspect.getsourcefile(target) or "<pipeline>", "exec")
    namespace: dict = {}
    exec(code, target.__globals__, namespace)
    cells = dict(zip(target.__code__.co_freevars, target.__closure__ or (), strict=True))
    values = []
    for name in free:
        try:
            values.append(cells[name].cell_contents)
        except ValueError:
            raise SchemaError(f"enable_conditionals: '{name}', used by '{target.__qualname__}', is not defined "
                              "yet") from None
    rewritten = namespace[f"{PREFIX}factory_"](runtime, *values)
    rewritten.__defaults__, rewritten.__kwdefaults__ = target.__defaults__, target.__kwdefaults__
    rewritten.__wrapped__ = target
    return rewritten
