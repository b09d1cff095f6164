"""sequence_rearrange and per_frame against DALI's CPU operators (exact: both move data, compute nothing) and
numpy indexing; the GPU kernels against the CPU ones (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import needs_dali, run_dali, run_headrace

import headrace
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(5)
SEQUENCES = [RNG.integers(0, 256, (4, 3, 5, 2), dtype=np.uint8), RNG.integers(0, 256, (6, 2, 2, 2), dtype=np.uint8)]
FLOATS = [RNG.standard_normal((3, 7)).astype(np.float32), RNG.standard_normal((5, 1)).astype(np.float32)]


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("order", [[1, 0, 1], [3], [0, 1, 2, 3, 0, 1, 2, 3], [2, 2]])
def test_rearrange_matches_numpy(order):
    _same(run_headrace("sequence_rearrange", SEQUENCES, layout="FHWC", new_order=order),
          [s[order] for s in SEQUENCES])


def test_rearrange_order_per_sample():
    samples = [FLOATS[0], RNG.standard_normal((6, 3)).astype(np.float32)]
    orders = [np.array([2, 1, 0], np.int32), np.array([5, 0], np.int32)]
    got = run_headrace("sequence_rearrange", samples, arg_inputs={"new_order": orders})
    _same(got, [s[o] for s, o in zip(samples, orders, strict=True)])


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("layout", [None, "FHWC"])
@pytest.mark.parametrize("order", [[1, 0, 1], [0], [1, 1, 1, 1, 1]])
def test_rearrange_matches_dali(order, layout):
    kwargs = dict(layout=layout, new_order=order)
    _same(run_headrace("sequence_rearrange", SEQUENCES, **kwargs), run_dali("sequence_rearrange", SEQUENCES, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_rearrange_per_sample_order_matches_dali():
    orders = [np.array([2, 0], np.int32), np.array([5, 4, 3], np.int32)]
    kwargs = dict(arg_inputs={"new_order": orders})
    _same(run_headrace("sequence_rearrange", SEQUENCES, **kwargs), run_dali("sequence_rearrange", SEQUENCES, **kwargs))


def test_rearrange_errors_name_the_op_sample_and_argument():
    with pytest.raises(SampleError, match=r"sequence_rearrange.*sample 0.*layout starts with 'F'.*'HWC'"):
        run_headrace("sequence_rearrange", [s[0] for s in SEQUENCES], layout="HWC", new_order=[0])
    with pytest.raises(SampleError, match=r"sequence_rearrange.*sample 0.*'new_order'\[1\] is 4.*\[0, 4\)"):
        run_headrace("sequence_rearrange", SEQUENCES, new_order=[0, 4])
    with pytest.raises(SampleError, match=r"sequence_rearrange.*sample 1.*'new_order'.*got 0"):
        run_headrace("sequence_rearrange", SEQUENCES,
                     arg_inputs={"new_order": [np.array([0], np.int32), np.zeros(0, np.int32)]})
    with pytest.raises(SchemaError, match=r"sequence_rearrange.*argument 'new_order'.*got 0"):
        run_headrace("sequence_rearrange", SEQUENCES, new_order=[])


def _layout_of(source_kwargs: dict, **kwargs) -> tuple[str, list[np.ndarray]]:
    from headrace import fn

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.per_frame(fn.external_source(source=lambda: SEQUENCES, batch=True, **source_kwargs), **kwargs)

    p = pipe()
    (out,) = p.run()
    p.close()
    return out.layout(), [np.array(out.at(i)) for i in range(len(out))]


@pytest.mark.parametrize("source_kwargs, kwargs, layout", [
    (dict(layout="FHWC"), {}, "FHWC"),
    (dict(layout="HWCD"), dict(replace=True), "FWCD"),
    (dict(ndim=4), {}, "F***"),
])
def test_per_frame_marks_the_layout_and_keeps_the_data(source_kwargs, kwargs, layout):
    got_layout, data = _layout_of(source_kwargs, **kwargs)
    assert got_layout == layout
    _same(data, SEQUENCES)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("source_kwargs, kwargs", [(dict(layout="FHWC"), {}), (dict(layout="HWCD"), dict(replace=True)),
                                                   (dict(ndim=4), {})])
def test_per_frame_matches_dali(source_kwargs, kwargs):
    from nvidia import dali

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return dali.fn.per_frame(dali.fn.external_source(source=lambda: SEQUENCES, batch=True, **source_kwargs),
                                 **kwargs)

    p = pipe()
    p.build()
    (out,) = p.run()
    got_layout, data = _layout_of(source_kwargs, **kwargs)
    assert got_layout == out.layout()
    _same(data, [np.array(out.at(i)) for i in range(len(out))])


def test_per_frame_refuses_a_layout_without_frames():
    with pytest.raises(SampleError, match=r"per_frame.*sample 0.*must start with 'F', got 'HWCD'.*replace=True"):
        _layout_of(dict(layout="HWCD"))


@pytest.mark.gpu
@pytest.mark.parametrize("order", [[1, 0, 1], [3, 3]])
def test_gpu_rearrange_matches_cpu(order):
    from headrace import fn

    cpu, gpu = cpu_and_gpu(SEQUENCES, lambda data, device: fn.sequence_rearrange(data, new_order=order))
    _same(gpu, cpu)


@pytest.mark.gpu
def test_gpu_per_frame_matches_cpu():
    from headrace import fn

    cpu, gpu = cpu_and_gpu(SEQUENCES, lambda data, device: fn.per_frame(data))
    _same(gpu, cpu)
