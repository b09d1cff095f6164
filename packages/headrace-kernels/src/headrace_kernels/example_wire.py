"""The features of a serialized tf.train.Example found in its bytes, without a copy: where each wanted feature's
value list lies, and its values decoded.

protobuf's Python API parses a whole Example and copies every bytes field out of it: for an image record that is a
copy of the image (~110 KB) per sample, which made readers.tfrecord 0.8x DALI's on the CPU. These numba loops walk
the protobuf wire format (Example.features -> map<string, Feature> -> BytesList / FloatList / Int64List) and hand
back offsets, so an image comes out as a view of the (mapped) record. They give up (status FALLBACK) on anything
whose meaning needs protobuf's merge rules: a wanted key given twice, a Feature holding more than one list, a
group; the caller then parses the record with protobuf, which also words the error of a malformed one."""

from __future__ import annotations

import numba
import numpy as np

OK, FALLBACK = 0, 1
BYTES, FLOATS, INT64S = 1, 2, 3
"""The Feature oneof's field numbers: bytes_list, float_list, int64_list."""


@numba.njit(nogil=True, cache=True)
def _varint(buf, pos, end):  # pragma: no cover - compiled
    """(value, position after it), or (0, -1) if it runs past `end` or over 10 bytes."""
    value = np.uint64(0)
    shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= np.uint64(byte & 0x7F) << np.uint64(shift)
        if byte < 0x80:
            return value, pos
        shift += 7
    return np.uint64(0), -1


@numba.njit(nogil=True, cache=True)
def _tag(buf, pos, end):  # pragma: no cover - compiled
    """A field's tag at `pos`: (field number, wire type, the position after it); position -1 if malformed."""
    tag, pos = _varint(buf, pos, end)
    return np.int64(tag >> np.uint64(3)), np.int64(tag & np.uint64(7)), pos


@numba.njit(nogil=True, cache=True)
def _span(buf, pos, end):  # pragma: no cover - compiled
    """A length-delimited value at `pos`: (its first byte, the position after it), or (-1, -1) if malformed."""
    length, pos = _varint(buf, pos, end)
    if pos < 0 or length > np.uint64(end - pos):
        return -1, -1
    return pos, pos + np.int64(length)


@numba.njit(nogil=True, cache=True)
def _skip(buf, pos, end, wire):  # pragma: no cover - compiled
    """The position after a field's value of wire type `wire`, or -1 (malformed, or a group)."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire == 5:
        return pos + 4 if pos + 4 <= end else -1
    if wire == 2:
        return _span(buf, pos, end)[1]
    return -1


@numba.njit(nogil=True, cache=True)
def _same(buf, start, stop, keys, key_start, key_stop):  # pragma: no cover - compiled
    if stop - start != key_stop - key_start:
        return False
    for i in range(stop - start):
        if buf[start + i] != keys[key_start + i]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _entry(buf, pos, end, keys, key_bounds, found):  # pragma: no cover - compiled
    """One map entry (key, Feature) in [pos, end): record the Feature's bounds where the key is wanted."""
    key_start, key_stop, value_start, value_stop = pos, pos, -1, -1  # a missing key is ""; a missing value empty
    keyed, valued = False, False
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            return FALLBACK
        if wire == 2 and (field == 1 or field == 2):
            pos, stop = _span(buf, pos, end)
            if pos < 0:
                return FALLBACK
            if field == 1:
                if keyed:
                    return FALLBACK
                key_start, key_stop, keyed = pos, stop, True
            else:
                if valued:  # two values of one entry merge in protobuf
                    return FALLBACK
                value_start, value_stop, valued = pos, stop, True
            pos = stop
        else:
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                return FALLBACK
    if not valued:
        value_start, value_stop = end, end  # an empty Feature
    for k in range(key_bounds.shape[0]):
        if _same(buf, key_start, key_stop, keys, key_bounds[k, 0], key_bounds[k, 1]):
            if found[k, 0] >= 0:  # a key given twice: protobuf's map keeps the last, merged rules: leave it to it
                return FALLBACK
            found[k, 0], found[k, 1] = value_start, value_stop
    return OK


