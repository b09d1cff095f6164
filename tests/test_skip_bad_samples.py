"""on_error="skip": 200 good JPEGs plus a truncated, an empty and a non-image `.jpg`. Every epoch yields each good
file exactly once (fill slots aside: repeats at an epoch's end that keep its length), batches stay full, the stream
does not depend on num_threads, a checkpoint resumes it exactly, and what was skipped is reported. Decoded images
are compared bit for bit with the CPU decode of the file their label names."""

from __future__ import annotations

import contextlib
import os

import cv2
import numpy as np
import pytest

from headrace import SampleError, SchemaError, fn, pipeline_def
from headrace.data.synthetic import synthetic_image

pytestmark = pytest.mark.filterwarnings("ignore:headrace. batch:RuntimeWarning")  # checked in one test
GOOD, BATCH = 200, 16
BAD = {"truncated": 57, "empty": 130, "not_an_image": 202}  # kind -> place in the file list (202: the last)
SIZE = GOOD + len(BAD)  # the reader's epoch: 203 slots, 13 batches, the last holding 11 of them


def _bad_bytes(kind: str, good: bytes) -> bytes:
    return {"truncated": good[:len(good) // 2], "empty": b"",
            "not_an_image": b"name,label\nthis is a csv file, not a picture\n"}[kind]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """(files, labels, {label: decoded image}): good file k has label k; bad files have labels 1000+."""
    root = tmp_path_factory.mktemp("skip")
    rng = np.random.default_rng(3)
    good = []
    for _ in range(GOOD):
        ok, data = cv2.imencode(".jpg", synthetic_image(rng, 24, 32))
        assert ok
        good.append(data.tobytes())
    files, labels = [], []
    places = {place: kind for kind, place in BAD.items()}
    k = 0
    for place in range(SIZE):
        if place in places:
            path = root / f"{place:03d}_{places[place]}.jpg"
            path.write_bytes(_bad_bytes(places[place], good[0]))
            labels.append(1000 + place)
        else:
            path = root / f"{place:03d}_good.jpg"
            path.write_bytes(good[k])
            labels.append(k)
            k += 1
        files.append(str(path))
    expected = {label: cv2.cvtColor(cv2.imdecode(np.frombuffer(good[label], np.uint8), cv2.IMREAD_COLOR),
                                    cv2.COLOR_BGR2RGB) for label in range(GOOD)}
    return files, labels, expected


def _pipeline(dataset, on_error="skip", num_threads=1, shuffle=False, pad=False, checkpoint=None, mixed=False,
              **options):
    files, labels, _ = dataset
    decoder_device = "mixed" if mixed else "cpu"

    @pipeline_def(batch_size=BATCH, num_threads=num_threads, device_id=options.pop("device_id", None), seed=11,
                  enable_checkpointing=True, **options)
    def pipe():
        jpegs, label = fn.readers.file(files=files, labels=labels, random_shuffle=shuffle, pad_last_batch=pad,
                                       name="Reader")
        return fn.decoders.image(jpegs, on_error=on_error, device=decoder_device), label

    return pipe(checkpoint=checkpoint)


def _host(batch) -> list[np.ndarray]:
    if hasattr(batch, "as_cpu"):
        samples = batch.samples(raw=True)
        if all(isinstance(sample, np.ndarray) for sample in samples):  # the stand-in GPU stage's (host arrays)
            return samples
        batch = batch.as_cpu()
    return [np.asarray(batch.at(i)) for i in range(len(batch))]


def _run(pipe, batches: int) -> list[tuple[list[int], list[np.ndarray]]]:
    """(labels, images) of each of the next `batches` batches."""
    out = []
    for _ in range(batches):
        images, labels = pipe.run()
        out.append(([int(v) for v in np.asarray(labels.as_array()).reshape(-1)], _host(images)))
    return out


def _epochs(stream, fills: dict[int, list[int]], count: int, stride: int = SIZE) -> list[list[int]]:
    """The labels of each reader epoch as PARTIAL counts them: its SIZE slots of the stream (an epoch takes `stride`
    slots, its padding included), fill slots left out."""
    flat = [(batch, slot, label) for batch, (labels, _) in enumerate(stream) for slot, label in enumerate(labels)]
    return [[label for batch, slot, label in flat[e * stride:e * stride + SIZE] if slot not in fills.get(batch, [])]
            for e in range(count)]


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_epoch_yields_every_good_file_once(dataset, shuffle):
    _, _, expected = dataset
    pipe = _pipeline(dataset, shuffle=shuffle)
    stream = _run(pipe, 3 * 13)  # 3 epochs of 203 slots, and a little of the 4th
    fills = pipe.skipped.fills
    for labels, images in stream:
        assert len(labels) == BATCH and len(images) == BATCH  # the batches stay full
        for label, image in zip(labels, images, strict=True):
            assert label < GOOD, f"a bad file was returned (label {label})"
            np.testing.assert_array_equal(image, expected[label])  # the decoder ran on the replacement
    for epoch, labels in enumerate(_epochs(stream, fills, 3)):
        assert sorted(labels) == list(range(GOOD)), f"epoch {epoch}"
    # one fill per bad file and epoch, at the epoch's end: the batches before hold only samples of their epoch
    per_epoch: dict[int, int] = {}
    for batch, slots in fills.items():
        for slot in slots:
            epoch, place = divmod(batch * BATCH + slot, SIZE)
            assert place >= SIZE - BATCH - len(BAD), f"a fill at slot {place} of epoch {epoch}"
            per_epoch[epoch] = per_epoch.get(epoch, 0) + 1
    assert [per_epoch.get(epoch) for epoch in range(3)] == [len(BAD)] * 3
    pipe.close()


def test_the_stream_does_not_depend_on_num_threads(dataset):
    one, three = _pipeline(dataset, num_threads=1, shuffle=True), _pipeline(dataset, num_threads=3, shuffle=True)
    a, b = _run(one, 30), _run(three, 30)
    for (labels_a, images_a), (labels_b, images_b) in zip(a, b, strict=True):
        assert labels_a == labels_b
        for x, y in zip(images_a, images_b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert [s[:4] for s in one.skipped[:6]] == [s[:4] for s in three.skipped[:6]]
    one.close()
    three.close()


def test_skips_are_reported_with_a_warning_per_batch(dataset):
    files, _, _ = dataset
    pipe = _pipeline(dataset)
    with pytest.warns(RuntimeWarning, match=r"skipped \d sample") as caught:
        for _ in range(13):
            pipe.run()
    skipped = pipe.skipped
    bad_files = {files[place] for place in BAD.values()}
    assert {s.file for s in skipped} == bad_files
    assert all(s.op == "decoders.image" and s.file in s.message for s in skipped)
    by_batch = {s.batch for s in skipped}
    warned = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(warned) >= len(by_batch)  # one per batch with skips (batches prefetched ahead may add theirs)
    for batch in by_batch:
        assert any(f"batch {batch} " in text for text in warned)
    pipe.close()


def test_raise_is_the_default_and_names_the_file_and_op(dataset):
    files, _, _ = dataset
    pipe = _pipeline(dataset, on_error="raise")
    with pytest.raises(SampleError) as info:
        for _ in range(13):
            pipe.run()
    assert info.value.source == files[BAD["truncated"]] and info.value.op == "decoders.image"
    assert files[BAD["truncated"]] in str(info.value) and "decoders.image" in str(info.value)
    pipe.close()


@pytest.mark.parametrize("stop", ["after the first skip", 12])  # 12: the epoch's last batch (fills, next epoch)
def test_a_checkpoint_after_a_skip_resumes_the_same_stream(dataset, stop):
    if stop == "after the first skip":
        scout = _pipeline(dataset, shuffle=True, prefetch_queue_depth=1)
        while not scout.skipped:
            scout.run()
        stop = scout.skipped[0].batch + 1
        scout.close()
    reference = _pipeline(dataset, shuffle=True)
    _run(reference, stop)
    assert reference.skipped and min(s.batch for s in reference.skipped) < stop
    state = reference.checkpoint()
    after = _run(reference, 20)
    resumed = _pipeline(dataset, shuffle=True, num_threads=2, checkpoint=state)
    again = _run(resumed, 20)
    for (labels_a, images_a), (labels_b, images_b) in zip(after, again, strict=True):
        assert labels_a == labels_b
        for x, y in zip(images_a, images_b, strict=True):
            np.testing.assert_array_equal(x, y)
    ours = {b - stop: s for b, s in reference.skipped.fills.items() if b >= stop}
    theirs = {b - stop: s for b, s in resumed.skipped.fills.items()}
    assert {b: s for b, s in ours.items() if b < 20} == {b: s for b, s in theirs.items() if b < 20}
    reference.close()
    resumed.close()


def test_pad_last_batch_keeps_its_epochs_and_padding(dataset):
    pipe = _pipeline(dataset, pad=True)
    stream = _run(pipe, 2 * 13)  # with padding, an epoch is exactly 13 batches (208 slots, 5 of them padding)
    for epoch, labels in enumerate(_epochs(stream, pipe.skipped.fills, 2, stride=13 * BATCH)):
        assert sorted(labels) == list(range(GOOD)), f"epoch {epoch}"
    assert all(label < GOOD for labels, _ in stream for label in labels)
    pipe.close()


def test_through_the_torch_iterator_with_partial(dataset):
    """PARTIAL over a padded reader: the iterator's epochs are the reader's, and it leaves the fill slots out, so
    an epoch holds every good file once."""
    torch_iterator = pytest.importorskip("headrace_torch")
    pipe = _pipeline(dataset, shuffle=True, pad=True)
    loader = torch_iterator.GenericIterator(pipe, ["data", "label"], reader_name="Reader", auto_reset=True,
                                            last_batch_policy=torch_iterator.LastBatchPolicy.PARTIAL)
    for epoch in range(2):
        labels, sizes = [], []
        for (batch,) in loader:
            kept = [int(v) for v in batch["label"].reshape(-1).tolist()]
            labels += kept
            sizes.append(len(kept))
        assert sorted(labels) == list(range(GOOD)), f"epoch {epoch}"
        assert sizes == [BATCH] * 12 + [GOOD - 12 * BATCH]  # full batches but the reader's last
    pipe.close()


def test_the_reader_skips_files_it_cannot_read(dataset, tmp_path):
    files, labels, expected = dataset
    good = [f for f, label in zip(files, labels, strict=True) if label < GOOD][:40]
    gone = tmp_path / "gone.jpg"
    gone.write_bytes(open(good[0], "rb").read())
    listed = good[:10] + [str(gone)] + good[10:]

    def build(on_error):
        @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=1)
        def pipe():
            jpegs, label = fn.readers.file(files=listed, labels=list(range(len(listed))), on_error=on_error)
            return fn.decoders.image(jpegs), label
        return pipe()

    skipping, raising = build("skip"), build("raise")
    skipping.build()
    raising.build()
    os.remove(gone)  # vanished after the listing
    with pytest.warns(RuntimeWarning, match="gone.jpg"):
        first = _run_all(skipping, 3)
    fills = skipping.skipped.fills
    epoch = [label for i, label in enumerate(first[:len(listed)]) if i % BATCH not in fills.get(i // BATCH, [])]
    assert sorted(epoch) == [i for i in range(len(listed)) if i != 10]
    (skip,) = [s for s in skipping.skipped if s.batch == 0]
    assert skip.file == str(gone) and skip.op == "readers.file" and "cannot read" in skip.message
    with pytest.raises(OSError, match="gone.jpg"):
        raising.run()
    skipping.close()
    raising.close()


def _run_all(pipe, batches: int) -> list[int]:
    return [label for _ in range(batches) for label in np.asarray(pipe.run()[1].as_array()).reshape(-1).tolist()]


def test_external_source_cannot_give_replacements(dataset):
    files, _, _ = dataset

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def fed():
        jpegs = fn.external_source(source=lambda: [np.fromfile(files[0], np.uint8)] * 2, name="src")
        return fn.decoders.image(jpegs, on_error="skip")

    with pytest.raises(SchemaError, match="external_source.*cannot give replacements"):
        fed().build()


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """The GPU stage with a stand-in device context and mixed decoder (headers checked in `prepare`, pixels decoded
    on the CPU in `run`), so that its skip logic (replacements in the look-ahead and in the decode) runs here."""
    import headrace.engine.executor as executor
    import headrace.engine.gpu_stage as gpu_stage
    from headrace_kernels.cpu import decode as cpu_decode
    from headrace_kernels.gpu import events, runtime
    from headrace_kernels.registry import GpuKernelEntry, SampleFailureError

    class Stream:
        ptr = 0

        def record(self):
            return self

        def synchronize(self):
            pass

    class Context:
        def __init__(self, device_id, limit_bytes=0):
            self.device_id, self.stream = 0, Stream()

        @contextlib.contextmanager
        def active(self):
            yield self

        def release(self):
            pass

    class Decoder:
        def __init__(self, setup):
            pass

        def prepare(self, batch):
            for i, data in enumerate(batch.value(0)):
                if np.asarray(data).size == 0 or bytes(np.asarray(data)[:2]) != b"\xff\xd8":
                    raise SampleFailureError(i, "not a JPEG")
            return list(batch.value(0))

        def run(self, batch):
            encoded = batch.ahead if batch.ahead is not None else self.prepare(batch)
            out = []
            for i, data in enumerate(encoded):
                try:
                    out.append(cpu_decode.decode_image(data))
                except ValueError as exc:
                    raise SampleFailureError(i, str(exc)) from None
            return out

    real = gpu_stage.get_gpu_kernel
    monkeypatch.setattr(events, "record", lambda stream: stream.record())  # the stand-in stream's, not the driver's
    monkeypatch.setattr(gpu_stage, "check_device", lambda device_id, nodes: None)
    monkeypatch.setattr(executor, "check_device", lambda device_id, nodes: None)
    monkeypatch.setattr(runtime, "GpuContext", Context)
    monkeypatch.setattr(gpu_stage, "get_gpu_kernel",
                        lambda op: GpuKernelEntry((op,), Decoder) if op.startswith("decoders.") else real(op))


@pytest.mark.parametrize("lookahead", ["before", "after", "off"])
def test_the_gpu_stage_replaces_as_the_cpu_stage_does(dataset, stand_in_gpu, lookahead):
    cpu = _pipeline(dataset, shuffle=True)
    gpu = _pipeline(dataset, shuffle=True, num_threads=3, mixed=True, device_id=0,
                    executor_options={"lookahead": lookahead})
    expected = _run(cpu, 28)
    _run(gpu, 6)
    state = gpu.checkpoint()
    got = _run(gpu, 22)
    resumed = _pipeline(dataset, shuffle=True, num_threads=2, mixed=True, device_id=0, checkpoint=state)
    again = _run(resumed, 22)
    for (labels, images), (labels_gpu, images_gpu), (labels_again, _) in zip(expected[6:], got, again, strict=True):
        assert labels == labels_gpu == labels_again
        for x, y in zip(images, images_gpu, strict=True):
            np.testing.assert_array_equal(x, y)
    assert {b: s for b, s in cpu.skipped.fills.items() if b < 28} == {b: s for b, s in gpu.skipped.fills.items()
                                                                      if b < 28}
    for pipe in (cpu, gpu, resumed):
        pipe.close()


@pytest.mark.gpu
@pytest.mark.parametrize("decoder", ["image", "image_random_crop"])
def test_the_mixed_decoder_skips_on_the_gpu(dataset, decoder):
    files, labels, _ = dataset

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, seed=11, enable_checkpointing=True)
    def pipe():
        jpegs, label = fn.readers.file(files=files, labels=labels, random_shuffle=True, name="Reader")
        return getattr(fn.decoders, decoder)(jpegs, device="mixed", on_error="skip"), label

    p = pipe()
    stream = _run(p, 2 * 13)
    skipped_files = {s.file for s in p.skipped}
    # nvImageCodec's GPU decoders may decode a truncated JPEG's first half; the empty and the CSV file never pass
    assert {files[BAD["empty"]], files[BAD["not_an_image"]]} <= skipped_files
    wanted = sorted(label for f, label in zip(files, labels, strict=True) if f not in skipped_files)
    for epoch, epoch_labels in enumerate(_epochs(stream, p.skipped.fills, 2)):
        assert sorted(epoch_labels) == wanted, f"epoch {epoch}"
    state = p.checkpoint()
    after = _run(p, 8)
    resumed = pipe(checkpoint=state)
    assert [labels for labels, _ in _run(resumed, 8)] == [labels for labels, _ in after]
    p.close()
    resumed.close()
