"""How the decode lanes cut a batch into parts and put the parts' statuses back in batch order (host logic; the lanes
themselves, with their decoders and streams, are tested on the GPU in tests/test_gpu_lookahead.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from headrace_kernels.gpu.decode_lanes import SPLIT_FROM, LaneDecode, split


@pytest.mark.parametrize("count", [0, 1, SPLIT_FROM - 1])
def test_a_batch_below_the_split_size_stays_whole(count):
    parts = split(count, 2)
    assert len(parts) == 1
    np.testing.assert_array_equal(parts[0], np.arange(count))


@pytest.mark.parametrize(("count", "lanes"), [(SPLIT_FROM, 2), (256, 2), (257, 2), (100, 3), (256, 1)])
def test_a_large_batch_is_cut_into_one_consecutive_part_per_lane(count, lanes):
    parts = split(count, lanes)
    assert len(parts) == lanes
    np.testing.assert_array_equal(np.concatenate(parts), np.arange(count))  # every image once, in order
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1  # halves differ by one image at most


def test_statuses_come_back_in_batch_order_whatever_part_finishes_first():
    parts = split(130, 2)
    late, early = Future(), Future()
    decode = LaneDecode([(parts[0], late), (parts[1], early)], 130)
    early.set_result(np.full(len(parts[1]), 2, np.uint32))
    late.set_result(np.arange(len(parts[0]), dtype=np.uint32))
    statuses = decode.statuses()
    np.testing.assert_array_equal(statuses[:len(parts[0])], np.arange(len(parts[0])))
    assert (statuses[len(parts[0]):] == 2).all()


def test_a_failed_part_raises_only_once_every_part_is_done():
    """The batch's code streams are closed after `statuses()` returns or raises: a part still decoding must not
    outlive it, even when an earlier part failed."""
    release = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        def fail():
            raise RuntimeError("nvImageCodec could not create a GPU decoder")

        def slow():
            release.wait(5)
            return np.ones(65, np.uint32)

        failed, running = pool.submit(fail), pool.submit(slow)
        parts = split(130, 2)
        threading.Timer(0.2, release.set).start()
        with pytest.raises(RuntimeError, match="could not create"):
            LaneDecode([(parts[0], failed), (parts[1], running)], 130).statuses()
        assert running.done()


def test_decoder_options_follow_the_nodes_arguments():
    from headrace_kernels.gpu.decode import decoder_options

    assert decoder_options({}, 256) == ""  # nvImageCodec's own defaults
    assert decoder_options({"hybrid_huffman_threshold": 0}, 256) == "nvjpeg_cuda_decoder:hybrid_huffman_threshold=0"
    hinted = decoder_options({"preallocate_width_hint": 500, "preallocate_height_hint": 0}, 256)
    assert hinted == "nvjpeg_hw_decoder:preallocate_batch_size=256 nvjpeg_hw_decoder:preallocate_width_hint=500"
    assert decoder_options({"preallocate_width_hint": 500, "preallocate_height_hint": 375}, 0) == ""  # no batch
    replicated = "nvjpeg_cuda_decoder:fancy_upsampling=0 nvjpeg_hw_decoder:fancy_upsampling=0"
    assert decoder_options({"jpeg_fancy_upsampling": False}, 256) == replicated  # DALI's default
    assert decoder_options({"jpeg_fancy_upsampling": True}, 256) == ""  # headrace's default, as nvImageCodec's
