"""The executor's GPU stage: every op with device 'gpu' or 'mixed' (and whatever reads their outputs, `.cpu()` copies
and the CPU ops after them included) runs here, batch-wise, on the pipeline's own CUDA stream.

While the GPU stage of batch i runs in the caller's thread, the CPU stage of batch i+1 (readers, CPU ops, and the
host half of the mixed decoders: header parsing and crop windows) runs on a second thread, so the two overlap.
A resize whose only reader is a crop_mirror_normalize is fused into it: one pass, no resized image in memory."""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from headrace.batch import TensorListGPU
from headrace.errors import DeviceError, SampleError, SchemaError
from headrace.graph import OpNode

_PREPARED = "__prepared__"
_PLANNED = "__planned__"


def gpu_stage_nodes(nodes: list[OpNode]) -> set[str]:
    """Names of the nodes that run in the GPU stage: non-CPU ops, and every op downstream of GPU data."""
    stage: set[str] = set()
    gpu_sources: set[str] = set()
    for node in nodes:
        if node.schema.batch_op:
            if node.device != "cpu":
                gpu_sources.add(node.name)
            continue
        upstream = {d.op.name for d in node.upstream}
        if node.device != "cpu" or upstream & (stage | gpu_sources):
            stage.add(node.name)
    return stage


def check_device(device_id: int | None, nodes: list[OpNode]) -> None:
    """A DeviceError naming the first GPU node when no GPU can run it (raised at build time)."""
    from headrace_kernels.gpu.runtime import gpu_unavailable_reason

    reason = gpu_unavailable_reason(device_id)
    if reason is not None:
        node = next((n for n in nodes if n.device != "cpu"), nodes[0])
        raise DeviceError(f"{node.schema.name} (node '{node.name}') runs on device '{node.device}', but {reason}. "
                          "Use device='cpu' for this pipeline on this machine.")


class _BatchInfo:
    """What a GPU step knows of the batch: its number, size, sample sources and per-sample random streams."""

    def __init__(self, iteration: int, first_sample: int, size: int, sources: list[str]):
        self.iteration, self.first_sample, self.size, self.sources = iteration, first_sample, size, sources

    def rngs(self, seed: int):
        from headrace_kernels.rng import sample_rng

        first = self.first_sample
        return lambda i: sample_rng(seed, first + i)


def _samples(value, raw: bool = False) -> list:
    """The samples of a batch; `raw` keeps decoded images as DeviceImage records (the image kernels read those
    directly), otherwise every sample is a CuPy array."""
    if isinstance(value, TensorListGPU):
        if raw and value._samples is not None:
            return list(value._samples)
        return [value.at(i) for i in range(len(value))]
    return list(value)


def _upload(value) -> TensorListGPU | None:
    """A CPU batch (list of arrays) on the GPU, in one transfer when the samples share a shape."""
    import cupy as cp

    arrays = [np.asarray(v) for v in value]
    if arrays and all(a.shape == arrays[0].shape and a.dtype == arrays[0].dtype for a in arrays):
        return TensorListGPU(cp.asarray(np.stack(arrays)))
    return TensorListGPU([cp.asarray(a) for a in arrays])


class _Step:
    """One GPU op of the graph, with its static arguments and where its per-sample argument inputs come from."""

    prepares = False  # has a host half (`prepare`) that the CPU stage runs, ahead
    plans = False  # can plan its launch (`plan`) on the prepared records of a decoder, ahead

    def __init__(self, stage: GpuStage, node: OpNode):
        from headrace.executor import node_seed

        self.stage, self.node = stage, node
        self.args = node.resolved_args()
        self.seed = node_seed(stage.executor.seed, node)
        self.arg_inputs = [(name, (d.op.name, d.index)) for name, d in node.arg_inputs.items()]
        self.inputs = [(i.op.name, i.index) for i in node.inputs]

    def sample_args(self, values: dict, size: int, node: OpNode | None = None, args: dict | None = None,
                    arg_inputs: list | None = None) -> list[dict]:
        node = node or self.node
        args = self.args if args is None else args
        arg_inputs = self.arg_inputs if arg_inputs is None else arg_inputs
        if not arg_inputs:
            return [args] * size
        from headrace.executor import _arg_values

        specs = node.schema.all_args
        out = [dict(args) for _ in range(size)]
        for name, ref in arg_inputs:
            for sample, value in zip(out, _arg_values(values[ref], specs[name], size), strict=True):
                sample[name] = value
        return out

    def input_value(self, values: dict, k: int = 0):
        value = values[self.inputs[k]]
        if not isinstance(value, TensorListGPU) and self.node.schema.name != "copy":
            value = _upload(value)
        return value

    def prepare(self, values: dict, info: _BatchInfo) -> Any:
        return None

    def run(self, values: dict, info: _BatchInfo) -> Any:
        raise NotImplementedError

    def outputs(self, result) -> TensorListGPU:
        dense, listed = result if isinstance(result, tuple) else (None, result)
        return TensorListGPU(dense if dense is not None else listed, stream=self.stage.ctx.stream,
                             device_id=self.stage.ctx.device_id)


