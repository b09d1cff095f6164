"""The readers stream (issue 19): the host memory of a process reading a data set does not follow the data set's size.

Each reader reads, in a fresh process (benchmarks/readers_memory.py's child, which samples /proc/self/status after
every batch), two whole epochs of a data set of SMALL bytes and then two of one 4 times larger (files written with
the ecosystem's writers, as the readers' tests write them). A reader that kept its records, or a cache of them, would
grow its anonymous memory (RssAnon) by the difference, ~3 * SMALL; a streaming one stays within a few batches of
where it was. The bound, BOUND, is ~10 batches' worth plus a margin for the allocator, well under that difference.
File pages mapped into the process (RssFile) are checked alike for the readers that read() their files; headrace's
LMDB readers map the database (liblmdb) and its record readers their record files, so what they touched counts in
RssFile: the page cache's, not the process's.
No timing is asserted.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from readers_memory import FORMATS, MB, MMAPS, dataset_bytes, make_dataset, measure

pytest.importorskip("lmdb")
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc/<pid>/status (Linux)")

SMALL = 8 * MB
RECORD = 64 * 1024
BATCH = 8
BOUND = 10 * BATCH * RECORD + 4 * MB


@pytest.fixture(scope="module")
def reads(tmp_path_factory) -> dict[str, tuple[list[dict], list[int]]]:
    """Per format: headrace's 'done' records of the SMALL and the 4 * SMALL read, and the two data sets' sizes."""
    root = tmp_path_factory.mktemp("reader_memory")
    folders = {fmt: [make_dataset(root / f"x{k}", fmt, k * SMALL, RECORD) for k in (1, 4)] for fmt in FORMATS}

    def run(fmt: str) -> list[dict]:
        return measure("headrace", fmt, folders[fmt], batch_size=BATCH, threads=2, epochs=2, progress=False)

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(FORMATS, pool.map(run, FORMATS), strict=True))
    return {fmt: (results[fmt], [dataset_bytes(f) for f in folders[fmt]]) for fmt in FORMATS}


def _mb(value: int) -> str:
    return f"{value / MB:.1f} MB"


@pytest.mark.parametrize("fmt", FORMATS)
def test_anonymous_memory_does_not_grow_with_the_data_set(reads, fmt):
    (small, large), (small_bytes, large_bytes) = reads[fmt]
    assert small_bytes >= SMALL and large_bytes >= 3.5 * small_bytes, "the data sets are not SMALL and ~4 * SMALL"
    assert large["batches"] >= 3.5 * small["batches"], "the larger read did not read ~4 times the batches"
    growth = large["peak"]["RssAnon"] - small["peak"]["RssAnon"]
    assert growth < BOUND, (f"readers.{fmt}: reading {_mb(large_bytes)} instead of {_mb(small_bytes)} grew the peak "
                            f"anonymous memory by {_mb(growth)} (bound {_mb(BOUND)}): it does not stream")
    first, second = large["epochs"]
    epoch_growth = second["RssAnon"] - first["RssAnon"]
    assert epoch_growth < BOUND, (f"readers.{fmt}: the second epoch of {_mb(large_bytes)} grew the anonymous memory "
                                  f"by {_mb(epoch_growth)} (bound {_mb(BOUND)}): something keeps what it read")


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - MMAPS["headrace"]))
def test_readers_that_read_their_files_map_none_of_them(reads, fmt):
    (small, large), (small_bytes, large_bytes) = reads[fmt]
    growth = large["peak"]["RssFile"] - small["peak"]["RssFile"]
    assert growth < BOUND, (f"readers.{fmt}: reading {_mb(large_bytes)} instead of {_mb(small_bytes)} grew the mapped "
                            f"file pages by {_mb(growth)} (bound {_mb(BOUND)})")


def test_the_measure_sees_a_reader_that_keeps_what_it_read(tmp_path):
    """The control: the same two reads, every sample copied and kept, grow RssAnon by about the data read; so the
    bound above separates a streaming reader from one that is not."""
    folders = [make_dataset(tmp_path / f"x{k}", "file", k * SMALL, RECORD) for k in (1, 4)]
    small, large = measure("headrace", "file", folders, batch_size=BATCH, threads=2, epochs=1, progress=False,
                           keep=True)
    growth = large["peak"]["RssAnon"] - small["peak"]["RssAnon"]
    kept_more = dataset_bytes(folders[1]) - dataset_bytes(folders[0])
    assert growth > max(0.8 * kept_more, 2 * BOUND), f"keeping {_mb(kept_more)} more grew RssAnon by {_mb(growth)}"
