"""DataNode arithmetic, cast and constants against numpy (with DALI's C semantics written out) and DALI's CPU build.

Tolerances: integer and boolean results exact; float32 results within 1e-6 relative (numpy computes the same
operation in the same type).
"""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace

from headrace import SchemaError, fn, pipeline_def, types

DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64, np.bool_]
BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
          "**": operator.pow, "%": operator.mod, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
          "<=": operator.le, ">": operator.gt, ">=": operator.ge, "&": operator.and_, "|": operator.or_,
          "^": operator.xor}


def sample(dtype, rng, size=7):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(-4, 4, size).astype(dtype)
    low = 0 if dtype.kind == "u" else -4
    return rng.integers(low, 5, size).astype(dtype)


def expected_type(op: str, a: np.dtype, b: np.dtype) -> np.dtype:
    """DALI's promotion, written independently of the implementation."""
    a, b = np.dtype(a), np.dtype(b)
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return np.dtype(bool)
    if op == "/":
        return np.dtype(np.float64 if np.float64 in (a, b) else np.float32)
    if a.kind == "f" and b.kind != "f":
        return a
    if b.kind == "f" and a.kind != "f":
        return b
    if {a, b} & {np.dtype(np.uint64)} and "i" in (a.kind, b.kind):
        return np.dtype(np.int64)
    return np.promote_types(a, b)


def c_semantics(op: str, x: np.ndarray, y: np.ndarray, out: np.dtype) -> np.ndarray:
    """numpy's result for DALI's definition of the op: `//` truncates integers and divides floats, `%` is fmod."""
    compute = out if out != np.bool_ else (np.promote_types(x.dtype, y.dtype) if x.dtype != y.dtype
                                           else x.dtype)
    x, y = x.astype(compute), y.astype(compute)
    with np.errstate(all="ignore"):
        if op == "//":
            return (x / y if compute.kind == "f" else np.trunc(x / y)).astype(out)
        if op == "%":
            return np.fmod(x, y).astype(out)
        return BINARY[op](x, y).astype(out)


def defined(op: str, a: np.dtype, b: np.dtype) -> bool:
    kinds = {np.dtype(a).kind, np.dtype(b).kind}
    if op in "&|^" and "f" in kinds:
        return False
    if kinds == {"b"} and op not in ("*", "&", "|", "^", "==", "!=", "<", "<=", ">", ">="):
        return False
    return True


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_ops_against_numpy(op):
    rng = np.random.default_rng(len(op))
    pairs = [(a, b) for a, b in itertools.product(DTYPES, DTYPES) if defined(op, a, b)]
    lefts = [sample(a, rng) for a, _ in pairs]
    rights = [sample(b, rng) for _, b in pairs]
    for i, (a, b) in enumerate(pairs):
        if op in ("//", "%") and np.dtype(expected_type(op, a, b)).kind in "iu":
            rights[i][rights[i] == 0] = 1  # integer division by zero is an error (tested below)
        if op == "**" and np.dtype(b).kind in "iu":
            rights[i] = np.abs(rights[i]) % 3  # no negative integer powers
    ours = run_headrace(lambda x, y: tuple(BINARY[op](x, y) for _ in [0]), lefts, rights)[0]
    for (a, b), x, y, got in zip(pairs, lefts, rights, ours, strict=True):
        want_type = expected_type(op, a, b)
        assert got.dtype == want_type, (op, a, b)
        want = c_semantics(op, x, y, want_type)
        if want_type.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-3 if want_type == np.float16 else 1e-6, equal_nan=True,
                                       err_msg=f"{a} {op} {b}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{a} {op} {b}")


def test_binary_ops_on_a_per_sample_batch():
    """Each sample is computed on its own (different shapes in one batch)."""
    xs = [np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(4, dtype=np.int32)]
    ys = [np.full((2, 3), 2, np.int32), np.array([1, 2, 3, 4], np.int32)]
    out = run_headrace(lambda x, y: x * y + x, xs, ys)[0]
    for got, x, y in zip(out, xs, ys, strict=True):
        np.testing.assert_array_equal(got, x * y + x)


@pytest.mark.parametrize("scalar, dtype, expected", [
    (1, np.uint8, np.int32),            # a Python int is INT32, as in DALI (not numpy's weak scalar)
    (300, np.int8, np.int32),
    (1.5, np.uint8, np.float32),        # a Python float is FLOAT
    (0.5, np.float64, np.float64),
    (2, np.int64, np.int64),
    (np.uint8(1), np.uint8, np.uint8),  # a numpy scalar keeps its type
    (np.int64(1), np.uint8, np.int64),
    (np.float32(0.5), np.int32, np.float32),
    (True, np.bool_, np.bool_),
])
@pytest.mark.parametrize("side", ["left", "right"])
def test_scalar_operands(scalar, dtype, expected, side):
    x = np.array([0, 1, 2, 3], dtype)
    if side == "left":
        got = run_headrace(lambda n: scalar * n, [x])[0][0]
        want = np.asarray(scalar).astype(expected) * x.astype(expected)
    else:
        got = run_headrace(lambda n: n * scalar, [x])[0][0]
        want = x.astype(expected) * np.asarray(scalar).astype(expected)
    assert got.dtype == expected
    np.testing.assert_array_equal(got, want)


