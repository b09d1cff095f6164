"""The resize family's region of interest (roi_start / roi_end / roi_relative), its per-axis filters (min_filter /
mag_filter, INTERP_GAUSSIAN included), its output type on random_resized_crop, save_attrs, negative sizes (flips),
experimental.resize and fast_resize_crop_mirror: against DALI's CPU build, against headrace's own resize of a
cut-out region, and GPU against CPU (marker gpu).

Tolerances: uint8 outputs within 1 level of DALI's (both sum in float32, in different orders and, for CUBIC and
LANCZOS3, DALI with tabulated filter weights; GAUSSIAN's table is DALI's own), nearest neighbour exact; float
outputs within 1e-3 for the triangle and Gaussian filters. Headrace against itself: nearest neighbour and
whole-pixel regions exact, flipped linear within 1 level (the taps are summed in the other order). DALI has
experimental.resize on the GPU only: it is checked against headrace's resize (exact). The GPU kernels take the
CPU's tap tables (checked without a GPU here) and are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu, max_level_difference
from oprun import needs_dali, run_dali, run_headrace
from ops_support import assert_specs_agree

from headrace import Pipeline, SampleError, SchemaError, fn, pipeline_def, types

RNG = np.random.default_rng(7)
IMAGES = [RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8), RNG.integers(0, 256, (64, 48, 3), dtype=np.uint8)]
NN, LINEAR, CUBIC, LANCZOS3, TRIANGULAR, GAUSSIAN = (types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_CUBIC,
                                                     types.INTERP_LANCZOS3, types.INTERP_TRIANGULAR,
                                                     types.INTERP_GAUSSIAN)
gpu = pytest.mark.gpu


def _ids(kwargs: dict) -> str:
    return "-".join(f"{k}{getattr(v, 'name', v)}" for k, v in kwargs.items())


def _close(ours: list[np.ndarray], theirs: list[np.ndarray], atol: float) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        assert np.abs(a.astype(np.float64) - b).max() <= atol


ROI_CASES = [
    dict(size=[24, 24], roi_start=[0.25, 0.1], roi_end=[0.75, 0.9], roi_relative=True),
    dict(size=[16, 30], roi_start=[5, 40], roi_end=[30, 10]),  # x flipped
    dict(size=[60, 70], roi_start=[30, 10], roi_end=[5, 40]),  # y flipped, enlarged
    dict(resize_x=20, roi_start=[3.5, 2.25], roi_end=[20.7, 31.1]),  # the other extent from the ROI's aspect
    dict(resize_shorter=15.5, roi_start=[3.5, 2.25], roi_end=[20.7, 31.1]),  # fractional: sub-pixel scale
    dict(size=[20, 20], roi_start=[-5, -5], roi_end=[50, 60]),  # beyond the image: edge pixels replicated
    dict(size=[16, 30], roi_start=[5, 40], roi_end=[30, 10], interp_type=NN),
    dict(size=[16, 30], roi_start=[5, 40], roi_end=[30, 10], interp_type=CUBIC),
    dict(size=[50, 30], roi_start=[0.9, 0.2], roi_end=[0.1, 0.8], roi_relative=True, interp_type=LANCZOS3),
    dict(size=[20.5, 20], roi_start=[0.1, 0.2], roi_end=[0.9, 0.7], roi_relative=True, min_filter=CUBIC),
]

FILTER_CASES = [
    dict(size=[16, 70], min_filter=NN, mag_filter=CUBIC),  # y shrinks (NN), x grows (CUBIC)
    dict(size=[80, 20], min_filter=NN, mag_filter=CUBIC),
    dict(size=[80, 20], min_filter=CUBIC, mag_filter=NN),
    dict(size=[80, 20], min_filter=LANCZOS3, mag_filter=LINEAR),
    dict(size=[16, 70], min_filter=TRIANGULAR),  # DALI's SSD example
    dict(size=[16, 70], min_filter=TRIANGULAR, antialias=False),
    dict(size=[16, 70], interp_type=CUBIC, mag_filter=LINEAR),  # interp_type fills in the one not given
    dict(size=[16, 70], interp_type=CUBIC, min_filter=LINEAR, antialias=False),
    dict(size=[16, 16], min_filter=NN, mag_filter=NN),
    dict(size=[16, 70], interp_type=GAUSSIAN),  # DALI's tabulated Gaussian
    dict(size=[80, 20], min_filter=GAUSSIAN, mag_filter=LANCZOS3),
    dict(size=[16, 20], interp_type=GAUSSIAN, antialias=False),
    dict(size=[37, 48], interp_type=GAUSSIAN),  # scale 1 on one image: still smoothed, as DALI's
    dict(size=[30, 25], roi_start=[30, 5], roi_end=[3, 40], interp_type=GAUSSIAN),
]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", ROI_CASES + FILTER_CASES + [dict(resize_x=-20, resize_y=15), dict(size=[-20, 30])],
                         ids=_ids)
def test_resize_matches_dali(kwargs):
    ours = run_headrace(lambda x: fn.resize(x, **kwargs), IMAGES)[0]
    dali = run_dali(lambda x, f: f.resize(x, **kwargs), IMAGES)[0]
    exact = kwargs.get("interp_type") == NN or (kwargs.get("min_filter") == NN and kwargs.get("mag_filter") == NN)
    _close(ours, dali, 0 if exact else 1)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("interp", [LINEAR, GAUSSIAN], ids=["linear", "gaussian"])
def test_resize_float_output_with_filters_matches_dali(interp):
    kwargs = dict(size=[20, 70], min_filter=interp, mag_filter=TRIANGULAR, dtype=types.FLOAT, roi_start=[2, 3],
                  roi_end=[30, 40])
    _close(run_headrace(lambda x: fn.resize(x, **kwargs), IMAGES)[0],
           run_dali(lambda x, f: f.resize(x, **kwargs), IMAGES)[0], 1e-3)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("op", ["resize_crop_mirror", "fast_resize_crop_mirror"])
@pytest.mark.parametrize("kwargs", [
    dict(size=[30, 30], crop=[20, 24]),
    dict(size=[30, 30], crop=[20, 24], roi_start=[0.2, 0.9], roi_end=[0.8, 0.1], roi_relative=True, mirror=1),
    dict(resize_x=40, crop=[20, 24], roi_start=[3, 4], roi_end=[30, 33], crop_pos_x=0.2, min_filter=NN,
         mag_filter=CUBIC),
    dict(size=[30, 30], crop=[20, 24], interp_type=GAUSSIAN),
], ids=_ids)
def test_resize_crop_mirror_matches_dali(op, kwargs):
    """fast_resize_crop_mirror is resize_crop_mirror with antialias off by default (its DALI definition)."""
    ours = run_headrace(lambda x: getattr(fn, op)(x, **kwargs), IMAGES)[0]
    dali = run_dali(lambda x, f: getattr(f, op)(x, **kwargs), IMAGES)[0]
    _close(ours, dali, 1)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", [dict(), dict(dtype=types.FLOAT), dict(min_filter=NN, mag_filter=CUBIC),
                                    dict(size=[20, 90], interp_type=NN, mag_filter=LINEAR, dtype=types.FLOAT),
                                    dict(interp_type=GAUSSIAN)],
                         ids=_ids)
def test_random_resized_crop_filters_and_dtype_match_dali(kwargs):
    """A window that is the whole image (area 1, the image's aspect ratio), so both draw the same one."""
    image = [RNG.integers(0, 256, (40, 60, 3), dtype=np.uint8)]
    full = {"size": [20, 30], "random_area": [1.0, 1.0], "random_aspect_ratio": [1.5, 1.5], **kwargs}
    ours = run_headrace(lambda x: fn.random_resized_crop(x, **full), image)[0]
    dali = run_dali(lambda x, f: f.random_resized_crop(x, **full), image)[0]
    _close(ours, dali, 1e-3 if kwargs.get("dtype") == types.FLOAT else 1)


@pytest.mark.dali
@needs_dali
def test_save_attrs_matches_dali():
    ours = run_headrace(lambda x: fn.resize(x, size=[20, 20], save_attrs=True), IMAGES)
    dali = run_dali(lambda x, f: tuple(f.resize(x, size=[20, 20], save_attrs=True)), IMAGES)
    assert len(ours) == len(dali) == 2
    _close(ours[0], dali[0], 1)
    for a, b, image in zip(ours[1], dali[1], IMAGES, strict=True):
        assert a.dtype == b.dtype == np.int32
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, image.shape[:2])


