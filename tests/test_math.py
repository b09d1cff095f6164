"""DataNode arithmetic (shifts included), cast, constants and `headrace.math` against numpy (with DALI's C semantics
written out) and DALI's CPU build.

Tolerances: integer and boolean results exact; float results within 1e-6 relative (numpy computes the same
operation in the same type; 1e-6 absolute too where a math function's result is near 0); GPU against CPU within
1e-5 for math functions (CUDA's libm), exact for integers.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace

import headrace.math as hmath
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


# shifts -----------------------------------------------------------------------------------------------------------

SHIFT_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.bool_]


def shift_reference(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's shift, written out: the operands promoted to the result type (at least 32 bits, C's integer promotion),
    the count modulo that width (x86, which DALI's CPU build runs on), the result wrapped to the result type."""
    out = expected_type("+", x.dtype, y.dtype) if {x.dtype, y.dtype} != {np.dtype(bool)} else np.dtype(bool)
    wide = np.dtype(np.int32) if out.itemsize < 4 else out
    bits = wide.itemsize * 8
    values, counts = x.astype(wide).tolist(), (y.astype(wide).astype(np.int64) % bits).tolist()
    results = []
    for v, c in zip(values, counts, strict=True):
        r = v << c if op == "<<" else v >> c  # Python ints: exact, then wrapped below
        r &= (1 << bits) - 1
        if wide.kind == "i" and r >= 1 << (bits - 1):
            r -= 1 << bits
        results.append(r)
    return np.array(results, wide).astype(out)


@pytest.mark.parametrize("op", ["<<", ">>"])
def test_shifts_against_c_semantics(op):
    rng = np.random.default_rng(5)
    shift = operator.lshift if op == "<<" else operator.rshift
    pairs = list(itertools.product(SHIFT_TYPES, SHIFT_TYPES))
    lefts = [sample(a, rng, 9) for a, _ in pairs]
    rights = [sample(b, rng, 9) % 2 if np.dtype(b) == np.bool_ else np.arange(9).astype(b) * 5 for _, b in pairs]
    ours = run_headrace(lambda x, y: shift(x, y), lefts, rights)[0]
    for (a, b), x, y, got in zip(pairs, lefts, rights, ours, strict=True):
        want = shift_reference(op, x, y)
        assert got.dtype == want.dtype, (a, op, b)
        np.testing.assert_array_equal(got, want, err_msg=f"{a} {op} {b}")


def test_shifts_with_scalars_on_either_side():
    x = np.array([1, 2, 100, 7], np.int32)
    counts = np.array([0, 1, 3, 4], np.uint8)
    left, right, reflected, typed = run_headrace(lambda n, c: (n << 2, n >> 1, 1 << c, n << np.uint8(1)),
                                                 [x], [counts])
    np.testing.assert_array_equal(left[0], x << 2)
    np.testing.assert_array_equal(right[0], x >> 1)
    assert reflected[0].dtype == np.int32  # a Python int is INT32
    np.testing.assert_array_equal(reflected[0], 1 << counts.astype(np.int32))
    assert typed[0].dtype == np.int32
    np.testing.assert_array_equal(typed[0], x << 1)


def test_shifting_floats_fails():
    from headrace import SampleError

    with pytest.raises(SampleError, match="integer or boolean"):
        run_headrace(lambda x: x << 1, [np.array([1.0], np.float32)])


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("op", ["<<", ">>"])
def test_shifts_match_dali(op):
    rng = np.random.default_rng(6)
    shift = operator.lshift if op == "<<" else operator.rshift
    for a, b in itertools.product(SHIFT_TYPES, SHIFT_TYPES):
        x = sample(a, rng, 9)
        y = (np.arange(9) * 5).astype(b) if np.dtype(b) != np.bool_ else sample(b, rng, 9)
        ours = run_headrace(lambda n, m: shift(n, m), [x], [y])[0][0]
        dali = run_dali(lambda n, m, f: shift(n, m), [x], [y])[0][0]
        assert ours.dtype == dali.dtype, (a, op, b)
        np.testing.assert_array_equal(ours, dali, err_msg=f"{a} {op} {b}")
    x = np.array([1, 5, 200], np.uint8)
    for expr in (lambda n: n << 3, lambda n: 1 << n % 8, lambda n: n >> np.uint8(2), lambda n: 1000 >> n % 8):
        ours = run_headrace(lambda n, e=expr: e(n), [x])[0][0]
        dali = run_dali(lambda n, f, e=expr: e(n), [x])[0][0]
        assert ours.dtype == dali.dtype
        np.testing.assert_array_equal(ours, dali)


