"""Without a GPU (CI): headrace imports, the CUDA sources ship with the package, and device='gpu' / 'mixed' raise a
DeviceError naming the node and the reason at build time."""

from __future__ import annotations

import numpy as np
import pytest
from headrace import Pipeline, fn
from headrace.errors import DeviceError

from tests.conftest import HAS_GPU


def test_cuda_sources_ship_with_the_package():
    from headrace_kernels.gpu.runtime import kernel_source

    assert "image_store" in kernel_source("image.cu") and "cast_any" in kernel_source("cast.cu")


def test_sample_record_layout_matches_the_cuda_struct():
    import re

    from headrace_kernels.gpu.image_ops import SAMPLE
    from headrace_kernels.gpu.runtime import kernel_source

    source = kernel_source("image.cu")
    body = source[source.index("struct Sample {"):source.index("};", source.index("struct Sample {"))]
    names = []
    for match in re.finditer(r"^\s*(unsigned long long|int|float)\s+([^;]+);", body, re.MULTILINE):
        names += [name.strip().split("[")[0] for name in match.group(2).split(",")]
    assert names == list(SAMPLE.names)


@pytest.mark.skipif(HAS_GPU, reason="checks the error raised on machines without a GPU")
@pytest.mark.parametrize("device", ["gpu", "mixed"], ids=["device_g", "device_m"])
def test_gpu_device_without_gpu_raises_device_error(device):
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1)
    with pipe:
        data = fn.external_source(source=lambda: [np.zeros(4, np.uint8)] * 2)
        if device == "mixed":
            out = fn.decoders.image(data, device="mixed")
        else:
            out = fn.cast(data.gpu(), dtype=9)
        pipe.set_outputs(out)
    with pytest.raises(DeviceError) as info:
        pipe.build()
    message = str(info.value)
    assert "node '" in message and f"device '{device}'" in message
    assert "GPU" in message or "CuPy" in message