def test_scalar_on_either_side_of_non_commutative_ops():
    x = np.array([1, 2, 4], np.int32)
    sub, rsub, div, rdiv, pw, rpw = run_headrace(lambda n: (n - 10, 10 - n, n / 4, 4 / n, n ** 2, 2 ** n), [x])
    np.testing.assert_array_equal(sub[0], x - 10)
    np.testing.assert_array_equal(rsub[0], 10 - x)
    np.testing.assert_allclose(div[0], x / 4, rtol=1e-6)
    np.testing.assert_allclose(rdiv[0], 4 / x, rtol=1e-6)
    np.testing.assert_array_equal(pw[0], x ** 2)
    np.testing.assert_array_equal(rpw[0], 2 ** x)


def test_unary_ops():
    i = np.array([-3, 0, 5], np.int8)
    u = np.array([0, 1, 200], np.uint8)
    f = np.array([-1.5, 0.0, 2.5], np.float32)
    b = np.array([True, False])
    outs = run_headrace(lambda x, y, z, w: (-x, +x, abs(x), ~x, -y, ~y, -z, abs(z), ~w), [i], [u], [f], [b])
    for got, want in zip([o[0] for o in outs], [-i, +i, np.abs(i), ~i, -u, ~u, -f, np.abs(f), ~b], strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_comparison_and_logic_chain():
    x = np.arange(10, dtype=np.int32)
    got = run_headrace(lambda n: ((n > 2) & (n < 7)) | (n == 9), [x])[0][0]
    np.testing.assert_array_equal(got, ((x > 2) & (x < 7)) | (x == 9))


@pytest.mark.parametrize("op", ["//", "%"])
def test_integer_division_by_zero_is_a_sample_error(op):
    from headrace import SampleError

    with pytest.raises(SampleError, match="by zero"):
        run_headrace(lambda x, y: BINARY[op](x, y), [np.array([1, 2], np.int32)], [np.array([1, 0], np.int32)])


def test_bad_operands_fail_at_definition():
    def build(expr):
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            return expr(fn.external_source(name="x"))

        return pipe()

    with pytest.raises(SchemaError, match="not supported"):
        build(lambda x: x + "a")
    with pytest.raises(SchemaError, match="not supported"):
        build(lambda x: x + [1, 2])
    with pytest.raises(SchemaError, match="Python bool"):
        build(lambda x: x if x else x)


# cast -----------------------------------------------------------------------------------------------------------

FLOATS = np.array([-1e10, -129.5, -128.5, -2.5, -1.5, -0.5, -0.4, 0.0, 0.49999997, 0.5, 1.5, 2.5, 127.5, 254.5,
                   255.5, 65535.5, 1e10, np.inf, -np.inf], np.float32)
INTS = np.array([-70000, -300, -129, -1, 0, 1, 127, 128, 255, 256, 70000], np.int32)


def saturating_reference(values: np.ndarray, dtype) -> np.ndarray:
    """Round half away from zero, then clamp to the target's range (DALI's ConvertSat)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # 1e10 is inf in float16
            return values.astype(dtype)
    v = values.astype(np.float64)
    if values.dtype.kind == "f":
        v = np.sign(v) * np.floor(np.abs(v) + 0.5)
    if dtype == np.bool_:
        return v != 0
    info = np.iinfo(dtype)
    return np.array([info.max if x >= info.max else info.min if x <= info.min else int(x) for x in v], dtype)


@pytest.mark.parametrize("target", ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "INT64", "UINT64",
                                    "BOOL", "FLOAT16", "FLOAT", "FLOAT64"])
@pytest.mark.parametrize("source", [FLOATS, INTS], ids=["float32", "int32"])
def test_cast_rounds_half_away_and_saturates(source, target):
    got = run_headrace(lambda x: fn.cast(x, dtype=getattr(types, target)), [source])[0][0]
    want = saturating_reference(source, types.to_numpy_dtype(getattr(types, target)))
    assert got.dtype == want.dtype
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, want)


def test_cast_nan_gives_zero():
    got = run_headrace(lambda x: fn.cast(x, dtype=types.UINT8), [np.array([np.nan, 1.0], np.float32)])[0][0]
    np.testing.assert_array_equal(got, [0, 1])


# constants ------------------------------------------------------------------------------------------------------

def test_constant_types_and_shapes():
    outs = run_headrace(lambda x: (types.Constant(7), types.Constant(2.5), types.Constant([[1, 2], [3, 4]]),
                                   types.Constant(3, dtype=types.UINT8), types.Constant(1.7, shape=[2, 2]),
                                   types.Constant([True, False]), fn.constant(fdata=[1.4, 2.6], dtype=types.INT16)),
                        [np.zeros(1)] * 2)
    seven, half, matrix, byte, filled, flags, rounded = ([np.asarray(s) for s in o] for o in outs)
    assert seven[0].dtype == np.int32 and seven[0].shape == () and int(seven[0]) == 7
    assert half[0].dtype == np.float32 and float(half[0]) == 2.5
    np.testing.assert_array_equal(matrix[1], np.array([[1, 2], [3, 4]], np.int32))
    assert byte[0].dtype == np.uint8 and int(byte[0]) == 3
    np.testing.assert_array_equal(filled[0], np.full((2, 2), 1.7, np.float32))
    assert flags[0].dtype == np.bool_ and flags[0].tolist() == [True, False]
    assert rounded[0].dtype == np.int16 and rounded[0].tolist() == [1, 3]


@pytest.mark.parametrize("value, dtype, shape", [
    (np.uint8(3), np.uint8, ()), (np.array([1, 2], np.int16), np.int16, (2,)), (np.float64(2.5), np.float32, ()),
    (3, np.int32, ()), (2.5, np.float32, ()), ([1, 2], np.int32, (2,)), (True, np.bool_, ()),
    (np.array([1.5], np.float16), np.float16, (1,)),
])
def test_constant_default_types_follow_dali(value, dtype, shape):
    got = np.asarray(run_headrace(lambda x: types.Constant(value), [np.zeros(1)])[0][0])
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, np.asarray(value).astype(dtype))


def test_constant_in_arithmetic_promotes_like_a_tensor():
    x = np.array([1, 2, 3], np.uint8)
    got = run_headrace(lambda n: n * types.Constant(2, dtype=types.UINT8) + types.Constant(1.0), [x])[0][0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * 2 + 1.0)


# DALI ------------------------------------------------------------------------------------------------------------

DALI_TYPES = [t for t in DTYPES if t != np.float16]  # DALI's CPU arithmetic has no float16


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "<", "&"])
def test_arithmetic_matches_dali(op):
    rng = np.random.default_rng(3)
    for a, b in itertools.product(DALI_TYPES, DALI_TYPES):
        if not defined(op, a, b):
            continue
        if op == "<" and len({np.dtype(a).kind == "f", np.dtype(b).kind == "f"}) == 2:
            continue  # DALI 2.4's CPU build answers -1 < -1.0 with True; headrace compares exactly (numpy tests)
        x, y = sample(a, rng, 5), sample(b, rng, 5)
        if np.dtype(b).kind != "f":
            y = np.where(y == 0, 1, np.abs(y) % 3 + (op != "**")).astype(b)
        ours = run_headrace(lambda n, m: BINARY[op](n, m), [x], [y])[0][0]
        dali = run_dali(lambda n, m, f: BINARY[op](n, m), [x], [y])[0][0]
        assert ours.dtype == dali.dtype, (a, op, b)
        np.testing.assert_allclose(ours.astype(np.float64), dali.astype(np.float64), rtol=1e-6, equal_nan=True,
                                   err_msg=f"{a} {op} {b}")


@pytest.mark.dali
@needs_dali
def test_scalar_promotion_matches_dali():
    exprs = [lambda n: n + 1, lambda n: 1 - n, lambda n: n * 300, lambda n: n + 1.5, lambda n: n / 2,
             lambda n: n // 2, lambda n: 2 ** n, lambda n: n & 3, lambda n: n + np.int64(1), lambda n: n + np.uint8(1),
             lambda n: -n, lambda n: ~n, lambda n: n == 1]
    for dtype in (np.uint8, np.int16, np.int32, np.float32):
        x = np.array([0, 1, 2, 3], dtype)
        for expr in exprs:
            try:
                dali = run_dali(lambda n, f, e=expr: e(n), [x])[0][0]
            except RuntimeError:  # not defined in DALI either (e.g. ~ of a float)
                continue
            ours = run_headrace(lambda n, e=expr: e(n), [x])[0][0]
            assert ours.dtype == dali.dtype
            np.testing.assert_allclose(ours, dali, rtol=1e-6)


@pytest.mark.dali
@needs_dali
def test_cast_matches_dali():
    for source in (FLOATS, INTS):
        for target in ("UINT8", "INT8", "INT16", "INT32", "UINT16", "UINT32", "INT64", "UINT64", "BOOL", "FLOAT16"):
            ours = run_headrace(lambda x, t=target: fn.cast(x, dtype=getattr(types, t)), [source])[0][0]
            dali = run_dali(lambda x, f, t=target: f.cast(x, dtype=getattr(types, t)), [source])[0][0]
            assert ours.dtype == dali.dtype
            np.testing.assert_array_equal(ours, dali, err_msg=f"{source.dtype} -> {target}")