# integer powers ---------------------------------------------------------------------------------------------------

def test_integer_power_with_a_negative_exponent_is_zero():
    """As DALI: an integer base to a negative integer power gives 0 (numpy refuses it), other powers wrap."""
    base = np.array([2, -2, 1, -1, 0, 3, 2], np.int32)
    exponent = np.array([-1, -3, -2, -1, -1, 4, 40], np.int32)
    got = run_headrace(lambda x, y: x ** y, [base], [exponent])[0][0]
    wrapped = [b ** e % 2**32 for b, e in zip(base.tolist(), exponent.tolist(), strict=True) if e >= 0]
    want = [0] * 5 + [w - 2**32 if w >= 2**31 else w for w in wrapped]
    np.testing.assert_array_equal(got, np.array(want, np.int32))


# headrace.math ----------------------------------------------------------------------------------------------------

FLOAT_FUNCTIONS = {"sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "exp": np.exp,
                   "log": np.log, "log2": np.log2, "log10": np.log10, "fabs": np.fabs, "floor": np.floor,
                   "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
                   "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
                   "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
DOMAINS = {"acosh": (1.0, 4.0), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9),
           "sqrt": (0.0, 9.0), "rsqrt": (0.1, 9.0), "log": (0.1, 9.0), "log2": (0.1, 9.0), "log10": (0.1, 9.0)}
MATH_TYPES = [np.uint8, np.int16, np.int32, np.int64, np.uint64, np.float32, np.float64]


def math_input(name: str, dtype, rng) -> np.ndarray:
    low, high = DOMAINS.get(name, (-3.0, 3.0))
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, (3, 4)).astype(dtype)
    low = max(int(np.ceil(low)), 0 if np.dtype(dtype).kind == "u" else -10)
    high = 1 if name in ("asin", "acos", "atanh") else max(int(high), low + 1)
    return rng.integers(low, high + 1, (3, 4)).astype(dtype)


def test_math_module_has_every_dali_function():
    expected = set(FLOAT_FUNCTIONS) | {"abs", "min", "max", "pow", "fpow", "atan2", "clamp"}
    assert set(hmath.__all__) == expected
    assert all(callable(getattr(hmath, name)) for name in expected)


@pytest.mark.parametrize("name", sorted(FLOAT_FUNCTIONS))
def test_float_functions_against_numpy(name):
    """FLOAT for integer inputs (computed in float32), the input's float type otherwise."""
    rng = np.random.default_rng(len(name))
    inputs = [math_input(name, t, rng) for t in MATH_TYPES]
    outs = run_headrace(lambda *xs: tuple(getattr(hmath, name)(x) for x in xs), *[[x] for x in inputs])
    for x, out in zip(inputs, outs, strict=True):
        want_type = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
        assert out[0].dtype == want_type, (name, x.dtype)
        with np.errstate(all="ignore"):
            want = FLOAT_FUNCTIONS[name](x.astype(want_type))
        np.testing.assert_allclose(out[0], want, rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=f"{name} {x.dtype}")