@numba.njit(nogil=True, cache=True)
def locate(buf, keys, key_bounds, found):  # pragma: no cover - compiled
    """Each wanted feature's Feature message bounds in the Example `buf` (found[k] = start, stop; -1 where the
    Example lacks it). keys: the wanted names' bytes one after another, key_bounds[k] = (start, stop) in it."""
    found[:, :] = -1
    end = buf.shape[0]
    pos = 0
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            return FALLBACK
        if field != 1 or wire != 2:  # not Example.features
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                return FALLBACK
            continue
        pos, features_end = _span(buf, pos, end)
        if pos < 0:
            return FALLBACK
        while pos < features_end:
            field, wire, pos = _tag(buf, pos, features_end)
            if pos < 0:
                return FALLBACK
            if field == 1 and wire == 2:  # Features.feature: one map entry
                pos, entry_end = _span(buf, pos, features_end)
                if pos < 0:
                    return FALLBACK
                if _entry(buf, pos, entry_end, keys, key_bounds, found) != OK:
                    return FALLBACK
                pos = entry_end
            else:
                pos = _skip(buf, pos, features_end, wire)
                if pos < 0:
                    return FALLBACK
        pos = features_end
    return OK


@numba.njit(nogil=True, cache=True)
def values(buf, start, stop, ints, float_bytes, first):  # pragma: no cover - compiled
    """A Feature message in [start, stop): (status, kind (0: none set), count). int64 values go to `ints`, float32
    values' little-endian bytes to `float_bytes` (view them as '<f4'): more than they hold is FALLBACK (stop - start
    elements always suffice); for bytes, first[0:2] = the first value's (start, stop)."""
    kind, list_start, list_stop = 0, 0, 0
    pos = start
    while pos < stop:
        field, wire, pos = _tag(buf, pos, stop)
        if pos < 0:
            return FALLBACK, 0, 0
        if wire == 2 and 1 <= field <= 3:
            if kind != 0:  # lists merge, or the oneof's last wins: protobuf's rules
                return FALLBACK, 0, 0
            list_start, list_stop = _span(buf, pos, stop)
            if list_start < 0:
                return FALLBACK, 0, 0
            kind, pos = np.int64(field), list_stop
        else:
            pos = _skip(buf, pos, stop, wire)
            if pos < 0:
                return FALLBACK, 0, 0
    count = 0
    pos = list_start
    while pos < list_stop:
        field, wire, pos = _tag(buf, pos, list_stop)
        if pos < 0:
            return FALLBACK, 0, 0
        if field != 1:
            pos = _skip(buf, pos, list_stop, wire)
            if pos < 0:
                return FALLBACK, 0, 0
            continue
        if kind == BYTES and wire == 2:
            value_start, pos = _span(buf, pos, list_stop)
            if value_start < 0:
                return FALLBACK, 0, 0
            if count == 0:
                first[0], first[1] = value_start, pos
            count += 1
        elif kind == INT64S and wire == 0:
            value, pos = _varint(buf, pos, list_stop)
            if pos < 0:
                return FALLBACK, 0, 0
            if count >= ints.shape[0]:
                return FALLBACK, 0, 0
            ints[count] = np.int64(value)
            count += 1
        elif kind == INT64S and wire == 2:  # packed
            pos, packed_end = _span(buf, pos, list_stop)
            if pos < 0:
                return FALLBACK, 0, 0
            while pos < packed_end:
                value, pos = _varint(buf, pos, packed_end)
                if pos < 0 or count >= ints.shape[0]:
                    return FALLBACK, 0, 0
                ints[count] = np.int64(value)
                count += 1
        elif kind == FLOATS and wire == 5:
            if pos + 4 > list_stop or 4 * count + 4 > float_bytes.shape[0]:
                return FALLBACK, 0, 0
            for b in range(4):
                float_bytes[4 * count + b] = buf[pos + b]
            count += 1
            pos += 4
        elif kind == FLOATS and wire == 2:  # packed
            start, pos = _span(buf, pos, list_stop)
            length = pos - start
            if start < 0 or length % 4 or 4 * count + length > float_bytes.shape[0]:
                return FALLBACK, 0, 0
            for b in range(length):
                float_bytes[4 * count + b] = buf[start + b]
            count += length // 4
        else:
            return FALLBACK, 0, 0
    return OK, kind, count
