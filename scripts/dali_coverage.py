"""How much of DALI's `fn` catalogue headrace covers: DALI's ops from its installed build, headrace's from its schemas.

    python scripts/dali_coverage.py [--json]

DALI's names come from walking `nvidia.dali.fn` (and the numba plugin's `fn.experimental`); the deprecated aliases
(`coin_flip`, `uniform`, `image_decoder`, `*_reader`, `hidden.*`, ...) are counted apart from the current names, so
the figure is about the ops a user of today's DALI calls."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

NUMBA_MODULE = "nvidia.dali.plugin.numba.fn.experimental"


@dataclass(frozen=True)
class DaliOp:
    """One name of DALI's `fn` catalogue: its dotted path, and what it is an alias of when it is deprecated."""

    path: str
    deprecated: bool
    replacement: str = ""


@dataclass
class Coverage:
    """DALI's current ops and deprecated aliases, split into those headrace has and those it lacks."""

    dali_version: str
    current: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    covered: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    aliases_covered: list[str] = field(default_factory=list)
    aliases_missing: list[str] = field(default_factory=list)
    replacements: dict[str, str] = field(default_factory=dict)

    @property
    def percent(self) -> float:
        return 100.0 * len(self.covered) / len(self.current) if self.current else 0.0

    def to_json(self) -> dict:
        """The machine-readable form printed by --json."""
        return {
            "dali_version": self.dali_version,
            "current": {"total": len(self.current), "covered": len(self.covered),
                        "percent": round(self.percent, 1), "covered_ops": self.covered,
                        "missing_ops": self.missing, "missing_by_namespace": by_namespace(self.missing)},
            "deprecated_aliases": {"total": len(self.aliases), "covered": len(self.aliases_covered),
                                   "covered_ops": self.aliases_covered, "missing_ops": self.aliases_missing,
                                   "replacements": self.replacements},
        }


def _walk(module: types.ModuleType, prefix: str, root: str) -> Iterator[tuple[str, object]]:
    """Every public callable under `module` (its submodules inside `root` included), with its dotted path."""
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith(root):
                yield from _walk(obj, f"{prefix}{name}.", root)
        elif callable(obj):
            yield f"{prefix}{name}", obj


def _classify(path: str, func: object, backend) -> tuple[bool, str]:
    """(deprecated, schema name of the replacement): deprecated where DALI's schema says so, or where the name lives
    in a `hidden` namespace (then the replacement is the op of the same schema)."""
    schema_name = getattr(func, "_schema_name", None) or ""
    deprecated, replacement = "hidden" in path.split("."), ""
    if schema_name:
        try:
            schema = backend.GetSchema(schema_name)
        except RuntimeError:  # a Python-only op without a registered schema
            return deprecated, ""
        if schema.IsDeprecated():
            deprecated, replacement = True, schema.DeprecatedInFavorOf() or ""
        elif deprecated:
            replacement = schema_name
    return deprecated, replacement


def dali_ops() -> tuple[str, list[DaliOp]]:
    """DALI's version and every op name of its `fn` catalogue (the numba plugin's included when it imports)."""
    import nvidia.dali as dali
    import nvidia.dali.backend as backend
    import nvidia.dali.fn as dali_fn

    found = list(_walk(dali_fn, "", "nvidia.dali.fn"))
    try:
        found += list(_walk(importlib.import_module(NUMBA_MODULE), "experimental.", NUMBA_MODULE))
    except ImportError:  # numba is not installed: DALI has the op, we cannot list it from here
        pass
    classified = {path: _classify(path, func, backend) for path, func in found}
    # The current `fn` path of each schema, to name a deprecated alias's replacement as a user calls it.
    current_path = {getattr(func, "_schema_name", ""): path for path, func in found if not classified[path][0]}
    # A replacement that is itself deprecated (readers__Sequence): its fn path outside `hidden`.
    any_path: dict[str, str] = {}
    for path, func in found:
        if "hidden" not in path.split("."):
            any_path.setdefault(getattr(func, "_schema_name", ""), path)
    ops = [DaliOp(path, deprecated, current_path.get(replacement) or any_path.get(replacement)
                  or replacement.replace("__", "."))
           for path, (deprecated, replacement) in classified.items()]
    return dali.__version__, sorted(ops, key=lambda op: op.path)


def headrace_ops() -> set[str]:
    """headrace's public op names (internal `_`-prefixed schemas, such as the conditionals' plumbing, left out)."""
    from headrace.schema import SCHEMAS

    return {name for name in SCHEMAS if not name.startswith("_")}


def coverage() -> Coverage:
    """DALI's catalogue against headrace's schemas."""
    version, ops = dali_ops()
    ours = headrace_ops()
    cov = Coverage(version)
    for op in ops:
        if op.deprecated:
            cov.aliases.append(op.path)
            unhidden = ".".join(part for part in op.path.split(".") if part != "hidden")
            names = {op.path, op.replacement, unhidden}
            (cov.aliases_covered if names & ours else cov.aliases_missing).append(op.path)
            if op.replacement:
                cov.replacements[op.path] = op.replacement
        else:
            cov.current.append(op.path)
            (cov.covered if op.path in ours else cov.missing).append(op.path)
    return cov


def by_namespace(paths: list[str]) -> dict[str, list[str]]:
    """Names grouped by their namespace (`""` for the top level)."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        ns, _, name = path.rpartition(".")
        groups.setdefault(ns, []).append(name)
    return dict(sorted(groups.items()))


def report(cov: Coverage) -> str:
    """The human-readable report."""
    lines = [f"headrace covers {len(cov.covered)} of {len(cov.current)} current ops of DALI {cov.dali_version}'s "
             f"fn catalogue ({cov.percent:.1f}%)",
             f"deprecated aliases: {len(cov.aliases_covered)} of {len(cov.aliases)} covered (by name or by their "
             "replacement)", "", "missing current ops, by namespace:"]
    for ns, names in by_namespace(cov.missing).items():
        lines.append(f"  {ns or 'fn'} ({len(names)}): {', '.join(names)}")
    lines += ["", "deprecated aliases missing (neither the name nor its replacement), by namespace:"]
    for ns, names in by_namespace(cov.aliases_missing).items():
        lines.append(f"  {ns or 'fn'} ({len(names)}): {', '.join(names)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the machine-readable form")
    args = parser.parse_args(argv)
    cov = coverage()
    print(json.dumps(cov.to_json(), indent=2) if args.json else report(cov))
    return 0


if __name__ == "__main__":
    sys.exit(main())