# headrace against itself -----------------------------------------------------------------------------------------

def test_whole_pixel_roi_is_a_resize_of_the_cut_out_region():
    """Away from the region's border, where the filters read pixels outside the region (the image's own, as DALI
    does) and the cut-out's edge pixels replicated. (Not NN: its float32 source positions, origin + (i + 0.5) *
    step as DALI computes them, may round a tie to the other side once the origin moves.)"""
    for interp in (LINEAR, CUBIC, LANCZOS3):
        ours = run_headrace(lambda x, i=interp: fn.resize(x, size=[17, 29], roi_start=[4, 6], roi_end=[30, 44],
                                                            interp_type=i), IMAGES)[0]
        cut = run_headrace(lambda x, i=interp: fn.resize(x, size=[17, 29], interp_type=i),
                           [np.ascontiguousarray(im[4:30, 6:44]) for im in IMAGES])[0]
        for a, b in zip(ours, cut, strict=True):
            np.testing.assert_array_equal(a[4:-4, 4:-4], b[4:-4, 4:-4])
            assert (a != b).any()  # the border does read outside the region


@pytest.mark.parametrize("interp, atol", [(NN, 0), (LINEAR, 1)])
def test_reversed_roi_flips(interp, atol):
    """A step of 1.5 pixels: no source position falls on a pixel boundary, where NN could round either way."""
    forward = run_headrace(lambda x: fn.resize(x, size=[20, 30], roi_start=[3, 2], roi_end=[33, 47],
                                               interp_type=interp), IMAGES)[0]
    both = run_headrace(lambda x: fn.resize(x, size=[20, 30], roi_start=[33, 47], roi_end=[3, 2],
                                            interp_type=interp), IMAGES)[0]
    _close(both, [f[::-1, ::-1] for f in forward], atol)


