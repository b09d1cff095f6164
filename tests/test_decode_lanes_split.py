"""How a batch's indices are dealt to decode lanes (no GPU needed): consecutive parts per lane, and at a hardware
decoder load below 1 the first round(load x n) images over the hardware lanes and the rest to the CUDA lane."""

from __future__ import annotations

import numpy as np
import pytest

from headrace_kernels.gpu.decode_lanes import SPLIT_FROM, split, split_by_load


@pytest.mark.parametrize("count", [SPLIT_FROM - 1, SPLIT_FROM, 255, 256])
def test_split_gives_consecutive_parts_and_one_below_the_threshold(count):
    parts = split(count, 2)
    assert len(parts) == (1 if count < SPLIT_FROM else 2)
    np.testing.assert_array_equal(np.concatenate(parts), np.arange(count))


@pytest.mark.parametrize(("count", "load", "hardware"), [(256, 0.65, 166), (128, 0.65, 83), (100, 0.5, 50),
                                                         (101, 0.5, 51), (64, 0.99, 63), (64, 0.001, 0)])
def test_split_by_load_sends_the_first_round_share_to_the_hardware_lanes(count, load, hardware):
    parts = split_by_load(count, load, hardware_lanes=2)
    assert len(parts) == 3
    np.testing.assert_array_equal(np.concatenate(parts[:2]), np.arange(hardware))
    assert abs(len(parts[0]) - len(parts[1])) <= 1
    np.testing.assert_array_equal(parts[2], np.arange(hardware, count))


def test_split_by_load_with_one_hardware_lane():
    parts = split_by_load(10, 0.65, hardware_lanes=1)
    assert [p.tolist() for p in parts] == [list(range(7)), [7, 8, 9]]
