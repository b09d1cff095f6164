"""A DALI script never calls pipe.close(): the interpreter must exit cleanly (status 0, nothing on stderr, no
"terminate called without an active exception") every time, with batches still being computed ahead, threads
busy and worker processes running."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numpy as np
    from headrace import fn, pipeline_def

    def sample(info):
        return np.full((64, 64, 3), info.idx_in_batch, np.uint8)

    @pipeline_def(batch_size=16, num_threads=4, device_id=None, seed=1, prefetch_queue_depth=4, py_num_workers=2)
    def pipe():
        images = fn.external_source(lambda: [np.full((96, 128, 3), i, np.uint8) for i in range(16)], layout="HWC")
        par = fn.external_source(sample, batch=False, parallel={parallel}, layout="HWC")
        return fn.resize(images, resize_shorter=40), fn.flip(par)

    p = pipe()
    p.build()
    p.run()
    print("ran")
""")


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [False, True])
def test_exit_without_close_is_clean_every_time(parallel):
    script = SCRIPT.format(parallel=parallel)
    runs = 20 if not parallel else 5
    processes = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(runs)]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert out.strip() == "ran"
        assert "terminate called" not in err and "Traceback" not in err, err
