"""Per-sample CPU ops of one batch on the thread pool: every op of a step runs on a sample before the next sample,
and the results go into the batch's values (and collectors, for pipeline outputs)."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

from headrace.engine.context import SampleContext, SampleOp, arg_value
from headrace.engine.frames import frame_values
from headrace.engine.whole_batch import run_whole_batch
from headrace.errors import SampleError
from headrace_kernels.columns import BatchColumns
from headrace_kernels.registry import SampleFailureError


def run_samples(ops: list[SampleOp], values, collectors, iteration: int, first_sample: int, size: int,
                sources: list[str], pool: ThreadPoolExecutor, num_threads: int,
                indices: list[int] | None = None) -> dict[int, SampleError]:
    """Run `ops` (one step) on samples 0..size-1 of batch `iteration`, or on `indices` only (the slots given
    replacement samples). Returns the failures of the ops with on_error="skip", by slot (other ops raise)."""
    if ops[0].node.schema.whole_batch:
        run_whole_batch(ops[0], values, collectors, first_sample, size, sources)
        return {}
    if any(op.batch_draw is not None for op in ops):
        if indices is None:  # a redone slot keeps its draws: they depend on its place in the batch only
            for op in ops:  # they take no inputs: drawn first, ahead of the ops of this step that may read them
                if op.batch_draw is not None:
                    _run_batch_draw(op, values, collectors, iteration, first_sample, size)
        ops = [op for op in ops if op.batch_draw is None]
        if not ops:
            return {}
    if indices is None and any(op.batch_kernel is not None for op in ops):
        # whole-batch twins of ops whose inputs come from earlier steps run first, in one call each
        produced = {(op.node.name, k) for op in ops for k in range(op.num_outputs)}
        ops = [op for op in ops if op.batch_kernel is None or any(ref in produced for ref in op.inputs)
               or not _run_batch_kernel(op, values, collectors, iteration, first_sample, size, sources)]
        if not ops:
            return {}
    failures: dict[int, SampleError] = {}
    # each op's collector per output, looked up once; a kernel writes its first output in place through its own
    gathers = [(op, [collectors.get((op.node.name, k)) for k in range(op.num_outputs)]) for op in ops]

    def work(indices) -> None:
        for i in indices:
            for op, collected in gathers:
                if op.guard is not None and values[op.guard][i] is None:
                    continue  # inside a conditional branch this sample does not take
                inputs = [values[ref][i] for ref in op.inputs]
                args = op.static_args
                try:
                    if op.arg_inputs:
                        args = dict(args)
                        for arg, ref in op.arg_inputs:
                            sample = values[ref][i]
                            args[arg.name] = frame_values(sample, arg) if arg.name in op.frame_args \
                                else arg_value(sample, arg)
                    source = sources[i] if i < len(sources) else ""
                    result = op.kernel(inputs, args, SampleContext(op.seed, first_sample + i, source, op.input_layouts,
                                                                   collected[0], i))
                except Exception as exc:
                    if not op.skips:  # no local name: a frame holding the exception raised through it is a cycle
                        raise _sample_error(op, exc, i, iteration, sources) from exc
                    failures[i] = _sample_error(op, exc, i, iteration, sources)  # the sample's remaining ops do
                    break  # not run: it is replaced
                results = result if op.num_outputs > 1 else (result,)
                for index, value in enumerate(results):
                    values[(op.node.name, index)][i] = value
                    if collected[index] is not None and value is not None:
                        collected[index].put(i, value)

    count = size if indices is None else len(indices)
    if num_threads == 1 or count == 1:
        work(range(size) if indices is None else indices)
        return failures
    # Each worker takes the next sample as it becomes free (a C iterator over itertools.count or a list: atomic
    # under the GIL), so no thread idles at the end of a batch while another finishes a chunk; results do not
    # depend on which thread takes which sample.
    samples = iter(itertools.count().__next__, size) if indices is None else iter(indices)
    futures = [pool.submit(work, samples) for _ in range(min(num_threads, count))]
    try:
        for future in futures:
            future.result()
    finally:  # a failed future left in a local would hold its exception, whose traceback holds this frame: a cycle
        futures = future = None
    return failures


def _sample_error(op: SampleOp, exc: Exception, i: int, iteration: int, sources: list[str]) -> SampleError:
    source = sources[i] if i < len(sources) else f"sample {i}"
    return SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on sample {i} of batch {iteration} "
                       f"[{source}]: {exc}", node=op.node.name, op=op.node.schema.name, sample=i, source=source)


def _run_batch_kernel(op: SampleOp, values, collectors, iteration: int, first_sample: int, size: int,
                      sources: list[str]) -> bool:
    """The batch through the op's whole-batch twin; False (nothing written) where the twin leaves the batch to
    the per-sample kernel."""
    try:
        results = op.batch_kernel([values[ref] for ref in op.inputs], op.static_args, op.seed, first_sample, size)
    except SampleFailureError as exc:
        raise _sample_error(op, exc, exc.index, iteration, sources) from exc
    except Exception as exc:
        raise _batch_error(op, exc, iteration) from exc
    if results is None:
        return False
    _store(op, results, values, collectors)
    return True


def _batch_error(op: SampleOp, exc: Exception, iteration: int) -> SampleError:
    return SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on batch {iteration}: {exc}",
                       node=op.node.name, op=op.node.schema.name)


def _store(op: SampleOp, results, values, collectors) -> None:
    """A whole-batch call's results into the batch's values (and the collectors of the outputs the pipeline
    returns): one column per output (a twin's BatchColumns), or a draw's single column."""
    for k, column in enumerate(results if isinstance(results, BatchColumns) else (results,)):
        key = (op.node.name, k)
        values[key] = column  # a Column keeps the array its samples are views of
        collector = collectors.get(key)
        if collector is not None:
            for i, sample in enumerate(column):
                collector.put(i, sample)


def _run_batch_draw(op: SampleOp, values, collectors, iteration: int, first_sample: int, size: int) -> None:
    try:
        results = op.batch_draw(op.static_args, op.seed, first_sample, size)
    except Exception as exc:
        raise _batch_error(op, exc, iteration) from exc
    _store(op, results, values, collectors)
