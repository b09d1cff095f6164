"""benchmarks/triton_preprocess.py's models: a --background variant differs from headrace's own model only in its
answering parameters (a variant once also changed the pipeline's thread count, which skewed its comparison)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("tritonclient.grpc")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from triton_preprocess import background_model, write_headrace_model


def _parameters(config: str) -> dict[str, str]:
    keys = [line.split('"')[1] for line in config.splitlines() if line.strip().startswith("key:")]
    values = [line.split('"')[1] for line in config.splitlines() if "string_value" in line]
    return dict(zip(keys, values, strict=True))


@pytest.mark.parametrize(("threads", "variant", "answering"), [
    (None, "0", {"response_threads": "0", "background_queue_depth": "1"}),
    (3, "6:4", {"response_threads": "6", "background_queue_depth": "4"}),
])
def test_a_background_variant_keeps_the_pipeline_threads(tmp_path: Path, threads, variant, answering):
    write_headrace_model(tmp_path / "preprocess", "KIND_CPU", 1, threads, 500, None)
    write_headrace_model(tmp_path / background_model(variant), "KIND_CPU", 1, threads, 500, None, background=variant)
    own = _parameters((tmp_path / "preprocess" / "config.pbtxt").read_text())
    variant_parameters = _parameters((tmp_path / background_model(variant) / "config.pbtxt").read_text())
    assert variant_parameters == {**own, "respond_in_background": "true", **answering}
    assert own.get("num_threads") == (None if threads is None else str(threads))
