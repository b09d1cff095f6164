"""The graph a pipeline function builds: op nodes, the DataNodes between them, and DataNode arithmetic."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from headrace import enums, layouts
from headrace.errors import SchemaError
from headrace.schema import OpSchema, OutputSpec, get_schema


@dataclasses.dataclass(eq=False)
class OpNode:
    """One op in the graph: its schema, device, literal arguments and the DataNodes it reads."""

    name: str
    schema: OpSchema
    device: str
    args: dict[str, Any]
    inputs: list[DataNode]
    arg_inputs: dict[str, DataNode]
    outputs: list[DataNode] = dataclasses.field(default_factory=list)
    guard: DataNode | None = None
    """Inside a conditional branch: the branch token; the node runs only for samples where it has a value."""
    _output_specs: list[OutputSpec] | None = dataclasses.field(default=None, init=False, repr=False)

    @property
    def output_specs(self) -> list[OutputSpec]:
        """What each output carries (dtype, layout, dims), from the schema's output spec and the inputs' specs;
        computed on first use (add_op asks at once; a node loaded from a file when something reads it)."""
        if self._output_specs is None:
            self._output_specs = self.schema.output_specs(self.args, self.arg_inputs, [d.spec for d in self.inputs])
        return self._output_specs

    def arg(self, name: str) -> Any:
        return self.schema.arg(self.args, name)

    def resolved_args(self) -> dict:
        """Every argument's value, given or default."""
        return self.schema.resolve(self.args)

    @property
    def upstream(self) -> list[DataNode]:
        guard = [self.guard] if self.guard is not None else []
        return [*self.inputs, *self.arg_inputs.values(), *guard]


class _Arithmetic:
    """The binary operators of the constants made outside a pipeline (a DataNode operand makes the node), for a
    class with a `_with(other, op, reflected)`."""

    def _with(self, other: Any, op: str, reflected: bool = False) -> Any:
        raise NotImplementedError

    def __add__(self, o): return self._with(o, "add")
    def __radd__(self, o): return self._with(o, "add", True)
    def __sub__(self, o): return self._with(o, "sub")
    def __rsub__(self, o): return self._with(o, "sub", True)
    def __mul__(self, o): return self._with(o, "mul")
    def __rmul__(self, o): return self._with(o, "mul", True)
    def __truediv__(self, o): return self._with(o, "div")
    def __rtruediv__(self, o): return self._with(o, "div", True)
    def __floordiv__(self, o): return self._with(o, "floordiv")
    def __rfloordiv__(self, o): return self._with(o, "floordiv", True)
    def __mod__(self, o): return self._with(o, "mod")
    def __rmod__(self, o): return self._with(o, "mod", True)
    def __pow__(self, o): return self._with(o, "pow")
    def __rpow__(self, o): return self._with(o, "pow", True)
    def __lshift__(self, o): return self._with(o, "lshift")
    def __rlshift__(self, o): return self._with(o, "lshift", True)
    def __rshift__(self, o): return self._with(o, "rshift")
    def __rrshift__(self, o): return self._with(o, "rshift", True)