def test_relative_roi_is_the_absolute_one():
    relative = run_headrace(lambda x: fn.resize(x, size=[20, 30], roi_start=[0.25, 0.5], roi_end=[0.75, 1.0],
                                                roi_relative=True), [IMAGES[1]])[0][0]
    absolute = run_headrace(lambda x: fn.resize(x, size=[20, 30], roi_start=[16, 24], roi_end=[48, 48]),
                            [IMAGES[1]])[0][0]
    np.testing.assert_array_equal(relative, absolute)


def test_min_and_mag_filter_are_chosen_per_axis():
    """y shrinks, x grows: min_filter=NN, mag_filter=CUBIC is NN rows of CUBIC columns, i.e. a NN shrink of the
    rows then a CUBIC enlargement of the columns."""
    image = IMAGES[0]
    both = run_headrace(lambda x: fn.resize(x, size=[16, 70], min_filter=NN, mag_filter=CUBIC), [image])[0][0]
    rows = run_headrace(lambda x: fn.resize(x, size=[16, 53], interp_type=NN), [image])[0][0]
    cols = run_headrace(lambda x: fn.resize(x, size=[16, 70], interp_type=CUBIC), [rows])[0][0]
    np.testing.assert_array_equal(both, cols)
    same = run_headrace(lambda x: (fn.resize(x, size=[16, 70], interp_type=CUBIC),
                                   fn.resize(x, size=[16, 70], min_filter=CUBIC, mag_filter=CUBIC, interp_type=NN)),
                        [image])
    np.testing.assert_array_equal(same[0][0], same[1][0])


def test_experimental_resize_is_resize():
    """DALI's experimental.resize (GPU only there, via CV-CUDA) takes resize's arguments: headrace's is resize."""
    for kwargs in (dict(size=[20, 31]), dict(resize_shorter=21.5, interp_type=CUBIC, antialias=False),
                   ROI_CASES[1], FILTER_CASES[0]):
        ours = run_headrace(lambda x, kw=kwargs: (fn.experimental.resize(x, **kw), fn.resize(x, **kw)), IMAGES)
        for a, b in zip(*ours, strict=True):
            np.testing.assert_array_equal(a, b)


