"""DALI's random number generators (the operator tests dali/test/python/operator_2/test_random_*.py): the distributions'
parameters and shapes, checked by statistics; the deprecated `fn.*` names of older examples; batch_permutation."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of

SOURCE = "DALI dali/test/python/operator_2/test_random_*.py"
N = 4000


def _stats_check(outputs) -> None:
    uniform, normal, coin, choice, beta, uniform_values = (samples_of(outputs, k) for k in range(6))
    for u in uniform:
        # [-1, 3]: the open upper end is checked by random_uniform_half_open, where rounding makes it likely
        expect(u.shape == (N,) and u.dtype == np.float32 and u.min() >= -1 and u.max() <= 3, "uniform in [-1, 3]")
        expect(abs(u.mean() - 1.0) < 0.1 and abs(u.std() - 4 / np.sqrt(12)) < 0.1, "uniform moments")
    for x in normal:
        expect(x.shape == (N,) and abs(x.mean() - 5.0) < 0.2 and abs(x.std() - 2.0) < 0.15, "normal(5, 2) moments")
    for c in coin:
        expect(c.shape == (N,) and set(np.unique(c)) <= {0, 1} and abs(c.mean() - 0.3) < 0.04, "coin p=0.3")
    for ch in choice:
        freq = np.bincount(ch.astype(np.int64), minlength=3) / ch.size
        expect(ch.shape == (N,) and np.allclose(freq, [0.5, 0.3, 0.2], atol=0.04), f"choice p: {freq}")
    for b in beta:
        expect(b.shape == (N,) and b.min() >= 0 and b.max() <= 1 and abs(b.mean() - 2 / 7) < 0.03, "beta(2, 5) mean")
    for v in uniform_values:
        expect(set(np.unique(v)) <= {1.0, 2.5, 7.0} and v.shape == (N,), "uniform over a discrete set")


@case(SOURCE, random=True, check=_stats_check)
def random_distributions(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=17)
    def pipe():
        return (fn.random.uniform(range=[-1.0, 3.0], shape=[N]), fn.random.normal(mean=5.0, stddev=2.0, shape=N),
                fn.random.coin_flip(probability=0.3, shape=[N]), fn.random.choice(3, p=[0.5, 0.3, 0.2], shape=[N]),
                fn.random.beta(alpha=2.0, beta=5.0, shape=[N]), fn.random.uniform(values=[1.0, 2.5, 7.0], shape=[N]))

    return pipe()


HI = float(np.float32(1.0) + np.float32(2.0**-20))  # 8 float32 values in [1, HI): rounding to HI is likely


def _half_open_check(outputs) -> None:
    for u in samples_of(outputs, 0):
        expect(u.dtype == np.float32 and u.min() >= 1.0, "at least lo")
        expect(int((u >= np.float32(HI)).sum()) == 0, f"{int((u >= np.float32(HI)).sum())} draws equal hi")


@case(SOURCE + " (the range is half-open: [lo, hi))", random=True, check=_half_open_check)
def random_uniform_half_open(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=17)
    def pipe():
        return fn.random.uniform(range=[1.0, HI], shape=[N])

    return pipe()


def _per_sample_check(outputs) -> None:
    for x, y in zip(samples_of(outputs, 0), samples_of(outputs, 1), strict=True):
        expect(x.shape == () and y.shape == (), "one scalar per sample")
    for z in samples_of(outputs, 2):
        expect(z.dtype == np.int32 and z.shape == (2,), "INT32 pair")
    draws = np.array([float(x) for x in samples_of(outputs, 0)])
    expect(len(set(draws.tolist())) > 1, "each sample has its own draw")


@case(SOURCE + " (one draw per sample, dtype)", random=True, check=_per_sample_check, iterations=3)
def random_per_sample(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=21)
    def pipe():
        return (fn.random.uniform(range=(0.0, 1.0)), fn.random.normal(),
                fn.random.uniform(range=[0, 10], shape=[2], dtype=types.INT32))

    return pipe()


def _permutation_check(outputs) -> None:
    for perm in samples_of(outputs, 0):
        expect(perm.dtype == np.int32 and perm.shape == (), "an index per sample")
    for it in outputs:
        indices = sorted(int(p) for p in it[0][0])
        expect(indices == [0, 1, 2, 3, 4], f"a permutation of the batch: {indices}")


@case("DALI dali/test/python/operator_1/test_batch_permute.py", random=True, check=_permutation_check, iterations=2)
def batch_permutation_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=5, num_threads=1, device_id=None, seed=2)
    def pipe():
        perm = fn.batch_permutation()
        return perm, fn.permute_batch(fn.random.uniform(range=[0, 1]), indices=perm)

    return pipe()


def _legacy_names_check(outputs) -> None:
    for image in samples_of(outputs, 0):
        expect(image.ndim == 3 and image.shape[2] == 3, "decoded RGB")
    for u in samples_of(outputs, 1):
        expect(0.0 <= float(u) < 1.0, "uniform draw in [0, 1)")
    for c in samples_of(outputs, 2):
        expect(int(c) in (0, 1), "coin flip")


@case("DALI's older examples (fn.image_decoder, fn.uniform, fn.coin_flip: the deprecated names)", random=True,
      same_shapes=False, check=_legacy_names_check)
def legacy_fn_names(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=3)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data.images)
        return (fn.image_decoder(jpegs, output_type=types.RGB), fn.uniform(range=[0.0, 1.0]),
                fn.coin_flip(probability=0.5))

    return pipe()


def _crop_window_check(outputs) -> None:
    for anchor, shape, full in zip(samples_of(outputs, 0), samples_of(outputs, 1), samples_of(outputs, 2),
                                   strict=True):
        expect(np.all(anchor >= 0) and np.all(anchor + shape <= full[:2]), "window inside the image (in its HW order)")


@case("DALI dali/test/python/operator_1/test_random_crop_generator.py", random=True, check=_crop_window_check)
def random_crop_generator_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=8)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        shape = fn.peek_image_shape(jpegs)
        anchor, crop_shape = fn.random_crop_generator(shape, random_area=[0.3, 1.0])
        return anchor, crop_shape, shape

    return pipe()
