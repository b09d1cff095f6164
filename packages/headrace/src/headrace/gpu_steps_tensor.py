"""GPU steps of the reductions and of stack, cat, reshape, transpose, pad and one_hot (kernels in
headrace_kernels.gpu.tensor_ops). Imported by gpu_stage, into whose step table they register."""

from __future__ import annotations

from headrace.gpu_stage import _STEPS, _BatchInfo, _samples, _Step


def _dense(value):
    return value._dense if value._dense is not None else None


def _each(items, func) -> list:
    """func(*item) for every sample; a ValueError names the sample (SampleFailureError)."""
    from headrace_kernels.gpu.image_ops import SampleFailureError

    out = []
    for index, item in enumerate(items):
        try:
            out.append(func(*item))
        except ValueError as exc:
            raise SampleFailureError(index, str(exc)) from None
    return out


class _Reduce(_Step):
    """reductions.*: one segmented reduction over the batch (variance / std_dev also read the mean)."""

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        samples = _samples(self.input_value(values, 0))
        means = _samples(self.input_value(values, 1)) if len(self.inputs) > 1 else None
        return self.outputs(tensor_ops.reduce(self.node.schema.name, samples, self.args, means))


class _Join(_Step):
    """stack and cat: one launch when every input is a dense batch, else per sample."""

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        batches = [self.input_value(values, k) for k in range(len(self.inputs))]
        stack = self.node.schema.name == "stack"
        axis = self.args["axis"]
        dense = [_dense(b) for b in batches]
        if all(d is not None for d in dense) and len({tuple(d.shape) for d in dense}) == 1:
            join = tensor_ops.stack_dense if stack else tensor_ops.cat_dense
            return self.outputs((join(dense, axis), None))
        join = tensor_ops.stack if stack else tensor_ops.cat
        columns = [_samples(b) for b in batches]
        return self.outputs(_each(zip(*columns, strict=True), lambda *parts: join(list(parts), axis)))


class _Reshape(_Step):
    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        first = self.input_value(values, 0)
        dense = _dense(first)
        if dense is not None and not self.arg_inputs:
            shape = tensor_ops.reshape_shape(tuple(dense.shape[1:]), self.args)
            return self.outputs((dense.reshape(len(dense), *shape), None))
        samples = _samples(first)
        args = self.sample_args(values, len(samples))
        return self.outputs(_each(zip(samples, args, strict=True),
                                  lambda s, a: s.reshape(tensor_ops.reshape_shape(tuple(s.shape), a))))


class _Transpose(_Step):
    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        first = self.input_value(values, 0)
        perm = self.args["perm"]
        dense = _dense(first)
        if dense is not None:
            return self.outputs((tensor_ops.transpose(dense, perm, True), None))
        return self.outputs(_each(((s,) for s in _samples(first)), lambda s: tensor_ops.transpose(s, perm, False)))


class _OneHot(_Step):
    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        first = self.input_value(values, 0)
        dense = _dense(first)
        if dense is not None:
            return self.outputs((tensor_ops.one_hot(dense, self.args, True), None))
        return self.outputs(_each(((s,) for s in _samples(first)),
                                  lambda s: tensor_ops.one_hot(s, self.args, False)))


class _Pad(_Step):
    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import tensor_ops

        samples = _samples(self.input_value(values, 0))
        return self.outputs(tensor_ops.pad(samples, self.sample_args(values, len(samples))))


TENSOR_STEPS = {"stack": _Join, "cat": _Join, "reshape": _Reshape, "transpose": _Transpose, "one_hot": _OneHot,
                "pad": _Pad, **{f"reductions.{name}": _Reduce for name in (
                    "sum", "mean", "mean_square", "rms", "min", "max", "std_dev", "variance")}}
_STEPS.update(TENSOR_STEPS)