class _Decode(_Step):
    prepares = True

    def __init__(self, stage: GpuStage, node: OpNode):
        super().__init__(stage, node)
        from headrace_kernels.gpu.decode import MixedDecoder

        self.decoder = MixedDecoder(self.args, stage.ctx.device_id, stage.executor.num_threads,
                                    random_crop=node.schema.name == "decoders.image_random_crop",
                                    capacity=stage.executor.batch_size)

    def prepare(self, values: dict, info: _BatchInfo):
        encoded = values[self.inputs[0]]
        if isinstance(encoded, TensorListGPU):
            encoded = encoded.as_cpu()
        prepared = self.decoder.prepare(list(encoded), self.seed, info.first_sample)
        with self.stage.ctx.active():  # the outputs' memory and records now: the next steps can plan on them
            self.decoder.allocate(prepared, self.stage.ctx.stream)
        return prepared

    def run(self, values: dict, info: _BatchInfo):
        prepared = values.get((_PREPARED, self.node.name))
        if prepared is None:  # its input came out of the GPU stage itself (e.g. after a .cpu())
            prepared = self.prepare(values, info)
        # without a look-ahead (fed inputs), the steps after it plan their launches while it decodes
        meanwhile = None if self.stage.lookahead else lambda: self.stage.plan_ahead(values, info)
        return self.outputs(self.decoder.run(prepared, self.stage.ctx.stream, meanwhile))


class _Image(_Step):
    """resize, crop, flip, crop_mirror_normalize and random_resized_crop through kernels/image.cu."""

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import image_ops

        images = _samples(self.input_value(values), raw=True)
        args = self.sample_args(values, len(images))
        name = self.node.schema.name
        if name == "resize":
            return self.outputs(image_ops.resize(images, args))
        if name == "crop":
            return self.outputs(image_ops.crop(images, args))
        if name == "flip":
            return self.outputs(image_ops.flip(images, args))
        if name == "random_resized_crop":
            return self.outputs(image_ops.random_resized_crop(images, args, info.rngs(self.seed)))
        per_sample = any(n in ("mean", "std") for n, _ in self.arg_inputs)
        return self.outputs(image_ops.crop_mirror_normalize(images, args, per_sample))


class _FusedResizeNormalize(_Step):
    """resize feeding crop_mirror_normalize: one pass from the source image to the normalized output. Fed by a
    decoder, it plans its records and tap tables in the CPU stage (on the decoder's output records), so that after
    the decode only the launch is left."""

    plans = True

    def __init__(self, stage: GpuStage, resize: OpNode, cmn: OpNode):
        super().__init__(stage, cmn)
        self.resize = resize
        self.resize_args = resize.resolved_args()
        self.resize_arg_inputs = [(name, (d.op.name, d.index)) for name, d in resize.arg_inputs.items()]
        self.inputs = [(i.op.name, i.index) for i in resize.inputs]
        self.cache = None  # plans by image shape, where every sample has the same arguments
        if not self.arg_inputs and not self.resize_arg_inputs and os.environ.get("HEADRACE_GPU_PLAN_CACHE") != "0":
            from headrace_kernels.gpu.plan_cache import FusedPlanCache

            self.cache = FusedPlanCache(self.args, self.resize_args)

    def _plan(self, values: dict, images: list, packed: tuple | None = None):
        from headrace_kernels.gpu import image_ops

        args = self.sample_args(values, len(images))
        resize_args = self.sample_args(values, len(images), self.resize, self.resize_args, self.resize_arg_inputs)
        per_sample = any(n in ("mean", "std") for n, _ in self.arg_inputs)
        return image_ops.plan_crop_mirror_normalize(images, args, per_sample, resize_args, packed)

    def plan(self, values: dict, info: _BatchInfo):
        """The launch plan on the records of the decoder feeding this step (tap tables already on the device), or None
        where there is none yet."""
        prepared = values.get((_PREPARED, self.inputs[0][0]))
        images = getattr(prepared, "images", None)
        refs = [ref for _, ref in self.arg_inputs + self.resize_arg_inputs]
        if images is None or self.inputs[0][1] != 0 or not all(ref in values for ref in refs):
            return None
        from headrace_kernels.gpu import image_ops

        plan = None if self.cache is None else self.cache.plan(images, prepared.addresses, prepared.shapes)
        if plan is None:
            plan = self._plan(values, images, (prepared.addresses, prepared.shapes))
        image_ops.place(*plan)  # outputs, records and tables too: after the decode only the launch is left
        return plan

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import image_ops

        images = _samples(self.input_value(values), raw=True)
        plan = values.pop((_PLANNED, self.node.name), None)
        if plan is None or not image_ops.adopt_inputs(plan, images):
            plan = self._plan(values, images)
        return self.outputs(image_ops.launch_plan(plan))