class DataNode:
    """The output `index` of an op node; arithmetic on it builds new op nodes, as in DALI."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators

    def __init__(self, op: OpNode, index: int, device: str):
        self.op, self.index, self.device = op, index, device

    @property
    def spec(self) -> OutputSpec:
        """What this output carries per sample: element type, layout, dims (-1 where they vary); None if unknown."""
        return self.op.output_specs[self.index]

    @property
    def layout(self) -> str | None:
        """The layout of this output ("HWC", "CHW", ...), None when it cannot be known while building."""
        return self.spec.layout

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.index}" if len(self.op.outputs) > 1 else self.op.name

    def __repr__(self) -> str:
        return f"DataNode({self.name}, device={self.device})"

    def gpu(self) -> DataNode:
        """This data on the GPU (a copy node, run in the GPU stage)."""
        return add_op("copy", (self,), {"device": "gpu"}) if self.device == "cpu" else self

    def cpu(self) -> DataNode:
        """This data on the host (a copy node)."""
        return add_op("copy", (self,), {"device": "cpu"}) if self.device != "cpu" else self

    def shape(self, *, dtype: Any = None, device: str = "cpu") -> DataNode:
        """The shape of each sample, as DALI's `DataNode.shape()` (fn.shapes)."""
        kwargs = {"dtype": dtype} if dtype is not None else {}
        return add_op("shapes", (self,), {**kwargs, "device": device})

    def property(self, key: str, *, device: str = "cpu") -> DataNode:
        """A property of each sample ('source_info', 'layout'), as DALI's `DataNode.property()` (fn.get_property)."""
        return add_op("get_property", (self,), {"key": key, "device": device})

    def source_info(self, *, device: str = "cpu") -> DataNode:
        """Where each sample came from, as DALI's `DataNode.source_info()`."""
        return self.property("source_info", device=device)

    def __bool__(self) -> bool:
        raise SchemaError(
            f"DataNode {self.name} used as a Python bool: use `&`, `|`, `^` for element-wise logic, "
            "or enable_conditionals=True for `if` on data (it rewrites the pipeline function's own body, not the "
            "functions it calls)"
        )

    def __hash__(self) -> int:
        return id(self)

    def __getitem__(self, index: Any) -> DataNode:
        """NumPy-like indexing of every sample, as DALI's: `x[5:25, 10:-5]`, `x[:, :, 1]`, `x[-1]`, steps, a
        DataNode for a per-sample index or bound, `newaxis` (`headrace.graph.newaxis`), `None` (a full range, as in
        DALI) and `...` (an extension: DALI has none)."""
        return subscript(self, index)

    def __iter__(self):
        raise TypeError(f"DataNode {self.name} is not iterable: it stands for a batch of tensors; index it "
                        "(x[0], x[:, 1]) or split it with an op")

    # Arithmetic: every operator builds a `math.*` node.
    def _binary(self, other: Any, op: str, reflected: bool = False) -> DataNode:
        return _binary_node(other, self, op) if reflected else _binary_node(self, other, op)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "sub")
    def __rsub__(self, o): return self._binary(o, "sub", True)
    def __mul__(self, o): return self._binary(o, "mul")
    def __rmul__(self, o): return self._binary(o, "mul", True)
    def __truediv__(self, o): return self._binary(o, "div")
    def __rtruediv__(self, o): return self._binary(o, "div", True)
    def __floordiv__(self, o): return self._binary(o, "floordiv")
    def __rfloordiv__(self, o): return self._binary(o, "floordiv", True)
    def __mod__(self, o): return self._binary(o, "mod")
    def __rmod__(self, o): return self._binary(o, "mod", True)
    def __pow__(self, o): return self._binary(o, "pow")
    def __rpow__(self, o): return self._binary(o, "pow", True)
    def __and__(self, o): return self._binary(o, "bitand")
    def __rand__(self, o): return self._binary(o, "bitand", True)
    def __or__(self, o): return self._binary(o, "bitor")
    def __ror__(self, o): return self._binary(o, "bitor", True)
    def __xor__(self, o): return self._binary(o, "bitxor")
    def __rxor__(self, o): return self._binary(o, "bitxor", True)
    def __lshift__(self, o): return self._binary(o, "lshift")
    def __rlshift__(self, o): return self._binary(o, "lshift", True)
    def __rshift__(self, o): return self._binary(o, "rshift")
    def __rrshift__(self, o): return self._binary(o, "rshift", True)
    def __eq__(self, o): return self._binary(o, "eq")  # type: ignore[override]
    def __ne__(self, o): return self._binary(o, "ne")  # type: ignore[override]
    def __lt__(self, o): return self._binary(o, "lt")
    def __le__(self, o): return self._binary(o, "le")
    def __gt__(self, o): return self._binary(o, "gt")
    def __ge__(self, o): return self._binary(o, "ge")
    def __neg__(self): return _unary_node(self, "neg")
    def __pos__(self): return _unary_node(self, "pos")
    def __invert__(self): return _unary_node(self, "invert")
    def __abs__(self): return _unary_node(self, "abs")