def test_min_max_clamp_and_powers_against_numpy():
    a = np.array([1, -5, 7, 3], np.int16)
    b = np.array([2.5, -6.0, np.nan, 3.0], np.float32)
    lo, hi = np.array([0, 0, 0, 5], np.uint8), np.array([4, 4, 4, 2], np.int32)
    outs = run_headrace(lambda x, y, low, high: (hmath.min(x, y), hmath.max(y, x), hmath.clamp(x, low, high),
                                                  hmath.clamp(y, -1, 2.0), hmath.pow(x, 2), hmath.fpow(x, -1),
                                                  hmath.atan2(y, x), hmath.abs(x), hmath.min(3, x)),
                        [a], [b], [lo], [hi])
    mn, mx, cl, clf, pw, fpw, at2, ab, mn3 = (o[0] for o in outs)
    af = a.astype(np.float32)
    np.testing.assert_array_equal(mn, np.where(af < b, af, b))  # NaN on the right: the right operand
    np.testing.assert_array_equal(mx, np.where(b > af, b, af))
    assert cl.dtype == np.int32 and cl.tolist() == [1, 0, 4, 2]  # hi below lo gives hi, as min(max(v, lo), hi)
    assert clf.dtype == np.float32
    np.testing.assert_array_equal(clf, [2.0, -1.0, np.nan, 2.0])
    assert pw.dtype == np.int32 and pw.tolist() == (a.astype(np.int32) ** 2).tolist()
    assert fpw.dtype == np.float32
    np.testing.assert_allclose(fpw, 1 / af, rtol=1e-6)
    np.testing.assert_allclose(at2, np.arctan2(b, af), rtol=1e-6)
    assert ab.dtype == np.int16 and ab.tolist() == np.abs(a).tolist()
    assert mn3.dtype == np.int32 and mn3.tolist() == np.minimum(a, 3).tolist()


def test_math_functions_take_constants_and_refuse_numbers_alone():
    x = np.array([4.0, 9.0], np.float32)
    got = run_headrace(lambda n: hmath.sqrt(types.Constant(16.0)) + hmath.max(types.Constant(2), n), [x])[0][0]
    np.testing.assert_allclose(got, 4.0 + np.maximum(2, x))

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return hmath.sqrt(4.0)

    with pytest.raises(SchemaError, match="needs a DataNode"):
        pipe()


def test_math_functions_of_booleans_fail():
    from headrace import SampleError

    with pytest.raises(SampleError, match="not defined on booleans"):
        run_headrace(lambda x: hmath.sqrt(x), [np.array([True])])
    with pytest.raises(SampleError, match="not defined on booleans"):
        run_headrace(lambda x: hmath.clamp(x, x, x), [np.array([True])])


def test_math_node_round_trips_through_the_pipeline_file():
    from headrace import Pipeline

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(name="x")
        return hmath.clamp(hmath.sqrt(x), 0.5, 2), x << 1

    original = pipe()
    loaded = Pipeline.load(original.serialize())
    feed = [np.array([0, 1, 9], np.int32), np.array([16], np.int32)]
    for a, b in zip(original.run(x=feed), loaded.run(x=feed), strict=True):
        for i in range(len(a)):
            np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("name", sorted(FLOAT_FUNCTIONS) + ["abs"])
def test_unary_functions_match_dali(name):
    import nvidia.dali.math as dali_math

    rng = np.random.default_rng(len(name) + 1)
    for dtype in MATH_TYPES:
        x = math_input(name if name != "abs" else "sin", dtype, rng)
        ours = run_headrace(lambda n: getattr(hmath, name)(n), [x])[0][0]
        dali = run_dali(lambda n, f: getattr(dali_math, name)(n), [x])[0][0]
        assert ours.dtype == dali.dtype, (name, dtype)
        np.testing.assert_allclose(ours, dali, rtol=1e-6, atol=1e-6, err_msg=f"{name} {np.dtype(dtype)}")


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("name", ["min", "max", "pow", "fpow", "atan2"])
def test_binary_functions_match_dali(name):
    import nvidia.dali.math as dali_math

    rng = np.random.default_rng(7)
    types_ = [np.uint8, np.int8, np.int32, np.uint32, np.int64, np.float32, np.float64, np.bool_]
    for a, b in itertools.product(types_, types_):
        if a == b == np.bool_:
            continue
        x = sample(a, rng, 6)
        y = sample(b, rng, 6)
        if name in ("pow", "fpow"):
            x = np.abs(x) if x.dtype.kind == "f" else x
            y = (np.abs(y) % 3).astype(b) if np.dtype(b).kind in "iu" else y
        ours = run_headrace(lambda n, m: getattr(hmath, name)(n, m), [x], [y])[0][0]
        dali = run_dali(lambda n, m, f: getattr(dali_math, name)(n, m), [x], [y])[0][0]
        assert ours.dtype == dali.dtype, (name, a, b)
        np.testing.assert_allclose(ours.astype(np.float64), dali.astype(np.float64), rtol=1e-6, atol=1e-6,
                                   equal_nan=True, err_msg=f"{name} {np.dtype(a)} {np.dtype(b)}")
    for scalar in (2, 2.5, np.uint8(2)):
        x = np.array([1, 2, 3], np.uint8)
        for expr in (lambda m, n, s=scalar: getattr(m, name)(n, s), lambda m, n, s=scalar: getattr(m, name)(s, n)):
            ours = run_headrace(lambda n, e=expr: e(hmath, n), [x])[0][0]
            dali = run_dali(lambda n, f, e=expr: e(dali_math, n), [x])[0][0]
            assert ours.dtype == dali.dtype, (name, scalar)
            np.testing.assert_allclose(ours, dali, rtol=1e-6)


