"""Sphinx configuration: Markdown pages (MyST) plus the op reference, written from the schemas into ops/ at every
build (docs/ops/ is never committed). Build: `sphinx-build -W docs build/docs` (offline: no intersphinx)."""

from pathlib import Path

from headrace.docs_reference import write_reference

project = "headrace"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "headrace"
html_copy_source = False
smartquotes = False  # keep the quotes of argument values ('cpu') as written

write_reference(Path(__file__).parent / "ops")
