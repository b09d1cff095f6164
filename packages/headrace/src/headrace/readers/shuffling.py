"""The readers' random_shuffle, as DALI's: a file-like reader (readers.file, numpy, coco, nemo_asr) first permutes its
whole data set once, before sharding, with the fixed permutation DALI makes (std::shuffle of libstdc++ driven by
std::mt19937 seeded with 524287, ported here bit for bit), and every reader then gives each epoch of its shard out
through a shuffle buffer of `initial_fill` samples. shuffle_mode='permutation' (headrace's own) gives each epoch a
full random permutation of its shard instead.

Each epoch's order is a pure function of (seed, epoch): the buffer is refilled per epoch, as DALI's, so an epoch holds
exactly its shard, and a checkpoint (epoch, position) holds the buffer's state implicitly.
"""

from __future__ import annotations

import numpy as np

DALI_DATALOADER_SEED = 524287
"""The seed of DALI's one-time permutation of a file-like reader's data set (kDaliDataloaderSeed)."""
SHUFFLE_MODES = ("buffer", "permutation")
"""random_shuffle's modes: DALI's shuffle buffer, or headrace's full permutation of each epoch."""
_CHUNK = 1 << 16


def _mt19937(seed: int) -> np.random.MT19937:
    """std::mt19937(seed): numpy's legacy seeding of MT19937 is the reference init_genrand, as libstdc++'s."""
    generator = np.random.MT19937()
    generator.state = np.random.RandomState(seed).get_state(legacy=False)
    return generator


def _uniform_draws(generator: np.random.MT19937, ranges: np.ndarray) -> np.ndarray:
    """One value in [0, r) per r of `ranges` (each < 2**32), as libstdc++'s uniform_int_distribution draws it from a
    32-bit engine (Lemire's multiply-and-shift; a draw whose low word is under (2**32 - r) % r is drawn again)."""
    out = np.empty(len(ranges), np.uint64)
    raw = np.empty(0, np.uint64)
    done = 0
    while done < len(ranges):
        if len(raw) == 0:
            raw = generator.random_raw(_CHUNK).astype(np.uint64)
        block = ranges[done:done + len(raw)]
        product = raw[:len(block)] * block
        rejected = (product & np.uint64(0xFFFFFFFF)) < (np.uint64(1 << 32) - block) % block
        taken = int(np.argmax(rejected)) if rejected.any() else len(block)
        out[done:done + taken] = product[:taken] >> np.uint64(32)
        done += taken
        raw = raw[taken + 1:] if taken < len(block) else raw[taken:]  # a rejected draw uses up its raw value
    return out


def dali_permutation(n: int, seed: int = DALI_DATALOADER_SEED) -> np.ndarray:
    """The order std::shuffle(0..n-1, std::mt19937(seed)) leaves with libstdc++ (what DALI's file-like loaders do
    to their list when random_shuffle is set): for n <= 65535 it draws two swap positions per draw."""
    order = np.arange(n, dtype=np.int64)
    if n < 2:
        return order
    generator = _mt19937(seed)
    if 0xFFFFFFFF // n >= n:
        first = 2 if n % 2 == 0 else 1
        sides = np.arange(first + 1, n, 2, dtype=np.uint64)  # r = i + 1 for i = first, first + 2, ...
        ranges = sides * (sides + np.uint64(1))
        if first == 2:
            ranges = np.concatenate([np.array([2], np.uint64), ranges])
        draws = _uniform_draws(generator, ranges)
        positions = []
        if first == 2:
            positions.append(int(draws[0]))
            draws = draws[1:]
        for side, x in zip(sides.tolist(), draws.tolist(), strict=True):
            positions += [x // (side + 1), x % (side + 1)]
        targets = range(1, n)
    else:
        positions = _uniform_draws(generator, np.arange(2, n + 1, dtype=np.uint64)).tolist()
        targets = range(1, n)
    items = order.tolist()
    for i, j in zip(targets, positions, strict=True):
        items[i], items[j] = items[j], items[i]
    return np.asarray(items, dtype=np.int64)


def shuffled_through_buffer(order: np.ndarray, fill: int, rng: np.random.Generator) -> np.ndarray:
    """`order` as a shuffle buffer of `fill` entries gives it out (DALI's random_shuffle): the buffer starts with the
    first `fill` entries; each step gives out a random one of the buffer and puts the next entry of `order` in its
    place. Output i thus comes from the first fill + i entries. A buffer as large as `order` is a full permutation."""
    if fill >= len(order):
        out = order.copy()
        rng.shuffle(out)
        return out
    buffer, upcoming, out = order[:fill].tolist(), iter(order[fill:].tolist()), []
    for draw in rng.random(len(order)).tolist():
        slot = int(draw * len(buffer))
        out.append(buffer[slot])
        following = next(upcoming, None)
        if following is not None:
            buffer[slot] = following
        else:
            buffer[slot] = buffer[-1]
            buffer.pop()
    return np.asarray(out, dtype=order.dtype)


def shuffled_epoch(order: np.ndarray, mode: str, fill: int, seed: int, epoch: int) -> np.ndarray:
    """One epoch of `order` (a shard, in its base order) as random_shuffle gives it: through the shuffle buffer
    (mode 'buffer') or as a full permutation (mode 'permutation'); a pure function of (seed, epoch)."""
    rng = np.random.Generator(np.random.Philox(key=[seed & (2**64 - 1), epoch]))
    if mode == "permutation":
        out = order.copy()
        rng.shuffle(out)
        return out
    return shuffled_through_buffer(order, fill, rng)
