"""numba_calls.bind: a numba loop taking ctypes functions, called through its compiled overload after the first
call, gives the same results as through numba's dispatcher, per argument kind; start_cpu_target's head start."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys

import numba
import numpy as np
import pytest

from headrace_kernels.numba_calls import bind

libm = ctypes.util.find_library("m")


@numba.njit(nogil=True)
def _apply(function, values, out):
    for i in range(len(values)):
        out[i] = function(values[i])


@pytest.fixture(scope="module")
def c_sqrt():
    if libm is None:
        pytest.skip("no libm")
    sqrt = ctypes.CDLL(libm).sqrt
    sqrt.argtypes, sqrt.restype = [ctypes.c_double], ctypes.c_double
    return sqrt


def test_bound_loop_equals_the_dispatcher_and_calls_the_overload_directly(c_sqrt):
    call = bind(_apply, c_sqrt)
    values = np.arange(10, dtype=np.float64)
    want = np.empty(10)
    _apply(c_sqrt, values, want)
    for _ in range(3):
        out = np.zeros(10)
        call(values, out)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(out, np.sqrt(values))
    assert len(call.entries) == 1


def test_each_argument_kind_gets_its_own_overload(c_sqrt):
    call = bind(_apply, c_sqrt)
    as_float32 = np.zeros(4, np.float32)
    call(np.array([4.0, 9.0, 16.0, 25.0]), as_float32)  # a float32 output: another overload
    out = np.zeros(4)
    call(np.array([4.0, 9.0, 16.0, 25.0]), out)
    np.testing.assert_array_equal(as_float32, [2, 3, 4, 5])
    np.testing.assert_array_equal(out, [2, 3, 4, 5])
    assert len(call.entries) == 2
    readonly = np.array([1.0, 4.0])
    readonly.flags.writeable = False
    call(readonly, out[:2])
    np.testing.assert_array_equal(out[:2], [1, 2])
    assert len(call.entries) == 3


def test_the_cpu_target_set_up_in_the_background_once_beside_a_compile():
    """start_cpu_target sets numba's CPU target up on one thread per process, however often it is called; a loop
    compiled meanwhile (in a new interpreter, where nothing is set up yet) waits for it and computes right."""
    code = """
import threading
import numba
from headrace_kernels.numba_calls import start_cpu_target
start_cpu_target()
start_cpu_target()
setting_up = [t for t in threading.enumerate() if t.name == "headrace-numba-target"]
total = numba.njit(lambda n: sum(range(n)))(10)
for thread in setting_up:
    thread.join(60)
print(len(setting_up), total, any(t.is_alive() for t in setting_up))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "45", "False"]
