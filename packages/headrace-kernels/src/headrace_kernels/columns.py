"""A batch's samples of one output as a list that also knows the one array they are views of, so that whoever reads
the whole batch (an upload to the GPU, a per-sample argument's values) takes that array instead of walking the
samples in Python. A whole-batch CPU kernel returns its outputs this way (`BatchColumns`)."""

from __future__ import annotations

import numpy as np


class Column(list):
    """The samples (a list, as every batch column), and either `dense`, an (n, ...) array whose rows they are, or
    `packed`, (flat 1-D array, element offset of each sample, shape of each sample, element count of each sample)
    for samples of one type laid back to back. Slicing or copying gives a plain list."""

    dense: np.ndarray | None = None
    packed: tuple[np.ndarray, np.ndarray, list[tuple[int, ...]], np.ndarray] | None = None

    @classmethod
    def of_dense(cls, array: np.ndarray) -> Column:
        """The rows of `array` as samples (0-d arrays, not numpy scalars, for a 1-D array)."""
        column = cls(array if array.ndim > 1 else (array[i, ...] for i in range(len(array))))
        column.dense = array
        return column

    @classmethod
    def of_rows(cls, rows: np.ndarray, counts: np.ndarray) -> Column:
        """Consecutive runs of `rows` (an (N, ...) C-contiguous array) as samples: counts[i] rows for sample i."""
        counts = np.asarray(counts, np.int64)
        per_row = int(np.prod(rows.shape[1:], dtype=np.int64))
        return cls.of_packed(rows.reshape(-1), (np.cumsum(counts) - counts) * per_row,
                             [(c, *rows.shape[1:]) for c in counts.tolist()], counts * per_row)

    @classmethod
    def of_packed(cls, flat: np.ndarray, starts: np.ndarray, shapes: list[tuple[int, ...]],
                  counts: np.ndarray) -> Column:
        """Samples laid back to back in `flat` (what `packed` records): counts[i] elements from starts[i], of
        shapes[i]."""
        ends = (starts + counts).tolist()
        if flat.ndim == 1 and all(len(shape) == 1 for shape in shapes):  # 1-D samples: the slices themselves
            column = cls(map(flat.__getitem__, map(slice, starts.tolist(), ends)))
        else:
            column = cls(flat[start:end].reshape(shape) for start, end, shape in zip(starts.tolist(), ends, shapes,
                                                                                     strict=True))
        column.packed = (flat, starts, shapes, counts)
        return column

    def _changed(self) -> None:
        self.dense = self.packed = None  # a sample was replaced (a skipped sample's slot): the array is stale

    def __setitem__(self, index, value) -> None:
        self._changed()
        super().__setitem__(index, value)

    def __delitem__(self, index) -> None:
        self._changed()
        super().__delitem__(index)

    def __iadd__(self, other):
        self._changed()
        return super().__iadd__(other)

    def append(self, value) -> None:
        self._changed()
        super().append(value)

    def extend(self, values) -> None:
        self._changed()
        super().extend(values)

    def insert(self, index, value) -> None:
        self._changed()
        super().insert(index, value)


class BatchColumns(tuple):
    """A whole-batch kernel's outputs, one column (a list of samples, or a Column) per output."""