class ScalarConstant(_Arithmetic):
    """A scalar `types.Constant` made outside a pipeline definition, as DALI's ScalarConstant: a value and its DALI
    type, which becomes a scalar operand, an argument value or a constant node where a pipeline uses it."""

    def __init__(self, value: Any, dtype: enums.DALIDataType | None = None):
        if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalars and 0-d arrays keep their type
            dtype = enums.from_numpy_dtype(value.dtype) if dtype is None else dtype
            value = value.item()
        if not isinstance(value, bool | int | float):
            raise SchemaError(f"types.Constant: a scalar constant must be a bool, int or float, got "
                              f"{type(value).__name__}")
        self.dtype = enums.DALIDataType(dtype) if dtype is not None else _scalar_dtype(value, "Constant")
        numpy_type = enums.to_numpy_dtype(self.dtype)
        self.value = bool(value) if numpy_type == np.bool_ else int(value) if numpy_type.kind in "iu" else float(value)

    @property
    def scalar_value(self) -> bool | int | float:
        """The Python value, what an op argument given this constant receives."""
        return self.value

    def node(self) -> DataNode:
        """The constant as a node of the pipeline being defined."""
        return constant_node(self.value, dtype=self.dtype)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"{self.value}:{self.dtype.name}"

    def _with(self, other: Any, op: str, reflected: bool = False) -> Any:
        if not isinstance(other, DataNode):
            return NotImplemented
        return _binary_node(other, self, op) if reflected else _binary_node(self, other, op)


class DeferredConstant(_Arithmetic):
    """A `types.Constant` tensor made outside a pipeline definition. DALI makes its node there and the pipeline
    that uses it adopts it; here each use inside a pipeline definition makes the constant node (an op input, an
    operand, an output)."""

    def __init__(self, value: Any, dtype: Any = None, shape: Any = None, layout: str | None = None,
                 device: str | None = None):
        self.value, self.dtype, self.shape = np.array(value), dtype, shape
        self.layout, self.device = layout, device or "cpu"

    def node(self) -> DataNode:
        """The constant as a node of the pipeline being defined."""
        value = self.value if self.value.ndim else self.value.item()
        return constant_node(value, self.shape, self.dtype, self.device, self.layout)

    def gpu(self) -> DataNode:
        return self.node().gpu()

    def cpu(self) -> DataNode:
        return self.node().cpu()

    def _with(self, other: Any, op: str, reflected: bool = False) -> Any:
        if not isinstance(other, DataNode):
            return NotImplemented
        return _binary_node(other, self.node(), op) if reflected else _binary_node(self.node(), other, op)



def _binary_node(left: Any, right: Any, op: str) -> DataNode:
    left = left.node() if isinstance(left, DeferredConstant) else left
    right = right.node() if isinstance(right, DeferredConstant) else right
    if isinstance(left, DataNode) and isinstance(right, DataNode):
        return add_op("math.binary", (left, right), {"op": op, "device": _common_device(left, right)})
    node, scalar, on_left = (right, left, True) if isinstance(right, DataNode) else (left, right, False)
    dtype = scalar.dtype if isinstance(scalar, ScalarConstant) else _scalar_dtype(scalar, op)
    return add_op("math.binary", (node,), {"op": op, "scalar": float(scalar), "scalar_dtype": dtype,
                                           "scalar_on_left": on_left, "device": node.device})


def _scalar_dtype(scalar: Any, op: str) -> enums.DALIDataType:
    """DALI's type of a constant operand: Python int INT32 (INT64 beyond its range), Python float FLOAT, a numpy
    scalar its own type."""
    if isinstance(scalar, bool | np.bool_):
        return enums.DALIDataType.BOOL
    if isinstance(scalar, np.generic) or (hasattr(scalar, "dtype") and getattr(scalar, "ndim", 1) == 0):
        return enums.from_numpy_dtype(scalar.dtype)
    if isinstance(scalar, int):
        return enums.DALIDataType.INT32 if -2**31 <= scalar < 2**31 else enums.DALIDataType.INT64
    if isinstance(scalar, float):
        return enums.DALIDataType.FLOAT
    raise SchemaError(f"operator '{op}' between a DataNode and {type(scalar).__name__} is not supported; "
                      "use a number or types.Constant")


def _unary_node(node: DataNode, op: str) -> DataNode:
    return add_op("math.unary", (node,), {"op": op, "device": node.device})


