"""The documentation: the op reference is written from the schemas and the whole site builds offline with Sphinx,
warnings as errors (a broken link or anchor fails), with a section for every registered op; README.md and
CONTRIBUTING.md link only to files that exist."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import headrace.ops  # noqa: F401  (registers every schema)
from headrace.docs_reference import families, write_reference
from headrace.schema import SCHEMAS

ROOT = Path(__file__).resolve().parents[1]


def test_reference_has_one_section_per_op(tmp_path):
    pages = write_reference(tmp_path)
    assert pages[0].name == "index.md"
    text = {p.stem: p.read_text() for p in pages[1:]}
    assert sorted(text) == sorted(families())
    for family, schemas in families().items():
        for schema in schemas:
            assert text[family].count(f"## `fn.{schema.name}`\n") == 1
            for arg in schema.args:
                assert f"| `{arg.name}` |" in text[family], (schema.name, arg.name)
    assert sum(len(s) for s in families().values()) == sum(1 for s in SCHEMAS.values() if not s.plugin_module)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The HTML site, built from a copy of docs/ (so the build writes nothing into the working tree)."""
    tmp = tmp_path_factory.mktemp("docs")
    src, out = tmp / "src", tmp / "html"
    shutil.copytree(ROOT / "docs", src, ignore=shutil.ignore_patterns("ops", "_build"))
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(src),
                             str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_site_builds_with_every_op(site):
    for family, schemas in families().items():
        page = (site / "ops" / f"{family}.html").read_text()
        for schema in schemas:
            assert f'<span class="pre">fn.{schema.name}</span></code><a class="headerlink"' in page, schema.name
    index = (site / "index.html").read_text()
    for page in ("pipelines", "executor", "cli", "torch", "gpu", "performance", "serving", "testing", "ops/index"):
        assert f'href="{page}.html"' in index, page


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_front_pages_link_to_existing_files(name):
    text = (ROOT / name).read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if "://" not in link:
            assert (ROOT / link).exists(), f"{name} links to a missing {link}"
