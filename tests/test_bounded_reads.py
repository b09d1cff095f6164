"""Whatever a pipeline names is read within bounds: a pipeline file, a sample file and fed data that are not what
they should be give headrace's own errors, at once (issue 24: `/dev/zero` grew memory without end)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from headrace import InputDataError, Pipeline, PipelineFileError, SampleError, fn, pipeline_def, types


@pytest.mark.parametrize("path", ["/dev/zero", "/nonexistent/pipeline.json", "/tmp"])
def test_a_pipeline_path_that_is_not_a_regular_file_is_refused(path):
    with pytest.raises(PipelineFileError, match="not a regular file|cannot read"):
        Pipeline.load(path)


def test_a_pipeline_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PipelineFileError, match="not UTF-8"):
        Pipeline.load(path)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_sample_that_is_a_device_or_a_fifo_is_an_error_naming_it(tmp_path, threads):
    fifo = tmp_path / "fifo.jpg"
    os.mkfifo(fifo)

    for name in ("/dev/zero", str(fifo)):
        @pipeline_def(batch_size=1, num_threads=threads, device_id=None, seed=1)
        def read(name=name):
            data, _ = fn.readers.file(files=[name])
            return data

        pipe = read()
        with pytest.raises((SampleError, OSError), match="not a regular file"):
            pipe.run()
        pipe.close()


def test_fed_data_that_does_not_fit_the_source_is_a_headrace_error():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def fed():
        return fn.external_source(name="x", dtype=types.UINT8, ndim=1)

    pipe = fed()
    with pytest.raises(InputDataError, match="sample 0 has dtype float32"):
        pipe.run(x=[np.zeros(3, np.float32)])
    pipe.close()