def _operand_node(value: Any, what: str) -> DataNode:
    """An operand of a `headrace.math` function as a node: a DataNode as it is, a types.Constant as its node."""
    if isinstance(value, ScalarConstant | DeferredConstant):
        return value.node()
    if isinstance(value, DataNode):
        return value
    raise SchemaError(f"math.{what}: needs a DataNode (or a types.Constant) operand, got {type(value).__name__}; "
                      "a function of numbers alone is plain Python")


def unary_function(value: Any, op: str) -> DataNode:
    """The node of a unary `headrace.math` function (math.unary `op`) of a DataNode or types.Constant."""
    return _unary_node(_operand_node(value, op), op)


def binary_function(left: Any, right: Any, op: str) -> DataNode:
    """The node of a binary `headrace.math` function (math.binary `op`); one operand may be a number."""
    if not any(isinstance(v, DataNode | DeferredConstant) for v in (left, right)):
        if isinstance(left, ScalarConstant):
            left = left.node()
        elif isinstance(right, ScalarConstant):
            right = right.node()
        else:
            raise SchemaError(f"math.{op}: needs a DataNode (or a types.Constant) operand, got "
                              f"{type(left).__name__} and {type(right).__name__}")
    return _binary_node(left, right, op)


def clamp_function(value: Any, lo: Any, hi: Any) -> DataNode:
    """The math.clamp node of `headrace.math.clamp`: numbers become constant nodes of DALI's operand types."""
    operands = [value, lo, hi]
    if not any(isinstance(v, DataNode | ScalarConstant | DeferredConstant) for v in operands):
        raise SchemaError("math.clamp: needs a DataNode (or a types.Constant) operand, got "
                          f"{', '.join(type(v).__name__ for v in operands)}")
    nodes = [v.node() if isinstance(v, ScalarConstant | DeferredConstant) else v if isinstance(v, DataNode)
             else constant_node(v, dtype=_scalar_dtype(v, "clamp")) for v in operands]
    return add_op("math.clamp", tuple(nodes), {"device": _common_device(*nodes)})


class NewAxis:
    """DALI's `newaxis`: in a DataNode subscript it inserts an axis of extent 1; `newaxis("C")` names it in the
    layout (then every new axis of the subscript must be named)."""

    def __init__(self, name: str | None = None):
        if name is not None and (not isinstance(name, str) or len(name) != 1):
            raise SchemaError(f"newaxis: the axis name must be one character, got {name!r}")
        self.name = name

    def __call__(self, name: str | None = None) -> NewAxis:
        return NewAxis(name)

    def __repr__(self) -> str:
        return "newaxis" if self.name is None else f"newaxis({self.name!r})"


newaxis = NewAxis()

MAX_SUBSCRIPTS = 32
"""The most subscripts (indices and ranges) one indexing expression may have, as in DALI."""


def _index_value(value: Any, node: DataNode, what: str) -> Any:
    """An index or range bound: a DataNode (per-sample scalar) or an integer; anything else is refused."""
    if isinstance(value, DataNode | ScalarConstant | DeferredConstant):
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d numpy array: its scalar
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise SchemaError(f"indexing DataNode {node.name}: {what} must be an integer or a DataNode, got "
                          f"{type(value).__name__} {value!r}")
    return int(value)


def subscript(node: DataNode, index: Any) -> DataNode:
    """`node[index]`: a `_tensor_subscript` node (indices and ranges; a bare dimension check when all are full
    ranges), then `expand_dims` for the `newaxis` entries."""
    items = index if isinstance(index, tuple) else (index,)
    args: dict[str, Any] = {}
    new_axes: list[int] = []
    names: list[str] = []
    count = out_dim = 0
    ellipsis = -1
    for item in items:
        if isinstance(item, NewAxis):
            if ellipsis >= 0:
                raise SchemaError(f"indexing DataNode {node.name}: newaxis after `...` is not supported")
            new_axes.append(out_dim)
            names += [item.name] if item.name else []
            out_dim += 1
            continue
        if item is Ellipsis:
            if ellipsis >= 0:
                raise SchemaError(f"indexing DataNode {node.name}: an index can have only one `...`")
            ellipsis = count
            continue
        if isinstance(item, slice):
            for key, value in (("lo", item.start), ("hi", item.stop), ("step", item.step)):
                if value is not None:
                    args[f"{key}_{count}"] = _index_value(value, node, f"a range's {key}")
            out_dim += 1
        elif item is not None:  # None is a full range in DALI (not numpy's new axis)
            args[f"at_{count}"] = _index_value(item, node, "an index")
        else:
            out_dim += 1
        count += 1
    if count > MAX_SUBSCRIPTS:
        raise SchemaError(f"indexing DataNode {node.name}: {count} subscripts; at most {MAX_SUBSCRIPTS}")
    if names and len(names) != len(new_axes):
        raise SchemaError(f"indexing DataNode {node.name}: name every newaxis of the subscript or none")
    result = node
    if count or ellipsis >= 0:
        extra = {"ellipsis_at": ellipsis} if ellipsis >= 0 else {}
        result = add_op("_tensor_subscript", (node,), {**args, **extra, "num_subscripts": count,
                                                       "device": node.device})
    if new_axes:
        result = add_op("expand_dims", (result,), {"axes": new_axes, "new_axis_names": "".join(names),
                                                   "device": result.device})
    return result