def test_output_specs_of_the_new_arguments():
    """save_attrs' second output, a resized ROI and random_resized_crop's dtype, as declared."""
    @pipeline_def(batch_size=len(IMAGES), num_threads=1, device_id=None, seed=2)
    def pipe():
        x = fn.external_source(name="images", layout="HWC", dtype=types.UINT8, ndim=3)
        resized, attrs = fn.resize(x, size=[20, 21], roi_start=[0.9, 0.1], roi_end=[0.1, 0.8], roi_relative=True,
                                   save_attrs=True)
        return (resized, attrs, fn.random_resized_crop(x, size=[10, 12], dtype=types.FLOAT),
                fn.experimental.resize(x, resize_x=30, min_filter=CUBIC))

    assert_specs_agree(pipe(), images=IMAGES)


def test_roi_errors_name_the_arguments():
    with pytest.raises(SchemaError, match="roi_start and roi_end"):
        run_headrace(lambda x: fn.resize(x, size=[10, 10], roi_start=[1, 1]), IMAGES)
    with pytest.raises(SampleError, match="roi_start.*empty"):
        run_headrace(lambda x: fn.resize(x, size=[10, 10], roi_start=[1, 5], roi_end=[9, 5]), IMAGES)


def test_per_sample_roi_and_filters():
    """Argument inputs: each sample its own region and filters (DALI's tensor arguments)."""
    starts = [np.array(v, np.float32) for v in ([2, 3], [40, 5])]
    ends = [np.array(v, np.float32) for v in ([30, 40], [10, 45])]
    filters = [np.array(v, np.int32) for v in (int(NN), int(CUBIC))]
    out = run_headrace(lambda x, s, e, f: fn.resize(x, size=[12, 20], roi_start=s, roi_end=e, min_filter=f),
                       IMAGES, starts, ends, filters)[0]
    for i, image in enumerate(IMAGES):
        one = run_headrace(lambda x, i=i: fn.resize(x, size=[12, 20], roi_start=starts[i].tolist(),
                                                    roi_end=ends[i].tolist(), min_filter=int(filters[i])),
                           [image])[0][0]
        np.testing.assert_array_equal(out[i], one)


def test_gpu_tables_of_regions_and_filters_are_the_cpu_kernels():
    """The GPU's tap tables (made on the host) for ROIs, flips and per-axis filters are the CPU kernel's."""
    from headrace_kernels.cpu.geometry_ops import interp_filters, resample_taps, resize_region
    from headrace_kernels.gpu.image_ops import Batch, set_resizes

    class Host:  # what set_resizes reads of a device image, without a GPU
        def __init__(self, h: int, w: int):
            self.shape, self.strides, self.itemsize, self.ndim = (h, w, 3), (w * 3, 3, 1), 1, 3
            self.dtype, self.ptr, self.data = np.dtype(np.uint8), 0, self

    base = {"interp_type": int(LINEAR), "antialias": True, "subpixel_scale": True, "mode": "default",
            "max_size": None, "resize_shorter": 0.0, "resize_longer": 0.0, "resize_x": 0.0, "resize_y": 0.0}
    cases = [{**base, "size": [24, 24], "roi_start": [0.9, 0.1], "roi_end": [0.2, 0.8], "roi_relative": True},
             {**base, "size": [16, 70], "min_filter": int(NN), "mag_filter": int(CUBIC)},
             {**base, "size": [15.5, 30], "roi_start": [3, 40], "roi_end": [30, 2], "min_filter": int(TRIANGULAR)},
             {**base, "size": [-20, 30]}, {**base, "size": [37, 60], "interp_type": int(GAUSSIAN)}]
    images = [Host(37, 53), Host(64, 48), Host(5, 300), Host(37, 60)]
    for args in cases:
        batch = Batch(images, 3, "uint8", np.dtype(np.uint8))
        set_resizes(batch, [args] * len(images), np.dtype(np.uint8))
        tables = batch.tables if isinstance(batch.tables, tuple) else batch.tables.on_host()  # device-made
        which, (row_idx, row_w, col_idx, col_w), (row_start, col_start) = tables
        assert len(which) == len(images)  # none is a copy: the Gaussian smooths the 37x60 one at scale 1
        for k, i in enumerate(which.tolist()):
            h, w = images[i].shape[:2]
            out_h, out_w, region = resize_region(h, w, args)
            (rows, rows_w), (cols, cols_w) = resample_taps(h, w, out_h, out_w, interp_filters(args), True, region,
                                                           np.uint8, gaussian=True)
            rs, cs = int(row_start[k]), int(col_start[k])
            np.testing.assert_array_equal(row_idx[rs:rs + rows.size], rows.ravel())
            np.testing.assert_array_equal(row_w[rs:rs + rows.size], rows_w.ravel())
            np.testing.assert_array_equal(col_idx[cs:cs + cols.size], cols.ravel())
            np.testing.assert_array_equal(col_w[cs:cs + cols.size], cols_w.ravel())


