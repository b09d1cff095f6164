"""headrace-torch's iterators against DALI's, batch by batch: the same reader configuration through DALI's
DALIGenericIterator (CPU build) and through headrace's GenericIterator must hand out the same samples in the same
batches, epoch after epoch, for every last batch policy x pad_last_batch x stick_to_shard x shard count x data set
size not divisible by batch x shards."""

from __future__ import annotations

import itertools
import warnings

import pytest
from torch_harness import epochs, label_pipeline, numbered_files

import headrace

dali = pytest.importorskip("nvidia.dali", reason="DALI's CPU build (nvidia-dali-cuda130) is not installed")
dali_torch = pytest.importorskip("nvidia.dali.plugin.pytorch")

from headrace_torch import GenericIterator, LastBatchPolicy  # noqa: E402

pytestmark = pytest.mark.dali

SIZES = (7, 10, 11)     # none divisible by batch x shards below
BATCHES = (3, 4)
EPOCHS = 4


def _run(files, batch, shards, pad, stick, policy, dali_side: bool, per_rank: bool = True):
    """Per shard (one iterator each, as ranks do), `EPOCHS` epochs of sample numbers."""
    module = dali if dali_side else headrace
    make = dali_torch.DALIGenericIterator if dali_side else GenericIterator
    pol = getattr(dali_torch.LastBatchPolicy if dali_side else LastBatchPolicy, policy)
    pipes = [label_pipeline(module, files, batch, s, shards, pad, stick) for s in range(shards)]
    groups = [[p] for p in pipes] if per_rank else [pipes]
    seen = []
    for group in groups:
        try:
            it = make(group, ["label"], reader_name="Reader", last_batch_policy=pol, auto_reset=True)
        except RuntimeError as exc:  # both refuse a shard too small for one batch under DROP / PARTIAL
            assert "no data" in str(exc)
            seen.append("no data")
            continue
        seen.append(epochs(it, EPOCHS))
    return seen


@pytest.mark.parametrize("policy", ["FILL", "DROP", "PARTIAL"])
@pytest.mark.parametrize("pad", [False, True], ids=["nopad", "pad"])
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_same_batches_as_dali(tmp_path, policy, pad, shards):
    for size, batch, stick in itertools.product(SIZES, BATCHES, (False, True)):
        if stick and shards == 1:
            continue
        files = numbered_files(tmp_path / str(size), size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = _run(files, batch, shards, pad, stick, policy, dali_side=True)
        ours = _run(files, batch, shards, pad, stick, policy, dali_side=False)
        assert ours == theirs, f"size={size} batch={batch} stick={stick}"


@pytest.mark.parametrize("policy", ["FILL", "DROP", "PARTIAL"])
def test_several_pipelines_in_one_iterator_as_dali(tmp_path, policy):
    """DALI's one-process, one-pipeline-per-GPU mode: all shards in one iterator."""
    for size, pad in itertools.product((10, 11), (False, True)):
        files = numbered_files(tmp_path / str(size), size)
        theirs = _run(files, 3, 3, pad, False, policy, dali_side=True, per_rank=False)
        ours = _run(files, 3, 3, pad, False, policy, dali_side=False, per_rank=False)
        assert ours == theirs, f"size={size} pad={pad}"


def test_reader_meta_and_raw_batches_as_dali(tmp_path):
    """The reader alone (no iterator): reader_meta and the batches run() returns, across shard ends."""
    for size, batch, shards, pad, stick in itertools.product((7, 10), (3, 4), (1, 2, 3), (False, True),
                                                             (False, True)):
        files = numbered_files(tmp_path / str(size), size)
        for shard in range(shards):
            theirs = label_pipeline(dali, files, batch, shard, shards, pad, stick)
            ours = label_pipeline(headrace, files, batch, shard, shards, pad, stick)
            theirs.build()
            meta = dict(theirs.reader_meta("Reader"))
            assert ours.reader_meta("Reader") == {k: (bool(v) if isinstance(v, int) and k in ("pad_last_batch",
                                                  "stick_to_shard") else v) for k, v in meta.items()}
            for i in range(3 * size // batch + 2):
                expect = theirs.run()[0].as_array().ravel().tolist()
                got = ours.run()[0].as_array().ravel().tolist()
                assert got == expect, f"size={size} batch={batch} shard={shard}/{shards} pad={pad} " \
                                      f"stick={stick} batch #{i}"
            ours.close()


@pytest.mark.parametrize("pad", [False, True], ids=["nopad", "pad"])
def test_size_argument_without_reader_name_as_dali(tmp_path, pad):
    """The legacy `size=` + `last_batch_padded=` mode, one pipeline and two pipelines."""
    files = numbered_files(tmp_path / "f", 10)
    for policy, pipes in itertools.product(["FILL", "DROP", "PARTIAL"], (1, 2)):
        results = []
        for side in (True, False):
            module = dali if side else headrace
            make = dali_torch.DALIGenericIterator if side else GenericIterator
            pol = getattr(dali_torch.LastBatchPolicy if side else LastBatchPolicy, policy)
            ps = [label_pipeline(module, files, 3, s, pipes, pad) for s in range(pipes)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                it = make(ps, ["label"], size=10, last_batch_padded=pad, last_batch_policy=pol, auto_reset=True)
            results.append(epochs(it, EPOCHS))
        assert results[1] == results[0], f"policy={policy} pipelines={pipes}"


def test_shuffled_epochs_hold_the_same_samples_as_dali(tmp_path):
    """shuffle_after_epoch: the order differs (another RNG), so compare what does not depend on it: the batch
    sizes and len() of every epoch, and the set of samples of every epoch where the policy makes it exact
    (PARTIAL with padding: each epoch is the data set once; the first epoch of PARTIAL without padding)."""
    for size, batch, pad, policy in itertools.product((7, 10), (3, 4), (False, True), ("FILL", "DROP", "PARTIAL")):
        files = numbered_files(tmp_path / str(size), size)
        results = []
        for side in (True, False):
            module = dali if side else headrace
            make = dali_torch.DALIGenericIterator if side else GenericIterator
            pol = getattr(dali_torch.LastBatchPolicy if side else LastBatchPolicy, policy)
            pipe = label_pipeline(module, files, batch, pad=pad, shuffle_after_epoch=True)
            it = make([pipe], ["label"], reader_name="Reader", last_batch_policy=pol, auto_reset=True)
            results.append(epochs(it, EPOCHS))
        (ours, theirs), where = (results[1], results[0]), f"size={size} batch={batch} pad={pad} policy={policy}"
        assert [(n, [len(b[0]) for b in e]) for n, e in ours] == [(n, [len(b[0]) for b in e]) for n, e in theirs], where
        exact = len(ours) if policy == "PARTIAL" and pad else 1 if policy == "PARTIAL" else 0
        for (_, e_ours), (_, e_theirs) in list(zip(ours, theirs, strict=True))[:exact]:
            assert sorted(sum((b[0] for b in e_ours), [])) == sorted(sum((b[0] for b in e_theirs), [])) \
                == list(range(size)), where