def _common_device(*nodes: DataNode) -> str:
    return "gpu" if any(n.device == "gpu" for n in nodes) else "cpu"


class Graph:
    """The op nodes of one pipeline, in creation order (which is a topological order)."""

    def __init__(self) -> None:
        self.nodes: list[OpNode] = []
        self._names: dict[str, OpNode] = {}
        self._counter = 0
        self.guard: DataNode | None = None  # the branch token of the conditional being defined (conditionals.py)

    def unique_name(self, schema: OpSchema) -> str:
        base = schema.name.replace(".", "_")
        while True:
            name = f"__{base}_{self._counter}"
            self._counter += 1
            if name not in self._names:
                return name

    def add(self, node: OpNode) -> None:
        if node.name in self._names:
            raise SchemaError(f"{node.schema.name}: a node named '{node.name}' already exists in this pipeline")
        self.nodes.append(node)
        self._names[node.name] = node

    def __getitem__(self, name: str) -> OpNode:
        return self._names[name]

    def __contains__(self, name: str) -> bool:
        return name in self._names


_local = threading.local()


def current_graph() -> Graph:
    """The graph the pipeline being defined in this thread builds."""
    graph = getattr(_local, "graph", None)
    if graph is None:
        raise SchemaError("headrace ops can only be called inside a pipeline definition "
                          "(a @pipeline_def function, or `with pipe:`)")
    return graph


class building:  # noqa: N801 - used as `with building(graph):`
    """Make `graph` the one that `fn.*` calls in this thread add to."""

    def __init__(self, graph: Graph):
        self.graph, self.previous = graph, None

    def __enter__(self) -> Graph:
        self.previous = getattr(_local, "graph", None)
        _local.graph = self.graph
        return self.graph

    def __exit__(self, *exc) -> None:
        _local.graph = self.previous


def _device_of(schema: OpSchema, device: str | None, inputs: list[DataNode]) -> str:
    if device is None:
        device = "gpu" if any(i.device == "gpu" for i in inputs) and "gpu" in schema.devices else schema.devices[0]
    if device not in schema.devices:
        raise SchemaError(f"{schema.name}: device '{device}' is not supported (supported: {', '.join(schema.devices)})")
    if device == "cpu" and schema.name != "copy" and any(i.device == "gpu" for i in inputs):
        bad = next(i for i in inputs if i.device == "gpu")
        raise SchemaError(f"{schema.name}: a CPU op cannot read GPU data ({bad.name}); call .cpu() on it first")
    return device


def as_node(value: Any) -> Any:
    """A pipeline output or op input in the forms DALI takes (a number, list, numpy array or scalar constant
    becomes a constant node); anything else as it is."""
    return _constant_input(value)


def _constant_input(value: Any) -> Any:
    """A number, list of numbers or numpy array given as an op input becomes a constant node, as in DALI
    (Python ints give INT32, floats FLOAT)."""
    if isinstance(value, ScalarConstant | DeferredConstant):
        return value.node()
    if isinstance(value, DataNode) or isinstance(value, str | bytes) or hasattr(value, "undefined_message"):
        return value
    if isinstance(value, int | float | bool | np.number | np.ndarray | list | tuple):
        array = np.asarray(value)
        if array.dtype.kind in "biuf":
            return constant_node(array) if isinstance(value, np.ndarray | np.number) else constant_node(value)
    return value