# GPU against CPU -------------------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("kwargs", ROI_CASES + FILTER_CASES + [dict(size=[-20, 30])], ids=_ids)
def test_gpu_resize_is_the_cpu_kernel(kwargs):
    cpu, gpu_out = cpu_and_gpu(IMAGES, lambda d, dev: fn.resize(d, **kwargs))
    assert max_level_difference(cpu, gpu_out) == 0


@gpu
def test_gpu_fused_resize_normalize_with_roi_and_filters():
    def graph(d, dev):
        resized = fn.resize(d, size=[30, 40], roi_start=[0.9, 0.1], roi_end=[0.1, 0.8], roi_relative=True,
                            min_filter=TRIANGULAR, mag_filter=CUBIC)
        return fn.crop_mirror_normalize(resized, crop=(24, 24), mean=[100.0], std=[50.0], pad_output=True)

    cpu, gpu_out = cpu_and_gpu(IMAGES, graph)
    assert max_level_difference(cpu, gpu_out) == 0


@gpu
@pytest.mark.parametrize("kwargs", [dict(dtype=types.FLOAT), dict(min_filter=NN, mag_filter=CUBIC)], ids=_ids)
def test_gpu_random_resized_crop_is_the_cpu_kernel(kwargs):
    cpu, gpu_out = cpu_and_gpu(IMAGES, lambda d, dev: fn.random_resized_crop(d, size=[20, 30], name="crop",
                                                                             **kwargs))  # its seed follows the name
    assert max_level_difference(cpu, gpu_out) == 0


@gpu
@pytest.mark.parametrize("kwargs", [dict(crop=(20, 20), fill_values=[7]),
                                    dict(crop=(20, 20), fill_values=[7], out_of_bounds_policy="pad"),
                                    dict(crop=(80, 90), fill_values=[7, 8, 9, 10], out_of_bounds_policy="pad")],
                         ids=_ids)
def test_gpu_pad_output_fill_is_the_cpu_kernels(kwargs):
    cpu, gpu_out = cpu_and_gpu(IMAGES, lambda d, dev: fn.crop_mirror_normalize(d, pad_output=True,
                                                                              dtype=types.UINT8, **kwargs))
    assert max_level_difference(cpu, gpu_out) == 0


@gpu
def test_gpu_save_attrs():
    outputs = []
    for device in ("cpu", "gpu"):
        pipe = Pipeline(batch_size=len(IMAGES), num_threads=1, device_id=0)
        with pipe:
            data = fn.external_source(source=lambda: IMAGES)
            pipe.set_outputs(*fn.resize(data.gpu() if device == "gpu" else data, size=[20, 20], save_attrs=True))
        images, attrs = pipe.run()
        outputs.append(([np.asarray(images.as_cpu().at(i) if device == "gpu" else images.at(i))
                         for i in range(len(IMAGES))],
                        [np.asarray(attrs.as_cpu().at(i) if device == "gpu" else attrs.at(i))
                         for i in range(len(IMAGES))]))
        pipe.close()
    assert max_level_difference(outputs[0][0], outputs[1][0]) == 0
    for a, b in zip(outputs[0][1], outputs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)
