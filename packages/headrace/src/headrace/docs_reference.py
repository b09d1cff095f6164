"""The op reference: one Markdown page per op family, written from the schemas (the docs build calls
`write_reference`), so the reference can never disagree with what `fn.*` accepts."""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import shutil
from pathlib import Path

import headrace.ops  # noqa: F401  (registers every schema)
from headrace.schema import COMMON_ARGS, REQUIRED, SCHEMAS, SEED_ARG, Arg, OpSchema

CHECKPOINT_RULES = {
    "none": "stateless: a checkpoint saves nothing of it.",
    "rng": "random: its streams are keyed by (node seed, sample number), so the pipeline's batch counter brings "
           "back the same draws; nothing of its own is saved.",
    "reader": "a reader: a checkpoint saves its position (epoch, position in the epoch, shard).",
    "source": "an external source: a checkpoint saves its counters.",
    None: "not declared (the test suite fails for such an op).",
}


def family_of(schema: OpSchema) -> str:
    """The page an op goes on: its family (the declaring module `headrace.ops.<family>`), else "other"."""
    return schema.family or "other"


def families() -> dict[str, list[OpSchema]]:
    """Every op headrace declares (not user ops a process registered through headrace.plugin), by family, both
    sorted by name."""
    by_family: dict[str, list[OpSchema]] = {}
    for schema in SCHEMAS.values():
        if schema.plugin_module:
            continue
        by_family.setdefault(family_of(schema), []).append(schema)
    return {f: sorted(s, key=lambda x: x.name) for f, s in sorted(by_family.items())}


def _summary(obj) -> str | None:
    """The first paragraph of an object's docstring, on one line."""
    doc = inspect.getdoc(obj) if obj is not None else None
    return " ".join(doc.strip().split("\n\n")[0].split()) if doc else None


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(value) -> str:
    if value is REQUIRED:
        return "required"
    if isinstance(value, enum.Enum):
        return f"`types.{value.name}`"
    if isinstance(value, list) and value and all(isinstance(v, enum.Enum) for v in value):
        return "`[" + ", ".join(f"types.{v.name}" for v in value) + "]`"
    return f"`{value!r}`"


def _choice(value) -> str:
    return f"types.{value.name}" if isinstance(value, enum.Enum) else repr(value)


def _type(arg: Arg) -> str:
    text = arg.type_name
    if arg.list_len:
        lo, hi = arg.list_len
        text += f" ({lo})" if lo == hi else f" ({lo} to {hi})"
    return text


def _args_table(args) -> list[str]:
    lines = ["| Argument | Type | Default | Per-sample | Description |", "| --- | --- | --- | --- | --- |"]
    for arg in args:
        doc = arg.doc + (f" One of {', '.join(_choice(c) for c in arg.choices)}." if arg.choices else "")
        lines.append(f"| `{arg.name}` | {_cell(_type(arg))} | {_cell(_value(arg.default))} | "
                     f"{'DataNode allowed' if arg.tensor_input else 'no'} | {_cell(doc)} |")
    return lines


def _outputs(schema: OpSchema) -> str:
    count = schema.num_outputs
    text = (_summary(count) or "depends on the arguments") if callable(count) else str(count)
    return text


def _inputs(schema: OpSchema) -> str:
    lo, hi = schema.min_inputs, schema.max_inputs
    if not hi:
        return "none"
    return f"{lo}" if lo == hi else f"{lo} to {hi}"


def _layouts(schema: OpSchema) -> str:
    layouts = schema.input_layouts
    return f" (layouts {', '.join(layouts)}; an input of another known layout is refused)" if layouts else ""


def _kind(schema: OpSchema) -> str:
    if schema.batch_op:
        return "a batch op at the root of the graph (reader or source)"
    if schema.whole_batch:
        return "whole batch (the kernel sees all samples at once)"
    return "per sample"


def op_section(schema: OpSchema) -> list[str]:
    """The reference of one op: its doc, facts, and arguments table."""
    internal = schema.name.startswith("_") or schema.name.startswith("math.")
    lines = [f"(op-{schema.name})=", f"## `fn.{schema.name}`", ""]
    if internal:
        lines += ["*Inserted by headrace (DataNode operators, conditionals); not called directly.*", ""]
    lines += [schema.doc, "",
              f"- **Devices:** {', '.join(schema.devices)}",
              f"- **Inputs:** {_inputs(schema)}{_layouts(schema)}",
              f"- **Outputs:** {_outputs(schema)}",
              f"- **Output spec:** {_summary(schema.output_spec) or 'not declared'}",
              f"- **Runs:** {_kind(schema)}",
              f"- **Random:** {'yes (has a `seed` argument)' if schema.random else 'no'}",
              f"- **Checkpoint rule:** `{schema.state}`, {CHECKPOINT_RULES[schema.state]}"]
    rule = _summary(schema.rule)
    if rule:
        lines.append(f"- **Argument rule:** {rule}")
    lines.append("")
    if schema.args:
        lines += _args_table(schema.args)
    else:
        lines.append("No arguments of its own.")
    extra = ", ".join(f"`{a.name}`" for a in (*COMMON_ARGS, *((SEED_ARG,) if schema.random else ())))
    lines += ["", f"Also {extra}: see {{ref}}`common arguments <op-common-arguments>`.", ""]
    return lines


def family_page(family: str, schemas: list[OpSchema]) -> str:
    """The page of one family: the declaring module's docstring, then each op."""
    lines = [f"# {family}", ""]
    if importlib.util.find_spec(f"headrace.ops.{family}") is not None:
        module = importlib.import_module(f"headrace.ops.{family}")
        lines += [f"*Declared in `headrace/ops/{family}.py`.*", "", inspect.getdoc(module) or "", ""]
    for schema in schemas:
        lines += op_section(schema)
    return "\n".join(lines)


def index_page(by_family: dict[str, list[OpSchema]]) -> str:
    """The reference's front page: families and their ops, the arguments every op takes, and the toctree."""
    lines = ["# Op reference", "",
             "Generated from the op schemas (`headrace.schema.SCHEMAS`) at every docs build. Arguments marked "
             "\"DataNode allowed\" may be given per sample as a DataNode (argument inputs, see "
             "[Pipelines](../pipelines.md)).", "",
             "| Family | Ops |", "| --- | --- |"]
    for family, schemas in by_family.items():
        refs = ", ".join(f"{{ref}}`{s.name} <op-{s.name}>`" for s in schemas)
        lines.append(f"| [{family}]({family}.md) | {refs} |")
    lines += ["", "(op-common-arguments)=", "## Common arguments", "",
              "Every op takes these; random ops also take `seed`.", "", *_args_table((*COMMON_ARGS, SEED_ARG)), "",
              "```{toctree}", ":hidden:", "", *by_family, "```", ""]
    return "\n".join(lines)


def write_reference(out_dir: str | Path) -> list[Path]:
    """Write `index.md` and one `<family>.md` per family into `out_dir` (replacing what was there)."""
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    by_family = families()
    written = [out / "index.md"]
    written[0].write_text(index_page(by_family))
    for family, schemas in by_family.items():
        path = out / f"{family}.md"
        path.write_text(family_page(family, schemas))
        written.append(path)
    return written
