"""readers.file's class tree as DALI's: which files a file_root yields and their labels (class folders sorted, only
the files directly inside them, hidden and linked folders included, empty ones keeping their label), dir_filters,
and `epoch_size()` / `reader_meta()` without a name. Against DALI's CPU build on the same folders (marker dali):
exact. shuffle_after_epoch_seed against its documented contract (DALI's permutations are its own)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from ops_support import HAS_DALI, needs_dali

import headrace
from headrace.errors import SchemaError

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Class folders with files at two depths, a hidden one, an empty one, a linked one and a file at the root."""
    root = tmp_path_factory.mktemp("classes")
    files = {"apple/a1.jpg": "a1", "apple/a2.JPG": "a2", "apple/.dot.jpg": "a0", "apple/deeper/x.jpg": "ax",
             "b_empty/deeper/y.jpg": "by", "cherry/c1.png": "c1", "cherry/notes.txt": "ct", ".hidden/h1.jpg": "h1",
             "top.jpg": "t"}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "d_empty").mkdir()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "l1.jpg").write_text("l1")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    return root


def _library(name: str):
    return headrace if name == "headrace" else importlib.import_module("nvidia.dali")


def _read(name: str, root, **kwargs) -> tuple[list[tuple[str, int]], object]:
    lib = _library(name)

    @lib.pipeline_def(batch_size=16, num_threads=1, device_id=None)
    def pipe():
        files, labels = lib.fn.readers.file(file_root=str(root), name="Reader", **kwargs)
        return files, labels

    built = pipe()
    built.build()
    size = built.epoch_size("Reader")
    files, labels = built.run()
    return [(bytes(np.array(files.at(i))).decode(), int(np.array(labels.at(i)).ravel()[0])) for i in range(size)], \
        built


EXPECTED = [("h1", 0), ("a0", 1), ("a1", 1), ("a2", 1), ("c1", 3), ("l1", 5)]
"""Class folders sorted (.hidden, apple, b_empty, cherry, d_empty, linked: the empty ones keep their labels), each
one's files sorted by name and matched case-insensitively; nothing from deeper folders or the root."""


@pytest.mark.parametrize("api", APIS)
def test_class_tree_lists_only_the_files_inside_each_class_folder(api, tree):
    got, _ = _read(api, tree)
    assert got == EXPECTED


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")
@pytest.mark.parametrize("kwargs", [{}, {"dir_filters": ["a*", "c*"]}, {"dir_filters": ["*e*"]},
                                    {"dir_filters": ["APPLE"]}, {"dir_filters": ["APPLE", "cherry"],
                                                                 "case_sensitive_filter": True},
                                    {"dir_filters": ["*"], "file_filters": ["*1.*"]}, {"dir_filters": [".*"]}])
def test_listing_and_labels_as_dali(tree, kwargs):
    ours, _ = _read("headrace", tree, **kwargs)
    theirs, _ = _read("dali", tree, **kwargs)
    assert ours == theirs


@pytest.mark.parametrize("api", APIS)
def test_dir_filters_renumber_the_kept_classes(api, tree):
    got, _ = _read(api, tree, dir_filters=["cherry", "linked"])
    assert got == [("c1", 0), ("l1", 1)]


@pytest.mark.parametrize("kwargs, message", [({"dir_filters": []}, "dir_filters cannot be an empty list"),
                                             ({"dir_filters": ["nothing*"]}, "no files found")])
def test_dir_filters_that_select_nothing_are_errors(tree, kwargs, message):
    with pytest.raises(SchemaError, match=message):
        _read("headrace", tree, **kwargs)


@pytest.mark.parametrize("api", APIS)
def test_epoch_size_and_reader_meta_without_a_name_give_every_reader(api, tree):
    lib = _library(api)

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        first, _ = lib.fn.readers.file(file_root=str(tree), name="First")
        second, _ = lib.fn.readers.file(file_root=str(tree), dir_filters=["apple"], name="Second")
        return first, second

    built = pipe()
    built.build()
    assert built.epoch_size() == {"First": 6, "Second": 3}
    assert built.epoch_size("Second") == 3
    meta = built.reader_meta()
    assert set(meta) == {"First", "Second"}
    assert meta["Second"] == built.reader_meta("Second")
    assert meta["First"]["epoch_size"] == 6


def _epoch_orders(root, epochs: int, **kwargs) -> list[list[str]]:
    """The files of each epoch, shards 0 and 1 of 2 read one after the other."""
    orders = []
    for shard in (0, 1):
        @headrace.pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=11)
        def pipe(shard=shard):
            return headrace.fn.readers.file(file_root=str(root), shuffle_after_epoch=True, num_shards=2,
                                            shard_id=shard, name="Reader", **kwargs)[0]

        built = pipe()
        built.build()
        per_epoch = built.epoch_size("Reader") // 2
        read = [bytes(np.array(built.run()[0].at(0))).decode() for _ in range(per_epoch * epochs)]
        orders.append([read[e * per_epoch:(e + 1) * per_epoch] for e in range(epochs)])
    return [orders[0][e] + orders[1][e] for e in range(epochs)]


def test_shuffle_after_epoch_seed_is_shared_by_the_shards_and_sets_the_order(tree):
    seeded = _epoch_orders(tree, 3, shuffle_after_epoch_seed=5)
    for epoch in seeded:  # the shards of an epoch partition the data set: one permutation for both
        assert sorted(epoch) == sorted(name for name, _ in EXPECTED)
    assert seeded == _epoch_orders(tree, 3, shuffle_after_epoch_seed=5)
    assert seeded != _epoch_orders(tree, 3, shuffle_after_epoch_seed=6)
    assert seeded == _epoch_orders(tree, 3, shuffle_after_epoch_seed=5, seed=99)  # it wins over `seed`
