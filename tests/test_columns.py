"""Column: a batch kernel's samples as a list over one array; the array is dropped as soon as the list changes (a
replaced sample), so nothing reads a stale batch."""

from __future__ import annotations

import numpy as np

from headrace_kernels.columns import Column


def test_rows_and_dense_columns_are_views_of_their_array():
    rows = np.arange(24, dtype=np.float32).reshape(6, 4)
    column = Column.of_rows(rows, np.array([2, 0, 3, 1]))
    assert [s.shape for s in column] == [(2, 4), (0, 4), (3, 4), (1, 4)]
    flat, starts, shapes, sizes = column.packed
    assert starts.tolist() == [0, 8, 8, 20] and sizes.tolist() == [8, 0, 12, 4] and shapes[2] == (3, 4)
    for sample, start, size in zip(column, starts, sizes, strict=True):
        np.testing.assert_array_equal(sample.reshape(-1), flat[start:start + size])
    flips = Column.of_dense(np.array([1, 0, 1], np.uint8))
    assert all(type(s) is np.ndarray and s.shape == () for s in flips)  # 0-d arrays, as per-sample kernels give
    assert flips.dense is not None and isinstance(flips[:2], list) and not isinstance(flips[:2], Column)


def test_a_changed_column_forgets_its_array():
    for change in (lambda c: c.__setitem__(1, np.zeros(4, np.float32)), lambda c: c.append(c[0]),
                   lambda c: c.extend([c[0]]), lambda c: c.insert(0, c[0]), lambda c: c.__delitem__(0)):
        column = Column.of_dense(np.ones((3, 4), np.float32))
        change(column)
        assert column.dense is None and column.packed is None
    column = Column.of_rows(np.ones((3, 4), np.float32), np.array([1, 2]))
    column[0] = np.zeros((1, 4), np.float32)
    assert column.packed is None
