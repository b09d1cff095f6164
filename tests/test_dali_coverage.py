"""scripts/dali_coverage.py: its figure must be what headrace's schemas and DALI's installed `fn` catalogue give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ops_support import needs_dali

from headrace.schema import SCHEMAS

pytestmark = needs_dali
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "dali_coverage.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True,
                          timeout=120)


@pytest.fixture(scope="module")
def report() -> dict:
    return json.loads(_run("--json").stdout)


def _resolve(namespace, path: str):
    for part in path.split("."):
        namespace = getattr(namespace, part, None)
        if namespace is None:
            return None
    return namespace


def test_current_ops_split_by_schemas(report):
    """Covered = DALI's current names that headrace has a schema for; missing = the rest; the figure is their ratio."""
    import nvidia.dali.fn as dali_fn

    current = report["current"]
    names = set(current["covered_ops"]) | set(current["missing_ops"])
    assert not set(current["covered_ops"]) & set(current["missing_ops"])
    assert current["total"] == len(names) and current["covered"] == len(current["covered_ops"])
    assert set(current["covered_ops"]) == {n for n in names if n in SCHEMAS}
    assert current["percent"] == round(100 * current["covered"] / current["total"], 1)
    for name in names - {"experimental.numba_function"}:  # that one lives in the numba plugin's namespace
        assert _resolve(dali_fn, name) is not None, name
    # The current ops DALI's examples rely on are counted as current, not as aliases.
    assert {"decoders.image", "random.coin_flip", "readers.file", "crop_mirror_normalize"} <= names
    grouped = {f"{ns}.{n}" if ns else n for ns, ns_names in current["missing_by_namespace"].items() for n in ns_names}
    assert grouped == set(current["missing_ops"])


def test_deprecated_aliases_apart(report):
    """`coin_flip`, `uniform`, `image_decoder`, `*_reader` and `hidden.*` are counted apart from the current names."""
    aliases = set(report["deprecated_aliases"]["covered_ops"]) | set(report["deprecated_aliases"]["missing_ops"])
    assert {"coin_flip", "uniform", "image_decoder", "file_reader", "hidden.coin_flip"} <= aliases
    assert not aliases & (set(report["current"]["covered_ops"]) | set(report["current"]["missing_ops"]))
    assert report["deprecated_aliases"]["replacements"]["coin_flip"] == "random.coin_flip"


def test_text_report_states_the_figure(report):
    text = _run().stdout
    current = report["current"]
    assert f"{current['covered']} of {current['total']} current ops" in text
    assert f"({current['percent']:.1f}%)" in text
    for name in current["missing_ops"]:
        assert name.rpartition(".")[2] in text