def _tensor_literal(arg: Any, value: Any) -> Any:
    """An argument value as the node DALI makes of it: a constant of types.Constant (deferred), or a literal array
    of 2 or more dimensions for a per-sample argument (every sample's value, as a constant node)."""
    if isinstance(value, DeferredConstant):
        return value.node()
    if arg is None or not arg.tensor_input or isinstance(value, DataNode | str | bytes):
        return value
    if isinstance(value, np.ndarray | list | tuple):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            return value
        if array.ndim >= 2 and array.dtype.kind in "biuf":
            return constant_node(value)
    return value


def add_op(op_name: str, inputs: tuple, kwargs: dict) -> DataNode | tuple[DataNode, ...]:
    """Validate an op call against its schema and add the node to the current graph."""
    graph = current_graph()
    schema = get_schema(op_name)
    node_name = kwargs.get("name") or graph.unique_name(schema)
    inputs = tuple(_constant_input(v) for v in inputs)
    for i, value in enumerate(inputs):
        if hasattr(value, "undefined_message"):
            raise SchemaError(f"{schema.name} (node '{node_name}'): input {i}: {value.undefined_message}")
        if not isinstance(value, DataNode):
            raise SchemaError(f"{schema.name} (node '{node_name}'): input {i} is a {type(value).__name__}, "
                              "not a DataNode (use types.Constant for constants)")
    if not schema.min_inputs <= len(inputs) <= schema.max_inputs:
        raise SchemaError(f"{schema.name} (node '{node_name}'): takes {schema.min_inputs} to {schema.max_inputs} "
                          f"inputs, got {len(inputs)}")
    known = schema.all_args
    kwargs = {k: _tensor_literal(known.get(k), v) for k, v in kwargs.items()}
    arg_inputs = {k: v for k, v in kwargs.items() if isinstance(v, DataNode)}
    for key, value in kwargs.items():
        if hasattr(value, "undefined_message"):
            raise SchemaError(f"{schema.name} (node '{node_name}'): argument '{key}': {value.undefined_message}")
    for key, value in arg_inputs.items():
        arg = known.get(key)
        if arg is None or not arg.tensor_input:
            what = "an unknown argument" if arg is None else "not a per-sample argument"
            raise SchemaError(f"{schema.name} (node '{node_name}'): '{key}' is {what}; it cannot take a DataNode")
        if value.device != "cpu":
            raise SchemaError(f"{schema.name} (node '{node_name}'): argument '{key}' reads GPU data from "
                              f"'{value.op.name}' ({value.op.schema.name}); argument inputs live on the CPU: "
                              f"pass `{value.name}.cpu()`")
    literal = {k: v for k, v in kwargs.items() if k not in arg_inputs}
    args = schema.validate_args(node_name, literal, per_sample=arg_inputs)
    schema.check_rule(node_name, set(args) | set(arg_inputs))
    device = _device_of(schema, args.pop("device", None), list(inputs))
    args.pop("name", None)
    layouts.resolve(schema, node_name, args, list(inputs))
    if graph.guard is not None and schema.batch_op:
        raise SchemaError(f"{schema.name} (node '{node_name}'): readers and external sources cannot be inside an "
                          "`if` on data; create them before it")
    node = OpNode(node_name, schema, device, args, list(inputs), arg_inputs, guard=graph.guard)
    check_branch_visibility(node)
    out_device = "gpu" if device == "mixed" else device
    node.outputs = [DataNode(node, i, out_device) for i in range(schema.outputs_for(args, len(inputs)))]
    node._output_specs = schema.output_specs(args, arg_inputs, [d.spec for d in inputs])
    graph.add(node)
    return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)


