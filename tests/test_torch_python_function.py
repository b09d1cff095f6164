"""DALI's `torch_python_function` (`headrace.plugin.pytorch.fn`, and the legacy `TorchPythonFunction` class): a function
of torch tensors inside a pipeline, per sample (DALI's default) and per batch, with one and two outputs, against the
same arithmetic in numpy. Exact. (DALI's own makes a CUDA stream when it is called, so its CPU build cannot run it on a
machine without a GPU: there is no same-script comparison here.)"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import headrace

SAMPLES = [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(3)]


def _run(body) -> list[list[np.ndarray]]:
    plugin = importlib.import_module("headrace.plugin.pytorch")

    @headrace.pipeline_def(batch_size=len(SAMPLES), num_threads=1, device_id=None)
    def pipe():
        return body(plugin, headrace.fn.external_source(source=lambda: SAMPLES))

    built = pipe()
    built.build()
    return [[np.array(out.at(i)) for i in range(len(out))] for out in built.run()]


BODIES = {
    "per sample": lambda plugin, x: plugin.fn.torch_python_function(x, function=lambda t: t * 2 + 1),
    "two outputs": lambda plugin, x: tuple(plugin.fn.torch_python_function(
        x, function=lambda t: (t.sum(dim=0), torch.flip(t, dims=[1])), num_outputs=2)),
    "per batch": lambda plugin, x: plugin.fn.torch_python_function(
        x, function=lambda ts: [t - ts[0] for t in ts], batch_processing=True),
    "legacy class": lambda plugin, x: plugin.TorchPythonFunction(function=lambda t: t.T.contiguous())(x),
}


@pytest.mark.parametrize("body", sorted(BODIES))
def test_torch_function(body):
    got = _run(BODIES[body])
    expected = {"per sample": [[s * 2 + 1 for s in SAMPLES]],
                "two outputs": [[s.sum(axis=0) for s in SAMPLES], [s[:, ::-1] for s in SAMPLES]],
                "per batch": [[s - SAMPLES[0] for s in SAMPLES]],
                "legacy class": [[s.T for s in SAMPLES]]}[body]
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