class _Math(_Step):
    """cast, math.binary, math.unary."""

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import math_ops

        name = self.node.schema.name
        first = self.input_value(values, 0)
        if name == "cast":
            if first._dense is not None:
                return self.outputs((math_ops.cast(first._dense, True, self.args["dtype"]), None))
            return self.outputs(math_ops.cast(_samples(first), False, self.args["dtype"]))
        if name == "math.unary":
            if first._dense is not None:
                return self.outputs((math_ops.unary(first._dense, self.args), None))
            return self.outputs([math_ops.unary(s, self.args) for s in _samples(first)])
        second = self.input_value(values, 1) if len(self.inputs) > 1 else None
        if first._dense is not None and (second is None or (second._dense is not None and
                                                            second._dense.shape == first._dense.shape)):
            return self.outputs((math_ops.binary(first._dense, None if second is None else second._dense,
                                                 self.args), None))
        left = _samples(first)
        right = _samples(second) if second is not None else [None] * len(left)
        return self.outputs([math_ops.binary(a, b, self.args) for a, b in zip(left, right, strict=True)])


class _Constant(_Step):
    def __init__(self, stage: GpuStage, node: OpNode):
        super().__init__(stage, node)
        self._cache: dict[int, Any] = {}

    def run(self, values: dict, info: _BatchInfo):
        import cupy as cp

        from headrace_kernels.registry import get_cpu_kernel

        dense = self._cache.get(info.size)
        if dense is None:
            value = np.asarray(get_cpu_kernel("constant")([], self.args, None))
            dense = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(value), (info.size, *value.shape)))
            self._cache = {info.size: dense}
        return self.outputs((dense.copy(), None))


class _Copy(_Step):
    """`.gpu()` uploads, `.cpu()` downloads (after the stream has computed the data), GPU to GPU copies."""

    def run(self, values: dict, info: _BatchInfo):
        value = values[self.inputs[0]]
        if self.node.device == "cpu":
            if isinstance(value, TensorListGPU):
                return list(value.as_cpu())
            return [np.asarray(v) for v in value]
        if isinstance(value, TensorListGPU):
            if value._dense is not None:
                return self.outputs((value._dense.copy(), None))
            return self.outputs([s.copy() for s in _samples(value)])
        uploaded = _upload(value)
        return self.outputs((uploaded._dense, None) if uploaded._dense is not None else uploaded._samples)


_STEPS = {"decoders.image": _Decode, "decoders.image_random_crop": _Decode, "resize": _Image, "crop": _Image,
          "flip": _Image, "crop_mirror_normalize": _Image, "random_resized_crop": _Image, "cast": _Math,
          "math.binary": _Math, "math.unary": _Math, "constant": _Constant, "copy": _Copy}