def op_function(schema: OpSchema) -> Callable[..., Any]:
    """The `fn.*` callable of `schema`, which the legacy `ops.*` classes call too. An op that takes no inputs and has
    a `source` argument (external_source) takes the source positionally, as DALI's does; one given `num_outputs`
    returns its outputs as a tuple even when there is one."""

    def call(*inputs, **kwargs):
        if inputs and schema.max_inputs == 0 and "source" in schema.all_args and "source" not in kwargs:
            kwargs["source"], inputs = inputs[0], inputs[1:]
        out = add_op(schema.name, inputs, kwargs)
        if kwargs.get("num_outputs") is not None and "num_outputs" in schema.all_args and isinstance(out, DataNode):
            out = (out,)
        return schema.present(kwargs, out)

    call.__name__ = schema.name.rsplit(".", 1)[-1]
    call.__qualname__ = schema.name
    call.__doc__ = schema.docstring()
    return call


def needed_nodes(nodes: list[OpNode], outputs: list[DataNode]) -> list[OpNode]:
    """The nodes the outputs depend on (plus those marked `preserve`), in the order of `nodes` (topological)."""
    keep: set[str] = set()
    stack = [o.op for o in outputs] + [n for n in nodes if n.args.get("preserve")]
    while stack:
        node = stack.pop()
        if node.name not in keep:
            keep.add(node.name)
            stack += [d.op for d in node.upstream]
    return [n for n in nodes if n.name in keep]


SPLIT_OP, MERGE_OP = "_conditional.split", "_conditional.merge"


def guard_chain(guard: DataNode | None) -> list[DataNode | None]:
    """The branch tokens a node with `guard` runs under, innermost first, ending with None (the top level)."""
    chain: list[DataNode | None] = []
    while guard is not None:
        chain.append(guard)
        guard = guard.op.guard
    return [*chain, None]


def check_branch_visibility(node: OpNode) -> None:
    """A node may read only data computed in its own branch or an enclosing one; a merge also reads the two
    branches of its split (inputs: value if true, value if false, predicate)."""
    visible = guard_chain(node.guard)
    for position, source in enumerate(node.upstream):
        if any(source.op.guard is token for token in visible):  # identity: DataNode's == builds a node
            continue
        token = source.op.guard
        if (node.schema.name == MERGE_OP and position < 2 and token.op.schema.name == SPLIT_OP
                and token.index == position and token.op.guard is node.guard
                and token.op.inputs[0] is node.inputs[2]):
            continue
        raise SchemaError(
            f"{node.schema.name} (node '{node.name}') reads '{source.name}' ({source.op.schema.name}), which is "
            "computed inside a branch of an `if` on data that this node is not in; assign the value in both "
            "branches (so it is merged after the `if`) or use it inside the branch")


def _default_constant_type(value, array: np.ndarray) -> enums.DALIDataType:
    """DALI's rule: a numpy value keeps its integer or bool type (float64 becomes FLOAT); Python ints are INT32,
    floats FLOAT."""
    if array.dtype == np.bool_:
        return enums.DALIDataType.BOOL
    from_numpy = isinstance(value, np.ndarray | np.generic)
    if from_numpy and array.dtype in (np.int64, np.uint64):  # DALI narrows 64-bit integer arrays to 32 bits
        narrow = np.int32 if array.dtype == np.int64 else np.uint32
        limits = np.iinfo(narrow)
        if array.size and (array.min() < limits.min or array.max() > limits.max):
            raise SchemaError(f"types.Constant: a value of {array.dtype} does not fit {limits.dtype}, the type DALI "
                              "gives a 64-bit integer array; pass dtype= to keep 64 bits")
        return enums.from_numpy_dtype(narrow)
    if np.issubdtype(array.dtype, np.integer):
        return enums.from_numpy_dtype(array.dtype) if from_numpy else enums.DALIDataType.INT32
    if from_numpy and array.dtype == np.float16:
        return enums.DALIDataType.FLOAT16
    return enums.DALIDataType.FLOAT


def constant_node(value, shape=None, dtype=None, device: str = "cpu", layout: str | None = None) -> DataNode:
    """A constant tensor as a graph node, like `nvidia.dali.types.Constant` (Python ints default to INT32, floats to
    FLOAT; a numpy value keeps its integer type)."""
    array = np.asarray(value)
    dtype = enums.DALIDataType(dtype) if dtype is not None else _default_constant_type(value, array)
    shape = list(shape) if shape is not None else list(array.shape)
    values = [float(v) for v in array.ravel().tolist()]
    return add_op("constant", (), {"fdata": values, "shape": shape, "dtype": dtype, "layout": layout or "",
                                   "device": device})
