"""Ops whose kernel sees a whole batch at once (e.g. `pad` to the batch's largest sample). Such a kernel takes lists
of inputs, of arguments and of contexts (the samples on the node's branch only) and returns one result per sample."""

from __future__ import annotations

from headrace.engine.context import SampleContext, SampleOp, arg_value
from headrace.errors import SampleError
from headrace_kernels.registry import SampleFailureError


def run_whole_batch(op: SampleOp, values, collectors, first_sample: int, size: int, sources: list[str]) -> None:
    """Run an op whose kernel takes the whole batch (the samples on its branch): lists of inputs, of arguments
    and of contexts in, one result per sample out."""
    active = [i for i in range(size) if op.guard is None or values[op.guard][i] is not None]
    batch_inputs, batch_args = [], []
    for i in active:
        batch_inputs.append([values[ref][i] for ref in op.inputs])
        args = op.static_args
        if op.arg_inputs:
            args = dict(args)
            for arg, ref in op.arg_inputs:
                try:
                    args[arg.name] = arg_value(values[ref][i], arg)
                except ValueError as exc:
                    source = sources[i] if i < len(sources) else f"sample {i}"
                    raise SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on sample {i} "
                                      f"[{source}]: {exc}", node=op.node.name, op=op.node.schema.name, sample=i,
                                      source=source) from exc
        batch_args.append(args)
    try:
        contexts = [SampleContext(op.seed, first_sample + i, sources[i] if i < len(sources) else "", op.input_layouts)
                    for i in active]
        results = op.kernel(batch_inputs, batch_args, contexts)
    except SampleFailureError as exc:  # the kernel named the sample: say which, and where it came from
        i = active[exc.index] if 0 <= exc.index < len(active) else exc.index
        source = sources[i] if 0 <= i < len(sources) else f"sample {i}"
        raise SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on sample {i} [{source}]: {exc}",
                          node=op.node.name, op=op.node.schema.name, sample=i, source=source) from exc
    except Exception as exc:
        raise SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on the batch starting at sample "
                          f"{first_sample}: {exc}", node=op.node.name, op=op.node.schema.name) from exc
    for i, result in zip(active, results, strict=True):
        for index, value in enumerate(result if op.num_outputs > 1 else (result,)):
            values[(op.node.name, index)][i] = value
            collector = collectors.get((op.node.name, index))
            if collector is not None:
                collector.put(i, value)
