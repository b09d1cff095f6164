"""User code for tests/test_ops_custom.py: module-level functions (a pipeline file stores them by module and name)
and a user op declared through headrace.plugin, as a user's own module would."""

from __future__ import annotations

import numpy as np

try:
    from numba import cuda
except ImportError:  # numba without its CUDA target: double_cuda is then never compiled
    cuda = None

from headrace.output_specs import same_as_input
from headrace.plugin import Arg, OpSchema, OutputSpec, cpu_kernel, gpu_kernel, reader, register_op

USER_OP = "custom_functions_test.scale_add"


def affine(x):
    return x * 2 + 1


def sum_and_difference(x, y):
    return x + y, x - y


def batch_plus_one(xs):
    return [x + 1 for x in xs]


def tripled_through_torch(capsules):
    from torch.utils import dlpack

    return [dlpack.to_dlpack(dlpack.from_dlpack(c) * 3) for c in capsules]


def fails_on_negative(x):
    if x.min() < 0:
        raise ValueError("negative input")
    return x


def returns_text(x):
    return "not an array"


def cupy_affine(x):
    import cupy

    assert isinstance(x, cupy.ndarray)
    return x * 2 + 1


def swap_shape(outs, ins):
    for i in range(len(outs[0])):
        outs[0][i][0] = ins[0][i][1]
        outs[0][i][1] = ins[0][i][0]


def transpose_plus_one(out0, in0):
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[j, i] = in0[i, j] + 1


def transpose_batch(outs, ins):
    for out, x in zip(outs, ins):  # noqa: B905  (numba compiles it: its zip takes no strict=)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[j, i] = x[i, j]


def double_cuda(out0, in0):
    """A numba.cuda kernel: out0 = 2 * in0 over a 1-D array."""
    i = cuda.grid(1)
    if i < in0.shape[0]:
        out0[i] = 2 * in0[i]


register_op(OpSchema(
    name=USER_OP,
    doc="x * scale + offset: a user op declared for the tests.",
    args=(Arg("scale", "float", 1.0, "The factor.", tensor_input=True), Arg("offset", "float", 0.0, "Added.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
))


@cpu_kernel(USER_OP)
def scale_add(inputs, args, ctx):
    return (inputs[0] * np.float32(args["scale"]) + np.float32(args["offset"])).astype(inputs[0].dtype)


@gpu_kernel(USER_OP)
def scale_add_gpu(batch):
    return [(x * np.float32(a["scale"]) + np.float32(a["offset"])).astype(x.dtype)
            for x, a in zip(batch.samples(0), batch.sample_args(), strict=True)]


COUNTER_OP = "custom_functions_test.counter"


def _counted(a):
    """One int64 number per sample, shape (1,)."""
    return [OutputSpec(np.int64, None, (1,))]


register_op(OpSchema(
    name=COUNTER_OP,
    doc="A stateful user reader: sample i of the stream is the number start + i (int64, shape (1,)).",
    args=(Arg("start", "int", 0, "The first number."),),
    devices=("cpu",), stateful=True, batch_op=True, state="reader",
    output_spec=_counted,
))


@reader(COUNTER_OP)
class Counter:
    """Counts on from where its state says; its state is a checkpoint's part of it."""

    def __init__(self, node, args, batch_size, seed, pool):
        self.node, self.batch_size, self.next = node, batch_size, args["start"]

    def next_batch(self, iteration):
        values = [np.array([self.next + i], np.int64) for i in range(self.batch_size)]
        self.next += self.batch_size
        return (values,), [f"{self.node}[{v[0]}]" for v in values]

    def get_state(self):
        return {"next": self.next}

    def set_state(self, state):
        self.next = int(state["next"])

    def meta(self):
        return {"epoch_size": 0}


CALLS: list[int] = []
"""The batch of every sample `records_batch` saw, in the order it saw them."""


def records_batch(x):
    """Notes the batch of a sample (its first value), lingering before the first sample (second value 0) of even
    batches, so that batches computed two at a time would interleave here."""
    import time

    if int(x[1]) == 0 and int(x[0]) % 2 == 0:
        time.sleep(0.02)
    CALLS.append(int(x[0]))
    return x