@pytest.mark.dali
@needs_dali
def test_clamp_and_nan_handling_match_dali():
    import nvidia.dali.math as dali_math

    cases = [(np.uint8, np.uint8, np.uint8), (np.uint8, np.int32, np.int32), (np.float32, np.int32, np.int32),
             (np.int16, np.uint8, np.int8), (np.uint8, np.uint8, np.float64), (np.bool_, np.int32, np.int32)]
    rng = np.random.default_rng(8)
    for kinds in cases:
        value, lo, hi = (sample(t, rng, 8) for t in kinds)
        ours = run_headrace(lambda v, low, high: hmath.clamp(v, low, high), [value], [lo], [hi])[0][0]
        dali = run_dali(lambda v, low, high, f: dali_math.clamp(v, low, high), [value], [lo], [hi])[0][0]
        assert ours.dtype == dali.dtype, kinds
        np.testing.assert_array_equal(ours, dali)
    nan = np.float32(np.nan)
    v, lo, hi = (np.array(a, np.float32) for a in ([nan, 1, 5, 0], [1, nan, 4, 3], [2, 2, nan, 1]))
    def build(m):
        return lambda a, b, c, *dali_fn: (m.clamp(a, b, c), m.min(a, b), m.max(a, b), m.clamp(a, 2, 3.5))

    ours = run_headrace(build(hmath), [v], [lo], [hi])
    theirs = run_dali(build(dali_math), [v], [lo], [hi])
    for a, b in zip(ours, theirs, strict=True):
        assert a[0].dtype == b[0].dtype
        np.testing.assert_array_equal(a[0], b[0])


# GPU --------------------------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_math_functions_and_shifts_match_cpu():
    from tests.gpu_helpers import cpu_and_gpu

    def agree(batch, graph, exact=False):
        cpu, gpu = cpu_and_gpu(batch, graph)
        for a, b in zip(cpu, gpu, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            if exact and a.dtype.kind != "f":  # integer results exactly; floats (atan2, fpow of ints) to 1e-5
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, equal_nan=True)

    rng = np.random.default_rng(9)
    for dtype in (np.int32, np.uint8, np.float32, np.float64):
        for name in FLOAT_FUNCTIONS:
            batch = [math_input(name, dtype, rng), math_input(name, dtype, rng)[:2]]
            agree(batch, lambda x, device, n=name: getattr(hmath, n)(x))
        batch = [math_input("sin", dtype, rng), math_input("sin", dtype, rng)[:2]]
        for graph in (lambda x, d: hmath.min(x, 1), lambda x, d: hmath.max(2, x), lambda x, d: hmath.clamp(x, 0, 2),
                      lambda x, d: hmath.pow(x, 2), lambda x, d: hmath.fpow(x, 2), lambda x, d: hmath.atan2(x, 3),
                      lambda x, d: hmath.abs(x), lambda x, d: x ** 3, lambda x, d: hmath.min(x, x * 2)):
            agree(batch, graph, exact=np.dtype(dtype).kind != "f")
    ints = [np.array([2, -2, 1, -1, 0, 3], np.int32)]
    agree(ints, lambda x, d: x ** (x - 2), exact=True)  # negative integer exponents give 0
    for dtype in (np.uint8, np.int8, np.int32, np.int64, np.uint64):
        batch = [sample(dtype, rng, 40), sample(dtype, rng, 7)]
        for graph in (lambda x, d: x << 3, lambda x, d: x >> 1, lambda x, d: 1 << x, lambda x, d: x << 40,
                      lambda x, d: x >> (x & 7)):
            agree(batch, graph, exact=True)
