"""DALI's arithmetic expression examples: docs/examples/general/expressions/expr_examples.ipynb,
expr_type_promotions.ipynb, expr_blend_image.ipynb, expr_conditional_and_masking.ipynb and the math functions of
docs/examples/general/expressions (nvidia.dali.math)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case
from dali_suite.images import image_pipeline

EXPR = "DALI docs/examples/general/expressions/expr_examples.ipynb"
def _ints(seed: int, dtype=np.int32, low: int = -20, high: int = 20) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(low, high, (3, 4 + i)).astype(dtype) for i in range(3)]


def two_inputs(lib: Lib, a: list[np.ndarray], b: list[np.ndarray], body: Callable, batch_size: int = 3) -> Pipe:
    """Two external sources, then `body(lib, x, y)`."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=batch_source(a), batch=True)
        y = fn.external_source(source=batch_source(b), batch=True)
        return body(lib, x, y)

    return pipe()


@case(EXPR + " (operators on int32 tensors)", atol=1e-6)
def expr_int_operators(lib: Lib, data: SuiteData) -> Pipe:
    b = [np.where(x == 0, 3, x) for x in _ints(2)]
    return two_inputs(lib, _ints(1), b, lambda lib, x, y: (x + y, x - y, x * y, x / y, x // y, x % y, -x, +y,
                                                           x ** 2))


@case(EXPR + " (comparisons and bitwise ops)")
def expr_compare_bitwise(lib: Lib, data: SuiteData) -> Pipe:
    return two_inputs(lib, _ints(3), _ints(4), lambda lib, x, y: (
        x > y, x == y, x <= 0, (x > 0) & (y > 0), (x < 0) | (y < 0), (x > y) ^ (y > 0), x & y, x | 5, x ^ y))


@case("DALI docs/examples/general/expressions/expr_type_promotions.ipynb", atol=1e-6)
def expr_type_promotions(lib: Lib, data: SuiteData) -> Pipe:
    a = _ints(5, np.uint8, 0, 200)
    b = _ints(6, np.int16, -300, 300)
    return two_inputs(lib, a, b, lambda lib, x, y: (
        x + y, x * 3, x + 1.5, y - x, x + lib.types.Constant(7, dtype=lib.types.UINT8), y / 2,
        x + lib.fn.cast(y, dtype=lib.types.FLOAT), lib.fn.cast(x, dtype=lib.types.INT64) * y))


@case("DALI docs/examples/general/expressions/expr_blend_image.ipynb", atol=1)
def expr_blend_images(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        small = fn.resize(images, resize_x=40, resize_y=30)
        flipped = fn.flip(small, horizontal=1)
        blended = small * 0.7 + flipped * 0.3
        return fn.cast(blended, dtype=types.UINT8), blended

    return image_pipeline(lib, data, body)


@case("DALI docs/examples/general/expressions/expr_conditional_and_masking.ipynb")
def expr_masking(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        mask = images > 127
        return images * mask, images * (1 - mask) + 255 * mask, mask

    return image_pipeline(lib, data, body)


@case("DALI docs/examples/general/expressions/expr_examples.ipynb (nvidia.dali.math)", atol=1e-5)
def math_functions(lib: Lib, data: SuiteData) -> Pipe:
    rng = np.random.default_rng(8)
    a = [rng.uniform(0.1, 4.0, (5, 3)).astype(np.float32) for _ in range(3)]
    b = [rng.uniform(-2.0, 2.0, (5, 3)).astype(np.float32) for _ in range(3)]
    return two_inputs(lib, a, b, lambda lib, x, y: (
        lib.math.sqrt(x), lib.math.abs(y), lib.math.exp(y), lib.math.log(x), lib.math.clamp(y, -1.0, 1.0),
        lib.math.min(x, y), lib.math.max(x, 1.0), lib.math.pow(x, y), lib.math.atan2(y, x),
        lib.math.floor(y), lib.math.ceil(y)))


@case(EXPR + " (scalar constants: Python int and float, numpy scalars)", atol=1e-6)
def expr_scalar_constants(lib: Lib, data: SuiteData) -> Pipe:
    rng = np.random.default_rng(9)
    a = [rng.uniform(-5, 5, (4,)).astype(np.float32) for _ in range(3)]
    b = [rng.integers(0, 100, (4,)).astype(np.int32) for _ in range(3)]
    return two_inputs(lib, a, b, lambda lib, x, y: (
        x * 2, 2.5 - x, y + 1, y * np.uint8(3), y // 7, 1 / (y + 1), x ** 2,
        3 ** lib.fn.cast(y % 4, dtype=lib.types.INT32)))


@case(EXPR + " (broadcasting a per-sample vector)", atol=1e-6)
def expr_broadcasting(lib: Lib, data: SuiteData) -> Pipe:
    rng = np.random.default_rng(10)
    a = [rng.uniform(0, 1, (4 + i, 3)).astype(np.float32) for i in range(3)]
    b = [rng.uniform(0, 1, (3,)).astype(np.float32) for _ in range(3)]
    return two_inputs(lib, a, b, lambda lib, x, y: (x - y, x * y + 1.0, x > y))


@case(EXPR + " (bit shifts)")
def expr_bit_shifts(lib: Lib, data: SuiteData) -> Pipe:
    return two_inputs(lib, _ints(13, np.int32, 0, 100), _ints(14, np.int32, 0, 4), lambda lib, x, y: (
        x << 2, x >> y, 1 << y))


@case(EXPR + " (scalar types.Constant made before the pipeline is defined; an int constant is INT32)", atol=1e-6)
def constant_outside_pipeline(lib: Lib, data: SuiteData) -> Pipe:
    offset = lib.types.Constant(7)
    scale = lib.types.Constant(0.5)
    a = [x[:2, :3] for x in _ints(15, np.int16, -5, 5)]
    return two_inputs(lib, a, a, lambda lib, x, y: (x + offset, y * scale,
                                                    lib.fn.cast(x, dtype=lib.types.INT8) * offset))


@case(EXPR + " (array types.Constant made before the pipeline is defined)")
def array_constant_outside_pipeline(lib: Lib, data: SuiteData) -> Pipe:
    table = lib.types.Constant(np.arange(6, dtype=np.int16).reshape(2, 3))
    a = [x[:2, :3] for x in _ints(16, np.int16, -5, 5)]
    return two_inputs(lib, a, a, lambda lib, x, y: (x - table, y * table))
