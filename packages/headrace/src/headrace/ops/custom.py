"""Schemas of the user-function ops: python_function, dl_tensor_python_function, experimental.numba_function. A
pipeline file stores their functions by reference (module, name, source hash: headrace.function_refs)."""

from headrace.output_specs import numpy_dtype
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

MAX_FUNCTION_INPUTS = 32
"""The most inputs a python_function takes."""
MAX_NUMBA_ARRAYS = 6
"""numba_function's limit on inputs and on outputs, as DALI's."""


def _layouts(a: SpecArgs) -> list[str | None]:
    layouts = a.args["output_layouts"]
    count = a.args["num_outputs"]
    if layouts is None:
        return [None] * count
    if isinstance(layouts, str):
        return [layouts] * count
    return [*layouts, *[None] * count][:count]


def _function_outputs(a: SpecArgs) -> list[OutputSpec]:
    """What the function returns, in the layouts `output_layouts` names (type and shape known only when it runs)."""
    return [OutputSpec(None, layout, None) for layout in _layouts(a)]


def _numba_outputs(a: SpecArgs) -> list[OutputSpec]:
    """Arrays of the types `out_types` and the ranks `outs_ndim` names, filled by `run_fn`."""
    return [OutputSpec(numpy_dtype(t), None, (-1,) * n) for t, n in zip(a.args["out_types"], a.args["outs_ndim"],
                                                                         strict=False)]


_FUNCTION_ARGS = (
    Arg("function", "function", REQUIRED, "The Python function to call. A pipeline file stores it by module and "
        "name (with a hash of its source): define it at the top level of an importable module."),
    Arg("num_outputs", "int", 1, "How many arrays the function returns."),
    Arg("output_layouts", "any", None, "The layout of each output: one string for all, or one per output."),
)

register(OpSchema(
    name="python_function",
    doc="Call a Python function on the data: per sample, with one numpy (CPU) or CuPy (GPU) array per input, or with "
        "`batch_processing=True` once per batch, with a list of arrays per input. It returns an array, or a "
        "tuple of `num_outputs` arrays (lists of arrays per batch). On the GPU it runs on the pipeline's CUDA "
        "stream.",
    args=(*_FUNCTION_ARGS,
          Arg("batch_processing", "bool", False, "Call the function once per batch instead of once per sample."),
          Arg("num_workers", "int", 0, "headrace's own: run the per-sample calls in this many worker processes "
              "(CPU, batch_processing=False), the batch's samples split between them, results back in shared "
              "memory: Python that holds the GIL no longer holds up the pipeline. 0: in the pipeline's thread.",
              limits=Limits(0, 256)),
          Arg("worker_start_method", "str", "spawn", "How the worker processes start: 'spawn' (safe beside the "
              "pipeline's threads; the function must be importable) or 'fork'.", choices=("spawn", "fork"))),
    min_inputs=0, max_inputs=MAX_FUNCTION_INPUTS, num_outputs=lambda args: args.get("num_outputs", 1),
    devices=("cpu", "gpu"), whole_batch=True, state="none", output_spec=_function_outputs,
))

register(OpSchema(
    name="dl_tensor_python_function",
    doc="Call a Python function that takes and returns DLPack capsules, so a torch or CuPy function runs on the "
        "batch without a copy (`torch.utils.dlpack.from_dlpack(capsule)`). Once per batch by default: a list of "
        "capsules per input in, a list per output back.",
    args=(*_FUNCTION_ARGS,
          Arg("batch_processing", "bool", True, "Call the function once per batch (True) or once per sample."),
          Arg("synchronize_stream", "bool", True, "Synchronize the pipeline's CUDA stream before calling the "
              "function (GPU), for functions that work on another stream.")),
    min_inputs=0, max_inputs=MAX_FUNCTION_INPUTS, num_outputs=lambda args: args.get("num_outputs", 1),
    devices=("cpu", "gpu"), whole_batch=True, state="none", output_spec=_function_outputs,
))


register(OpSchema(
    name="experimental.numba_function",
    doc="Run a function compiled by numba (nopython mode): `run_fn(out0, ..., in0, ...)` fills the outputs from "
        "the inputs, per sample or, with `batch_processing=True`, per batch (a list of arrays each). "
        "`setup_fn(outs, ins)`, called once per batch, sets each output sample's shape (`outs[k][i]`) from the "
        "inputs' (`ins[k][i]`); without it the outputs have the first input's shapes. On the GPU `run_fn` is a "
        "numba.cuda kernel launched per sample with `blocks` x `threads_per_block`.",
    args=(
        Arg("run_fn", "function", REQUIRED, "The function that computes the outputs (compiled by numba)."),
        Arg("setup_fn", "function", None, "The function that sets the outputs' shapes (compiled by numba)."),
        Arg("out_types", "dtype", REQUIRED, "The element type of each output.", list_of=True,
            list_len=(1, MAX_NUMBA_ARRAYS)),
        Arg("in_types", "dtype", REQUIRED, "The element type of each input.", list_of=True,
            list_len=(1, MAX_NUMBA_ARRAYS)),
        Arg("outs_ndim", "int", REQUIRED, "The number of dimensions of each output.", list_of=True,
            list_len=(1, MAX_NUMBA_ARRAYS)),
        Arg("ins_ndim", "int", REQUIRED, "The number of dimensions of each input.", list_of=True,
            list_len=(1, MAX_NUMBA_ARRAYS)),
        Arg("batch_processing", "bool", False, "Call run_fn once per batch with lists of samples."),
        Arg("blocks", "int", None, "GPU: the grid of blocks per launch (x, y, z).", list_of=True, list_len=(3, 3)),
        Arg("threads_per_block", "int", None, "GPU: the threads per block (x, y, z).", list_of=True,
            list_len=(3, 3)),
    ),
    min_inputs=1, max_inputs=MAX_NUMBA_ARRAYS, num_outputs=lambda args: len(args.get("out_types") or [None]),
    devices=("cpu", "gpu"), whole_batch=True, state="none", output_spec=_numba_outputs,
))
