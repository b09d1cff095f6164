"""DALI's own documented pipelines (tests/dali_suite), each built from one body against `nvidia.dali` and `headrace` and
run on the same generated inputs in DALI's CPU build and in headrace.

Deterministic pipelines: the same number of outputs, dtypes, layouts and shapes, and values equal within the case's
`atol` / `rtol`: exact unless the case says otherwise (each tolerance is set, and where needed explained, at its
`@case`): uint8 pixels that went through an interpolating resampler (resize, rotate, warp_affine, YCbCr, colour
twist) within 1, the rounding of the filter's sums; float32 arithmetic within 1e-6..1e-4; normalized pixels within
1/57.1 (1 grey level over std 0.224*255); FFT-based audio features within a relative 1e-3 (log-mel 1e-3, MFCC 5e-3
absolute); resampled audio within 1e-5. Random pipelines: dtypes, layouts, dimensionality (shapes too where no draw
decides them), and the case's `check` (the windows and parameters the ops chose, and statistics), which DALI's
outputs must pass as well. A pipeline headrace fails is kept, marked xfail(strict) with the finding; only a failure
on headrace's side counts as expected (HeadraceFailedError), so a case broken on DALI's side fails."""

from __future__ import annotations

import numpy as np
import pytest
from dali_suite import Case, Output, SuiteData, library, load_all
from dali_suite.data import make_suite_data
from ops_support import needs_dali

CASES = load_all()
pytestmark = needs_dali


class HeadraceFailedError(Exception):
    """headrace failed a pipeline that DALI ran: only this is an expected failure of an xfail case (an error on the
    DALI side is a broken case and fails the test)."""


def _params() -> list:
    def marks(c: Case) -> list:
        return [pytest.mark.xfail(strict=True, reason=c.xfail, raises=HeadraceFailedError)] if c.xfail else []

    return [pytest.param(name, id=name, marks=marks(c)) for name, c in sorted(CASES.items())]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> SuiteData:
    return make_suite_data(tmp_path_factory.mktemp("dali_suite"))


def run(c: Case, lib_name: str, data: SuiteData) -> list[list[Output]]:
    """`c.iterations` batches of every output: (samples, layout, dtype name)."""
    pipe = c.build(library(lib_name), data)
    pipe.build()
    got = []
    try:
        for _ in range(c.iterations):
            batch = []
            for out in pipe.run():
                samples = [np.array(out.at(i)) for i in range(len(out))]
                batch.append((samples, out.layout() or "", samples[0].dtype.name if samples else ""))
            got.append(batch)
    finally:
        close = getattr(pipe, "close", None)  # headrace's pipelines hold threads; DALI's have no close()
        if close is not None:
            close()
    return got


def _atol(c: Case, k: int) -> float:
    return c.atol[k] if isinstance(c.atol, tuple) else c.atol


def compare(c: Case, ours: list[list[Output]], theirs: list[list[Output]]) -> None:
    """headrace's outputs against DALI's, as the module docstring says."""
    for it, (mine, dali) in enumerate(zip(ours, theirs, strict=True)):
        assert len(mine) == len(dali), f"iteration {it}: {len(mine)} outputs, DALI gives {len(dali)}"
        for k, ((a, layout_a, dtype_a), (b, layout_b, dtype_b)) in enumerate(zip(mine, dali, strict=True)):
            where = f"iteration {it}, output {k}"
            assert dtype_a == dtype_b, f"{where}: dtype {dtype_a}, DALI gives {dtype_b}"
            assert layout_a == layout_b, f"{where}: layout {layout_a!r}, DALI gives {layout_b!r}"
            assert len(a) == len(b), f"{where}: batch of {len(a)}, DALI gives {len(b)}"
            if c.random and not c.same_shapes:
                assert [s.ndim for s in a] == [s.ndim for s in b], f"{where}: dimensionality"
                continue
            assert [s.shape for s in a] == [s.shape for s in b], f"{where}: shapes"
            if c.random:
                continue
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                if x.dtype.kind in "fc" or _atol(c, k) or c.rtol:
                    np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), atol=_atol(c, k),
                                               rtol=c.rtol, err_msg=f"{where}, sample {i}")
                else:
                    np.testing.assert_array_equal(x, y, err_msg=f"{where}, sample {i}")
    if c.check is not None:
        c.check(ours)


def test_suite_size():
    """At least 60 documented pipelines, each naming where it is from; a random one has a check of its values."""
    assert len(CASES) >= 60
    assert all(c.source for c in CASES.values())
    assert [name for name, c in CASES.items() if c.random and c.check is None] == []


@pytest.mark.parametrize("name", _params())
def test_pipeline(name, data):
    c = CASES[name]
    theirs = run(c, "dali", data)
    if c.check is not None:
        c.check(theirs)  # the check describes DALI's behaviour; headrace's outputs must meet it too
    try:
        compare(c, run(c, "headrace", data), theirs)
    except Exception as error:  # any failure on headrace's side is the finding
        raise HeadraceFailedError(f"{type(error).__name__}: {error}") from error


def _epoch_through_iterator(lib_name: str, data: SuiteData) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ResNet-50 example's validation loop: DALIClassificationIterator over the pipeline, one epoch."""
    import importlib

    from dali_suite.resnet50 import create_dali_pipeline

    plugin = importlib.import_module("nvidia.dali.plugin.pytorch" if lib_name == "dali" else "headrace.plugin.pytorch")
    pipe = create_dali_pipeline(library(lib_name), data, is_training=False)
    pipe.build()
    loader = plugin.DALIClassificationIterator(pipe, reader_name="Reader",
                                               last_batch_policy=plugin.LastBatchPolicy.PARTIAL, auto_reset=True)
    got = [(batch[0]["data"].numpy(), batch[0]["label"].squeeze(-1).long().numpy()) for batch in loader]
    if lib_name == "headrace":
        pipe.close()
    return got


def test_resnet50_val_through_pytorch_iterator(data):
    """DALI's ResNet-50 example as it is used: the val pipeline read through DALIClassificationIterator (reader_name,
    LastBatchPolicy.PARTIAL), one epoch; data within the val case's tolerance, labels exact."""
    pytest.importorskip("torch")
    theirs = _epoch_through_iterator("dali", data)
    ours = _epoch_through_iterator("headrace", data)
    assert [x.shape for x, _ in ours] == [x.shape for x, _ in theirs]
    for (x, lx), (y, ly) in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(x, y, atol=1 / 57.1 + 1e-5)
        np.testing.assert_array_equal(lx, ly)
