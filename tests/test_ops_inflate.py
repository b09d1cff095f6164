"""decoders.inflate / experimental.inflate against Python's zlib (and the lz4 package where installed): DALI's CPU
build has no inflate (DALI inflates on the GPU only), so the reference is the data before compression (exact); the
GPU kernel against the CPU one (exact)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import run_headrace

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(4)
FRAMES = [RNG.integers(0, 8, (3, 4, 5, 3), dtype=np.uint8), RNG.integers(0, 8, (2, 4, 5, 3), dtype=np.uint8)]


def deflate(data: bytes, algorithm: str = "DEFLATE") -> bytes:
    if algorithm == "ZLIB":
        return zlib.compress(data)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def as_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", ["decoders.inflate", "experimental.inflate"])
@pytest.mark.parametrize("algorithm", ["DEFLATE", "ZLIB"])
def test_single_chunk(op, algorithm):
    arrays = [RNG.standard_normal((6, 7)).astype(np.float32), RNG.standard_normal((6, 7)).astype(np.float32)]
    data = [as_bytes(deflate(a.tobytes(), algorithm)) for a in arrays]
    _same(run_headrace(op, data, shape=[6, 7], dtype=types.FLOAT, algorithm=algorithm), arrays)


def _chunked(sequences: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """(samples, chunk offsets, chunk sizes): each frame deflated on its own, the frames concatenated."""
    samples, offsets, sizes = [], [], []
    for sequence in sequences:
        chunks = [deflate(frame.tobytes()) for frame in sequence]
        sizes.append(np.array([len(c) for c in chunks], np.int32))
        offsets.append(np.concatenate([[0], np.cumsum(sizes[-1])[:-1]]).astype(np.int32))
        samples.append(as_bytes(b"".join(chunks)))
    return samples, offsets, sizes


@pytest.mark.parametrize("given", [("chunk_offsets",), ("chunk_sizes",), ("chunk_offsets", "chunk_sizes")])
def test_chunks_stack_along_a_new_outer_axis(given):
    samples, offsets, sizes = _chunked(FRAMES)
    arg_inputs = {name: {"chunk_offsets": offsets, "chunk_sizes": sizes}[name] for name in given}
    got = run_headrace("decoders.inflate", samples, arg_inputs=arg_inputs, shape=[4, 5, 3], algorithm="DEFLATE")
    _same(got, FRAMES)


def test_chunks_in_any_order_and_the_layout():
    frames = FRAMES[0]
    chunks = [deflate(f.tobytes()) for f in frames]
    sample = as_bytes(chunks[2] + chunks[0] + chunks[1])
    sizes = [len(c) for c in chunks]
    offsets = [sizes[2], sizes[2] + sizes[0], 0]

    @headrace.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = headrace.fn.external_source(source=lambda: [sample], batch=True)
        return headrace.fn.decoders.inflate(data, chunk_offsets=offsets, chunk_sizes=sizes, shape=[4, 5, 3],
                                            algorithm="DEFLATE", layout="HWC")

    p = pipe()
    (out,) = p.run()
    p.close()
    assert out.layout() == "FHWC"
    _same([np.array(out.at(0))], [frames])


def test_per_sample_shape():
    arrays = [np.arange(12, dtype=np.int16).reshape(3, 4), np.arange(10, dtype=np.int16).reshape(5, 2)]
    shapes = [np.array(a.shape, np.int32) for a in arrays]
    data = [as_bytes(deflate(a.tobytes(), "ZLIB")) for a in arrays]
    _same(run_headrace("decoders.inflate", data, arg_inputs={"shape": shapes}, dtype=types.INT16, algorithm="ZLIB"),
          arrays)


def test_lz4_blocks():
    lz4_block = pytest.importorskip("lz4.block")
    arrays = [RNG.integers(0, 4, (9, 8), dtype=np.uint8) for _ in range(2)]
    data = [as_bytes(lz4_block.compress(a.tobytes(), store_size=False)) for a in arrays]
    _same(run_headrace("decoders.inflate", data, shape=[9, 8]), arrays)


def test_lz4_without_the_package_says_what_to_install():
    try:
        import lz4.block  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the lz4 package is installed")
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*'LZ4' needs the lz4 package"):
        run_headrace("decoders.inflate", [as_bytes(b"\x00")], shape=[1])


def test_errors_name_the_op_sample_and_argument():
    array = np.arange(24, dtype=np.uint8)
    good = as_bytes(deflate(array.tobytes()))
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 1.*more than 20 bytes.*'shape' and 'dtype'"):
        run_headrace("decoders.inflate", [as_bytes(deflate(array[:20].tobytes())), good],
                     shape=[20], algorithm="DEFLATE")
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*inflates to 24 bytes.*say 48"):
        run_headrace("decoders.inflate", [good], shape=[24], dtype=types.INT16, algorithm="DEFLATE")
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*not a valid ZLIB stream"):
        run_headrace("decoders.inflate", [good], shape=[24], algorithm="ZLIB")
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*truncated"):
        run_headrace("decoders.inflate", [good[:-2]], shape=[24], algorithm="DEFLATE")
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*chunk 1 .*past the end.*'chunk_sizes'"):
        run_headrace("decoders.inflate", [good], shape=[24], algorithm="DEFLATE", chunk_sizes=[len(good), 5])
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*'chunk_offsets' \(1 values\).*'chunk_sizes'"):
        run_headrace("decoders.inflate", [good], shape=[24], algorithm="DEFLATE", chunk_sizes=[1, 2],
                     chunk_offsets=[0])
    with pytest.raises(SampleError, match=r"decoders.inflate.*sample 0.*1D uint8"):
        run_headrace("decoders.inflate", [np.zeros((2, 2), np.float32)], shape=[24], algorithm="DEFLATE")
    with pytest.raises(SchemaError, match=r"decoders.inflate.*argument 'algorithm'.*'GZIP'"):
        run_headrace("decoders.inflate", [good], shape=[24], algorithm="GZIP")
    with pytest.raises(SchemaError, match=r"decoders.inflate.*missing required argument 'shape'"):
        run_headrace("decoders.inflate", [good], algorithm="DEFLATE")


@pytest.mark.gpu
def test_gpu_matches_cpu():
    samples, offsets, sizes = _chunked(FRAMES)
    del offsets

    def graph(data, device):
        return headrace.fn.decoders.inflate(data, chunk_sizes=[int(s) for s in sizes[0]], shape=[4, 5, 3],
                                            algorithm="DEFLATE")

    cpu, gpu = cpu_and_gpu(samples[:1], graph)
    _same(gpu, cpu)
    _same(gpu, FRAMES[:1])
