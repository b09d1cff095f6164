"""The code's structure, read with `ast` (no imports, no GPU): no module uses another module's private names, and
the modules of headrace, headrace_kernels and headrace_torch import each other without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("headrace", "headrace_kernels", "headrace_torch")


def _module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module under packages/*/src and backend/."""
    found = {}
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[0] not in OURS:
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in sorted((ROOT / "backend").rglob("*.py")):
        found[".".join(("backend", *path.relative_to(ROOT / "backend").with_suffix("").parts))] = path
    return found


MODULES = _module_files()
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def _where(module: str, node: ast.AST) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{node.lineno}"


def _from_target(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name a `from ... import` statement reads from."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str):
    """(statement, module imported or imported from, name it binds, name taken from it (None for `import a.b`),
    whether `import a.b as x` names it) for every import in `module`, at any depth (functions included)."""
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                yield node, alias.name, bound, None, alias.asname is not None
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(module, node)
            for alias in node.names:
                yield node, target, alias.asname or alias.name, alias.name, False


def _private_uses(module: str) -> list[str]:
    """Every use in `module` of a private name of another of our modules."""
    problems = []
    bindings: dict[str, str] = {}  # a name bound to one of our modules -> that module
    for node, target, bound, name, aliased in _imports(module):
        if not _is_ours(target) or target == "__future__":
            continue
        if name is None:  # import a.b.c [as x]
            if any(_is_private(part) for part in target.split(".")):
                problems.append(f"{_where(module, node)}: {module} imports private module {target}")
            bindings[bound] = target if aliased else target.split(".")[0]
            continue
        if name == "*":
            continue
        if _is_private(name) and target != module:
            problems.append(f"{_where(module, node)}: {module} imports private name {name} from {target}")
        if f"{target}.{name}" in MODULES:
            bindings[bound] = f"{target}.{name}"
    parents = {id(child): parent for parent in ast.walk(TREES[module]) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(TREES[module]):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id not in bindings:
            continue
        # the chain a.b.c.d of attributes on a name bound to one of our modules, innermost first
        chain, outer = [node.attr], node
        while isinstance(parents.get(id(outer)), ast.Attribute):
            outer = parents[id(outer)]
            chain.append(outer.attr)
        target = bindings[node.value.id]
        for attr in chain:
            if _is_private(attr) and target != module:
                problems.append(f"{_where(module, node)}: {module} uses private name {attr} of {target}")
                break
            if f"{target}.{attr}" not in MODULES:
                break
            target = f"{target}.{attr}"
    return problems


def test_no_module_uses_another_modules_private_names():
    problems = [problem for module in MODULES for problem in _private_uses(module)]
    assert not problems, "private names used across modules:\n" + "\n".join(problems)


def _import_graph() -> dict[str, dict[str, str]]:
    """Module -> {module it imports: where}. `from p import x` imports p.x when that is a module, else p (a
    package's `__init__`); parent packages run on the way are not counted."""
    graph: dict[str, dict[str, str]] = {}
    for module in MODULES:
        if not _is_ours(module):
            continue
        edges = graph.setdefault(module, {})
        for node, target, _bound, name, _aliased in _imports(module):
            if name is not None and name != "*" and f"{target}.{name}" in MODULES:
                target = f"{target}.{name}"
            if target in MODULES and _is_ours(target) and target != module:
                edges.setdefault(target, _where(module, node))
    return graph


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle (a list of modules, first repeated last) for every strongly connected component of the graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_shortest_cycle(graph, component) for component in sorted(components)]


def _shortest_cycle(graph: dict[str, dict[str, str]], component: list[str]) -> list[str]:
    """The shortest way from the component's first module back to itself, inside the component (breadth first)."""
    members, first = set(component), component[0]
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        following = []
        for module in frontier:
            for child in sorted(graph[module]):
                if child == first:
                    return [*paths[module], first]
                if child in members and child not in paths:
                    paths[child] = [*paths[module], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def test_modules_import_each_other_without_cycles():
    graph = _import_graph()
    lines = []
    for cycle in _cycles(graph):
        steps = ", ".join(f"{a} -> {b} at {graph[a][b]}" for a, b in zip(cycle, cycle[1:], strict=False))
        lines.append(" -> ".join(cycle) + f"\n    ({steps})")
    assert not lines, "import cycles (one per group of modules that import each other):\n" + "\n".join(lines)


def test_the_checks_see_private_uses_and_cycles():
    """The two checks find what they are for (on made-up modules), so a pass means something."""
    source = {"headrace.a": "from headrace.b import _hidden, shown\nimport headrace.b as bee\nbee._x\nbee.__doc__\n",
              "headrace.b": "def f():\n    from headrace import a\n"}
    saved = dict(MODULES), dict(TREES)
    try:
        for name, text in source.items():
            MODULES[name] = ROOT / "packages/headrace/src" / (name.replace(".", "/") + ".py")
            TREES[name] = ast.parse(text)
        problems = _private_uses("headrace.a")
        assert len(problems) == 2 and "_hidden" in problems[0] and "_x" in problems[1]
        assert ["headrace.a", "headrace.b", "headrace.a"] in _cycles(_import_graph())
    finally:
        MODULES.clear(), TREES.clear()
        MODULES.update(saved[0]), TREES.update(saved[1])