class _SwitchInterval:
    """HEADRACE_SWITCH_INTERVAL (seconds): the interpreter's GIL switch interval while a GPU stage exists,
    restored after the last one; unset or 0 leaves the interpreter's own (5 ms).

    Two threads run Python in a GPU pipeline (the GPU stage and the look-ahead CPU stage), each between GIL-free
    stretches (the decode, numba loops, reads); a thread coming back from one waits for the other's interval to
    run out. That mattered while the decode and the reads handed the GIL over per image (a 100 us interval then
    took an H100 from 13.9k to 19.0k img/s); with those hand-offs gone, 12 alternating rounds on an H200 gave
    21.7k img/s at 100 us and 22.4k at 5 ms (benchmarks/gpu_train.py --ab-rounds), so the default is left."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: float | None = None

    def hold(self) -> None:
        interval = float(os.environ.get("HEADRACE_SWITCH_INTERVAL", "0"))
        with self._lock:
            self._holders += 1
            if self._holders == 1 and 0 < interval < sys.getswitchinterval():
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(interval)

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._saved is not None:
                sys.setswitchinterval(self._saved)
                self._saved = None


_switch_interval = _SwitchInterval()


class GpuStage:
    """The GPU half of an executor: its steps, its device context, and the look-ahead that overlaps the CPU stage
    of the next batch with this one's GPU work."""

    def __init__(self, executor, nodes: list[OpNode], stage: set[str], outputs: list, device_id: int | None):
        from headrace_kernels.gpu.runtime import GpuContext

        check_device(device_id, nodes)
        _switch_interval.hold()
        self._holds_interval = True
        self.executor = executor
        limit = int(os.environ.get("HEADRACE_GPU_POOL_LIMIT", "0") or 0)
        self.ctx = GpuContext(device_id, limit_bytes=limit)
        self.gpu_sources = [n for n in nodes if n.schema.batch_op and n.device != "cpu"]
        self.steps: list[tuple[str, Any]] = []
        fused = self._fusions([n for n in nodes if n.name in stage], outputs)
        from headrace.executor import _SampleOp, node_seed
        from headrace_kernels.registry import get_cpu_kernel

        for node in nodes:
            if node.name not in stage or node.name in fused:
                continue
            if node.device == "cpu" and node.schema.name != "copy":
                kernel = get_cpu_kernel(node.schema.name)
                if kernel is None:
                    raise SchemaError(f"{node.schema.name} (node '{node.name}') has no CPU implementation")
                self.steps.append(("samples", _SampleOp(node, kernel, node_seed(executor.seed, node))))
                continue
            step_cls = _STEPS.get(node.schema.name)
            if step_cls is None:
                raise DeviceError(f"{node.schema.name} (node '{node.name}') has no GPU implementation")
            resize = fused.get(("into", node.name))
            step = _FusedResizeNormalize(self, resize, node) if resize is not None else step_cls(self, node)
            self.steps.append(("gpu", step))
        self.fused = [name for name in fused if isinstance(name, str)]
        self.wanted = {(o.op.name, o.index) for o in outputs}
        mode = os.environ.get("HEADRACE_GPU_LOOKAHEAD", "1")
        self.lookahead = not any(n.schema.name == "external_source" and n.arg("source") is None for n in nodes) \
            and mode != "0"
        # When the next batch's CPU stage starts: by default before this batch's GPU steps, so it overlaps the
        # decode. nvImageCodec's decode takes the GIL once per image from its worker threads and every take waits
        # while another thread runs Python (benchmarks/gpu_stage_profile.py: 8 ms alone, over 1 s beside a busy
        # thread), so this pays only while the CPU stage is mostly GIL-free: with the reader, draws and windows
        # batched (numba, system calls) it is, and beats starting after the decode (HEADRACE_GPU_LOOKAHEAD=after,
        # 14.7k vs 13.1k img/s on an H200) and no look-ahead (=0, 11.1k).
        decoders = [step for kind, step in self.steps if kind == "gpu" and step.prepares]
        self.lookahead_at = decoders[-1] if decoders and mode == "after" else None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-cpu-stage")
        self._reader_thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-readers")
        self._reads: dict[int, Future] = {}  # the readers' phase of batches ahead (see _read_ahead)
        self._pending: tuple[int, Future] | None = None
        self._previous = None
        self._lock = threading.Lock()
        self.timings: collections.Counter = collections.Counter()  # seconds spent per part (host side)

    @staticmethod
    def _fusions(nodes: list[OpNode], outputs: list) -> dict:
        """resize nodes to fold into the crop_mirror_normalize that alone reads them."""
        readers: dict[str, list[OpNode]] = {}
        for node in nodes:
            for d in node.upstream:
                readers.setdefault(d.op.name, []).append(node)
        output_ops = {o.op.name for o in outputs}
        fused: dict = {}
        for node in nodes:
            if node.schema.name != "resize" or node.device != "gpu" or node.name in output_ops:
                continue
            users = readers.get(node.name, [])
            if len(users) == 1 and users[0].schema.name == "crop_mirror_normalize" and users[0].device == "gpu" \
                    and users[0].inputs[0].op is node and node not in [d.op for d in users[0].arg_inputs.values()]:
                fused[node.name] = True
                fused[("into", users[0].name)] = node
        return fused

    # The CPU stage, in two phases on two threads, ahead of the GPU steps: the readers and CPU ops of batch i+2
    # (file reads without the GIL) run beside the host half of the decoders of batch i+1 and the decode of batch i.
    def _readers(self, iteration: int):
        start = time.perf_counter()
        result = self.executor.run_cpu_stage(iteration)
        self.timings["cpu stage"] += time.perf_counter() - start
        return result

    def _read_ahead(self, iteration: int) -> Future:
        """The readers' phase of batch `iteration`, on the readers' thread (one batch at a time, in order)."""
        future = self._reads.get(iteration)
        if future is None:
            future = self._reads[iteration] = self._reader_thread.submit(self._readers, iteration)
        return future

    def _cpu_stage(self, iteration: int):
        start = time.perf_counter()
        if not self.lookahead and iteration not in self._reads:
            # fed inputs: nothing is read ahead, and a hand-off to the readers' thread would only add latency
            values, sources, collectors, size = self._readers(iteration)
        else:
            future = self._read_ahead(iteration)
            try:
                values, sources, collectors, size = future.result()
            finally:
                self._reads.pop(iteration, None)
        info = _BatchInfo(iteration, iteration * self.executor.batch_size, size, sources)
        for kind, step in self.steps:
            if kind == "gpu" and step.prepares and step.node.guard is None \
                    and all(ref in values for ref in step.inputs):  # inside a branch: prepared on its sub-batch
                try:
                    values[(_PREPARED, step.node.name)] = step.prepare(values, info)
                except Exception as exc:
                    raise self._error(step.node, exc, info) from exc
        if self.lookahead:  # on the look-ahead's thread; fed batches plan while they decode (_Decode.run)
            with self.ctx.active():
                self.plan_ahead(values, info)
        self.timings["cpu stage + host half of decoders"] += time.perf_counter() - start
        return values, sources, collectors, info

    def plan_ahead(self, values: dict, info: _BatchInfo) -> None:
        """Plan the launches of the steps that can plan on a decoder's prepared records (call with the context
        active): in the look-ahead, or while the batch decodes."""
        for kind, step in self.steps:
            if kind != "gpu" or not step.plans or step.node.guard is not None:
                continue
            if (_PLANNED, step.node.name) in values or (step.node.name, 0) in values:  # planned, or already ran
                continue
            try:
                plan = step.plan(values, info)
            except Exception:  # noqa: BLE001 - planning ahead is an optimization: the step's run plans again
                plan = None  # and reports the error there, with the decoded images at hand
            if plan is not None:
                values[(_PLANNED, step.node.name)] = plan

    def _next_cpu_stage(self, iteration: int):
        pending, self._pending = self._pending, None
        if pending is not None:
            if pending[0] == iteration:
                return pending[1].result()
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - a look-ahead nobody asked for
                pass
        for ahead, future in list(self._reads.items()):
            if ahead != iteration:  # batches read ahead for another sequence of iterations
                try:
                    future.result()
                except BaseException:  # noqa: BLE001 - nobody asked for them
                    pass
                self._reads.pop(ahead, None)
        return self._cpu_stage(iteration)

    def run(self, iteration: int):
        """Batch `iteration`: its CPU stage (computed ahead when possible), then the GPU steps on the stream."""
        with self._lock, self.ctx.active():  # active for a CPU stage run here too (fed inputs: its allocations)
            wait = time.perf_counter()
            values, sources, collectors, info = self._next_cpu_stage(iteration)
            self.timings["gpu stage waiting for cpu stage"] += time.perf_counter() - wait
            if self.lookahead and self.lookahead_at is None:
                self._look_ahead(iteration)
            if self._previous is not None:  # what the last batch's kernels read may be freed now
                self._previous[0].synchronize()
                self._previous = None
            for source in self.gpu_sources:
                for index in range(len(source.outputs)):
                    values[(source.name, index)] = _upload(values[(source.name, index)])
            for kind, step in self.steps:
                if kind == "samples":
                    self._run_cpu_op(step, values, collectors, info)
                    continue
                try:
                    start = time.perf_counter()
                    result = run_step(step, values, info)
                    self.timings[f"gpu step {step.node.schema.name}"] += time.perf_counter() - start
                except SampleError:
                    raise
                except Exception as exc:
                    raise self._error(step.node, exc, info) from exc
                values[(step.node.name, 0)] = result
                if step is self.lookahead_at and self.lookahead:
                    self._look_ahead(iteration)
            self._previous = (self.ctx.stream.record(), values)
            return values, sources, collectors

    def _look_ahead(self, iteration: int) -> None:
        self._read_ahead(iteration + 1)
        self._read_ahead(iteration + 2)
        self._pending = (iteration + 1, self._thread.submit(self._cpu_stage, iteration + 1))

    def _run_cpu_op(self, op, values: dict, collectors: dict, info: _BatchInfo) -> None:
        from headrace.executor import _Collector

        for index in range(op.num_outputs):
            values[(op.node.name, index)] = [None] * info.size
            if (op.node.name, index) in self.wanted:
                collectors[(op.node.name, index)] = _Collector(self.executor.buffers, info.size,
                                                                     self.executor.batch_size)
        self.executor._run_samples([op], values, collectors, info.iteration, info.size, info.sources)

    def _error(self, node: OpNode, exc: Exception, info: _BatchInfo) -> SampleError:
        from headrace_kernels.gpu.image_ops import SampleFailureError

        op = node.schema.name
        if isinstance(exc, SampleFailureError):
            i = exc.index
            source = info.sources[i] if i < len(info.sources) else f"sample {i}"
            return SampleError(f"{op} (node '{node.name}', GPU) failed on sample {i} of batch {info.iteration} "
                               f"[{source}]: {exc}", node=node.name, op=op, sample=i, source=source)
        return SampleError(f"{op} (node '{node.name}', GPU) failed on batch {info.iteration}: "
                           f"{type(exc).__name__}: {exc}", node=node.name, op=op)

    def warm_up(self) -> None:
        """Create the GPU decoders and decode their warm-up batches ahead of the first batch."""
        with self._lock, self.ctx.active():
            for kind, step in self.steps:
                if kind == "gpu" and isinstance(step, _Decode):
                    step.decoder.warm_up(self.ctx.stream)
            self.ctx.stream.synchronize()

    # Memory
    def release_memory(self) -> None:
        """Free every pooled device block nothing refers to, and the decoders' own buffers."""
        pending = self._pending
        if pending is not None:  # the look-ahead allocates too: let it finish (its batch keeps its memory)
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - reported when that batch is asked for
                pass
        with self._lock:
            if self._previous is not None:
                self._previous[0].synchronize()
                self._previous = None
            for kind, step in self.steps:
                if kind == "gpu" and isinstance(step, _Decode):
                    step.decoder.release()
                if kind == "gpu" and getattr(step, "cache", None) is not None:
                    step.cache.clear()
            self.ctx.release()

    def __del__(self) -> None:
        # A stage dropped without close() (a pipeline nobody closed, collected in a reference cycle) must still
        # tear down in order: left to the collector, the stream could go before the images decoded on it.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, or close() already done
            pass

    def close(self) -> None:
        if getattr(self, "_holds_interval", False):
            self._holds_interval = False
            _switch_interval.release()
        if not hasattr(self, "_thread"):
            return  # __init__ failed (no GPU): nothing was made
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - closing
                pass
        self._thread.shutdown(wait=False, cancel_futures=True)
        self._reader_thread.shutdown(wait=True, cancel_futures=True)  # a read in progress finishes first
        self._reads.clear()
        # Tear down in order, not at the garbage collector's whim: nvImageCodec's images and decoders were made on
        # this stream and use it when they go, so they go first, while it still exists.
        with self._lock:
            self.ctx.stream.synchronize()
            self._previous = None
            for kind, step in self.steps:
                if kind == "gpu" and isinstance(step, _Decode):
                    step.decoder.release()
            self.steps = []


# Steps defined in their own modules register into _STEPS when imported (at the end: they subclass _Step).
import headrace.gpu_steps_image  # noqa: E402
import headrace.gpu_steps_tensor  # noqa: E402, F401
from headrace.gpu_conditionals import run_step  # noqa: E402
