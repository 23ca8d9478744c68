"""The reference executor: evaluates a DAG with NumPy.

:func:`generate_numpy` returns a :class:`NumpyBoundProgram`; calling it with
the input values evaluates every node once, in topological order (no
recursion), releasing intermediate values after their last use. Index
lambdas are evaluated vectorised: every index variable becomes a broadcast
``arange`` over the lambda's index space, plain subscripts become views, and
other subscripts become gathers. This target defines the semantics every
other target is tested against.

.. autofunction:: generate_numpy
.. autoclass:: NumpyBoundProgram
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, SupportsInt, TypeAlias, cast

import numpy as np
import pymbolic.primitives as prim

from pytato_like._traversal import topological_order
from pytato_like.array import (
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    AxisPermutation,
    BasicIndex,
    Concatenate,
    DataWrapper,
    DictOfNamedArrays,
    Einsum,
    EinsumElementwiseAxis,
    IndexLambda,
    NamedArray,
    NormalizedSlice,
    Placeholder,
    Reshape,
    Roll,
    SizeParam,
    Stack,
    children_of,
    make_dict_of_named_arrays,
)
from pytato_like.cmath import C99_TO_NUMPY
from pytato_like.diagnostic import (
    IndexOutOfBoundsError,
    NegativeIntegerPowerError,
    PytatoLikeError,
    UnknownIndexLambdaExpr,
)
from pytato_like.scalar_expr import C99_FUNCTION_PREFIX
from pytato_like.target import (
    Target,
    as_host_array,
    check_input_value,
    gather_program_inputs,
    normalize_outputs,
    scalar_input_as_placeholder_dtype,
)
from pytato_like.target.program import HostBoundProgram

if TYPE_CHECKING:
    from pymbolic.typing import Expression

#: what an index lambda's expression evaluates to: an array with one
#: (possibly unit) axis per axis of the index space, or a scalar
ScalarOrArray: TypeAlias = "np.ndarray | np.generic | int | float | complex"
#: what a node evaluates to: an array or NumPy scalar; a dict of arrays by
#: name for a call (its results are named arrays)
NodeValue: TypeAlias = "np.ndarray | np.generic | Mapping[str, np.ndarray]"


class NumpyTarget(Target):
    """Evaluation with NumPy on the host."""


# {{{ index lambda evaluation

_COMPARISONS = {"<": np.less, "<=": np.less_equal, ">": np.greater,
                ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}


class IndexLambdaEvaluator:
    """Evaluates one index lambda's scalar expression over its whole index
    space at once. Every intermediate is a NumPy scalar or an array with one
    (possibly unit) axis per axis of the current index space; reductions
    append axes while their body is evaluated."""

    def __init__(self, bindings: dict[str, np.ndarray], shape: tuple[int, ...]):
        self.bindings = bindings
        self.space: list[int] = list(shape)
        self.var_axis: dict[str, int] = {f"_{i}": i for i in range(len(shape))}
        self.var_offset: dict[str, int] = {}

    def __call__(self, expr: Expression) -> ScalarOrArray:
        return self.rec(expr)

    def rec(self, expr: Expression) -> ScalarOrArray:
        if isinstance(expr, prim.ExpressionNode):
            return getattr(self, expr.mapper_method)(expr)
        if isinstance(expr, (np.generic, int, float, complex, bool)):
            return expr
        raise UnknownIndexLambdaExpr(
            f"cannot evaluate {expr!r} of type {type(expr).__name__}")

    # {{{ leaves

    def _index_grid(self, name: str) -> np.ndarray:
        axis = self.var_axis[name]
        shape = [1] * len(self.space)
        shape[axis] = self.space[axis]
        grid = np.arange(self.space[axis], dtype=np.int64).reshape(shape)
        offset = self.var_offset.get(name, 0)
        return grid + offset if offset else grid

    def map_variable(self, expr: prim.Variable) -> ScalarOrArray:
        name = expr.name
        if name in self.var_axis:
            return self._index_grid(name)
        try:
            value = self.bindings[name]
        except KeyError:
            raise UnknownIndexLambdaExpr(
                f"index lambda refers to unknown variable '{name}'") from None
        if value.ndim != 0:
            raise UnknownIndexLambdaExpr(
                f"binding '{name}' of shape {value.shape} used without subscript")
        return value[()]

    def map_subscript(self, expr: prim.Subscript) -> ScalarOrArray:
        # index lambdas subscript only named bindings (Variables)
        name = cast("prim.Variable", expr.aggregate).name
        value = self.bindings[name]
        index = expr.index if isinstance(expr.index, tuple) else (expr.index,)
        if len(index) != value.ndim:
            raise UnknownIndexLambdaExpr(
                f"subscript {name}{list(index)} has {len(index)} indices for a "
                f"binding of shape {value.shape}")
        view = self._subscript_as_view(value, index)
        if view is not None:
            return view
        idx_arrays = []
        for idx, dim in zip(index, value.shape):
            ival = np.asarray(self.rec(idx))
            # Out-of-range entries can only be read under an If whose branch
            # is not taken (e.g. padding); clip so the gather stays valid.
            idx_arrays.append(np.clip(ival, 0, max(dim - 1, 0)).astype(np.intp))
        if value.size == 0:
            shape = np.broadcast_shapes(*(a.shape for a in idx_arrays))
            return np.zeros(shape, value.dtype)
        return value[tuple(idx_arrays)]

    def _subscript_as_view(self, value: np.ndarray, index) -> np.ndarray | None:
        basic: list[int | slice] = []
        axes: list[int] = []
        for idx, dim in zip(index, value.shape):
            if isinstance(idx, (int, np.integer)):
                if not 0 <= idx < dim:
                    return None
                basic.append(int(idx))
            elif (isinstance(idx, prim.Variable) and idx.name in self.var_axis
                  and not self.var_offset.get(idx.name)
                  and self.space[self.var_axis[idx.name]] == dim):
                basic.append(slice(None))
                axes.append(self.var_axis[idx.name])
            else:
                return None
        if len(set(axes)) != len(axes):
            return None
        view = value[tuple(basic)]
        order = sorted(range(len(axes)), key=axes.__getitem__)
        view = view.transpose(order)
        shape = [1] * len(self.space)
        for ax, extent in zip(sorted(axes), view.shape):
            shape[ax] = extent
        return view.reshape(shape)

    # }}}

    # {{{ arithmetic

    def map_sum(self, expr):
        return functools.reduce(operator.add, (self.rec(c) for c in expr.children))

    def map_product(self, expr):
        return functools.reduce(operator.mul, (self.rec(c) for c in expr.children))

    def map_quotient(self, expr):
        return np.true_divide(self.rec(expr.numerator), self.rec(expr.denominator))

    def map_floor_div(self, expr):
        return np.floor_divide(self.rec(expr.numerator), self.rec(expr.denominator))

    def map_remainder(self, expr):
        return np.remainder(self.rec(expr.numerator), self.rec(expr.denominator))

    def map_power(self, expr):
        try:
            return np.power(self.rec(expr.base), self.rec(expr.exponent))
        except ValueError as err:   # NumPy's, typed as the device's
            raise NegativeIntegerPowerError(str(err)) from err

    def map_left_shift(self, expr):
        return np.left_shift(self.rec(expr.shiftee), self.rec(expr.shift))

    def map_right_shift(self, expr):
        return np.right_shift(self.rec(expr.shiftee), self.rec(expr.shift))

    def map_bitwise_not(self, expr):
        return np.invert(self.rec(expr.child))

    def map_bitwise_and(self, expr):
        return functools.reduce(np.bitwise_and, (self.rec(c) for c in expr.children))

    def map_bitwise_or(self, expr):
        return functools.reduce(np.bitwise_or, (self.rec(c) for c in expr.children))

    def map_bitwise_xor(self, expr):
        return functools.reduce(np.bitwise_xor, (self.rec(c) for c in expr.children))

    def map_comparison(self, expr):
        return _COMPARISONS[expr.operator](self.rec(expr.left), self.rec(expr.right))

    def map_logical_not(self, expr):
        return np.logical_not(self.rec(expr.child))

    def map_logical_and(self, expr):
        return functools.reduce(np.logical_and, (self.rec(c) for c in expr.children))

    def map_logical_or(self, expr):
        return functools.reduce(np.logical_or, (self.rec(c) for c in expr.children))

    def map_if(self, expr):
        return np.where(self.rec(expr.condition), self.rec(expr.then),
                        self.rec(expr.else_))

    def map_min(self, expr):
        return functools.reduce(np.minimum, (self.rec(c) for c in expr.children))

    def map_max(self, expr):
        return functools.reduce(np.maximum, (self.rec(c) for c in expr.children))

    def map_call(self, expr):
        name = getattr(expr.function, "name", "")
        if not name.startswith(C99_FUNCTION_PREFIX):
            raise UnknownIndexLambdaExpr(f"unknown function '{name}' in index lambda")
        ufunc = C99_TO_NUMPY.get(name[len(C99_FUNCTION_PREFIX):])
        if ufunc is None:
            raise UnknownIndexLambdaExpr(f"unknown function '{name}' in index lambda")
        return ufunc(*(self.rec(p) for p in expr.parameters))

    def map_type_cast(self, expr):
        value = self.rec(expr.inner_expr)
        if isinstance(value, np.ndarray):
            return value.astype(expr.dtype)
        return np.asarray(value).astype(expr.dtype)[()]

    def map_reduce(self, expr):
        first_axis = len(self.space)
        names = list(expr.bounds)
        for name in names:
            lo, hi = (int(self.rec(b)) for b in expr.bounds[name])
            self.var_axis[name] = len(self.space)
            self.var_offset[name] = lo
            self.space.append(max(hi - lo, 0))
        try:
            inner = np.broadcast_to(self.rec(expr.inner_expr), self.space)
            axes = tuple(range(first_axis, len(self.space)))
            result = expr.op.numpy_reduce(inner, axis=axes)
        finally:
            for name in names:
                del self.var_axis[name]
                del self.var_offset[name]
            del self.space[first_axis:]
        if result.ndim != first_axis:  # pragma: no cover - defensive
            raise UnknownIndexLambdaExpr("reduction produced a misshapen result")
        return result

    def map_nan(self, expr):
        return np.nan

    # }}}


def evaluate_index_lambda(expr: IndexLambda, bindings: dict[str, np.ndarray],
                          shape: tuple[int, ...]) -> np.ndarray:
    value = IndexLambdaEvaluator(bindings, shape)(expr.expr)
    result = np.empty(shape, dtype=expr.dtype)
    result[...] = np.broadcast_to(np.asarray(value), shape) if shape else value
    return result

# }}}


# {{{ node evaluation

def _einsum_spec(expr: Einsum) -> str:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    n_out = expr.ndim

    def letter(descr) -> str:
        if isinstance(descr, EinsumElementwiseAxis):
            return letters[descr.dim]
        return letters[n_out + descr.dim]
    inputs = ",".join("".join(letter(d) for d in acc)
                      for acc in expr.access_descriptors)
    return f"{inputs}->{letters[:n_out]}"


def _index_key(indices, values: Mapping[int, NodeValue]):
    key: list[object] = []
    for idx in indices:
        if isinstance(idx, NormalizedSlice):
            if idx.stop is not None and idx.length == 0:
                # NormalizedSlice.to_slice() maps the empty (-1, -1, -1)
                # to slice(-1, None, -1), i.e. the last element
                key.append(slice(0, 0))
            else:
                key.append(idx.to_slice())
        elif isinstance(idx, Array):
            key.append(np.asarray(values[id(idx)]))
        else:
            key.append(idx)
    return tuple(key)


_FUNCTION_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _function_program(function) -> NumpyBoundProgram:
    """The program evaluating the body of *function* (a
    :class:`~pytato_like.function.FunctionDefinition`), made once per
    definition."""
    program = _FUNCTION_PROGRAMS.get(function)
    if program is None:
        program = NumpyBoundProgram(make_dict_of_named_arrays(
            dict(function.returns)))
        _FUNCTION_PROGRAMS[function] = program
    return program


class _NodeEvaluator:
    def __init__(self, values: dict[int, NodeValue]) -> None:
        self.values = values

    def value(self, ary: Array) -> np.ndarray | np.generic:
        # (an array's value; only a call, not an array, has a dict)
        return cast("np.ndarray | np.generic", self.values[id(ary)])

    def shape(self, ary: Array) -> tuple[int, ...]:
        # (a size's value: a NumPy integer or a 0-d integer array)
        return tuple(d if isinstance(d, int)
                     else int(cast("SupportsInt", self.values[id(d)]))
                     for d in ary.shape)

    def __call__(self, node: Array) -> NodeValue:
        return getattr(self, node._mapper_method)(node)

    def map_index_lambda(self, node: IndexLambda):
        bindings = {name: np.asarray(self.value(b))
                    for name, b in node.bindings.items()}
        return evaluate_index_lambda(node, bindings, self.shape(node))

    def map_einsum(self, node: Einsum):
        result = np.einsum(_einsum_spec(node), *(self.value(a) for a in node.args))
        return np.asarray(result, dtype=node.dtype)

    def map_reshape(self, node: Reshape):
        return np.reshape(self.value(node.array), self.shape(node),
                          order=cast("Literal['C', 'F']", node.order))

    def map_axis_permutation(self, node: AxisPermutation):
        return np.transpose(self.value(node.array), node.axis_permutation)

    def map_concatenate(self, node: Concatenate):
        return np.concatenate([self.value(a) for a in node.arrays], axis=node.axis)

    def map_stack(self, node: Stack):
        return np.stack([self.value(a) for a in node.arrays], axis=node.axis)

    def map_roll(self, node: Roll):
        return np.roll(self.value(node.array), node.shift, axis=node.axis)

    def _index(self, node):
        try:
            return self.value(node.array)[_index_key(node.indices, self.values)]
        except IndexError as err:   # NumPy's, typed as the device's
            raise IndexOutOfBoundsError(
                f"{err} (indexing an array of shape {node.array.shape})") from err

    map_basic_index = _index
    map_contiguous_advanced_index = _index
    map_non_contiguous_advanced_index = _index

    def map_named_array(self, node: NamedArray):
        return self.value(node.expr)

    def map_data_wrapper(self, node: DataWrapper):
        return as_host_array(node.data)

    def map_call(self, node):
        # the body runs once per call site, on the arguments' values
        function = node.function
        program = _function_program(function)
        args = {name: self.value(node.bindings[name])
                for name in function._placeholders}
        return program.evaluate(**args)

    def map_named_call_result(self, node):
        return self.value(node._container)[node.name]

    def map_loopy_call(self, node):
        # the user's kernel, compiled for the host by loopy's C target
        from pytato_like.target.host_loopy import run_loopy_call_on_host
        return run_loopy_call_on_host(
            node, {name: self.value(b) for name, b in node.bindings.items()})

    def map_loopy_call_result(self, node):
        return self.value(node._container)[node.name]

    def map_csr_matmul(self, node):
        from pytato_like.sparse import evaluate_csr_matmul
        return evaluate_csr_matmul(
            np.asarray(self.value(node.elem_values)),
            np.asarray(self.value(node.elem_col_indices)),
            np.asarray(self.value(node.row_starts)),
            np.asarray(self.value(node.array)), self.shape(node), node.dtype)

    def map_distributed_recv(self, node):
        raise PytatoLikeError(
            f"generate_numpy cannot evaluate a receive from rank "
            f"{getattr(node, 'src_rank', '?')} (tag {getattr(node, 'comm_tag', '?')}); "
            "partition the DAG and run it distributed")

    def map_distributed_send_ref_holder(self, node):
        return self.value(node.passthrough_data)

    def map_to_device(self, node):
        # a device transfer moves data, it does not change it
        return self.value(node.array)

    def handle_unsupported_array(self, node):
        # a node kind defined outside the package runs by its index lambda
        # (the built-in kinds above are evaluated independently: oracle)
        if callable(getattr(type(node), "to_index_lambda", None)):
            return self.map_index_lambda(node.to_index_lambda())
        raise UnknownIndexLambdaExpr(
            f"the NumPy target cannot evaluate a {type(node).__name__}")

    def __getattr__(self, name):
        if name.startswith("map_"):
            return self.handle_unsupported_array
        raise AttributeError(name)

# }}}


class NumpyBoundProgram(HostBoundProgram):
    """A DAG ready to be evaluated with NumPy.

    Call it with one keyword argument per placeholder (and per size
    parameter that cannot be inferred from input shapes):
    ``prg(**inputs)`` returns a dict of NumPy arrays for a
    :class:`~pytato_like.DictOfNamedArrays` result, one array for an
    :class:`~pytato_like.Array` result. Like every target's program it
    also follows the program contract
    (:class:`~pytato_like.target.program.BoundProgram`):
    ``prg(queue, **inputs)`` returns ``(HOST_EVENT, outputs)``, *queue*
    and the contract's options being ignored.
    """

    def __init__(self, result) -> None:
        self.outputs, self.single_output = normalize_outputs(result)
        self._order = topological_order(list(self.outputs.values()))
        self.inputs = gather_program_inputs(self._order)
        position = {id(node): i for i, node in enumerate(self._order)}
        # values may be dropped after their last reader has run
        last_use = list(range(len(self._order)))
        for i, node in enumerate(self._order):
            for child in children_of(node):
                last_use[position[id(child)]] = i
        for out in self.outputs.values():
            last_use[position[id(out)]] = len(self._order)
        self._release_after: list[list[int]] = [[] for _ in self._order]
        for j, i in enumerate(last_use):
            if i < len(self._order):
                self._release_after[i].append(j)

    def _input_to_numpy(self, value: object, ph: Placeholder) -> np.ndarray:
        return scalar_input_as_placeholder_dtype(as_host_array(value), ph)

    def input_names(self) -> set[str]:
        return self.inputs.placeholders.keys() | self.inputs.size_params.keys()

    def evaluate(self, /, **kwargs: object  # an input may be "self"
                 ) -> np.ndarray | dict[str, np.ndarray]:
        inputs = self.inputs.check_and_convert(kwargs, self._input_to_numpy)
        values: dict[int, NodeValue] = {}
        evaluator = _NodeEvaluator(values)
        value: NodeValue
        for i, node in enumerate(self._order):
            if isinstance(node, (Placeholder, SizeParam)):
                value = inputs[node.name]
                if isinstance(node, Placeholder):
                    check_input_value(value, node, evaluator.shape(node))
            else:
                value = evaluator(node)
            values[id(node)] = value
            for j in self._release_after[i]:
                values.pop(id(self._order[j]), None)
        results: dict[str, np.ndarray] = {}
        input_ids = {id(v) for v in inputs.values()}
        for name, out in self.outputs.items():
            result = np.asarray(values[id(out)])
            if id(result) in input_ids or result.base is not None \
                    or isinstance(out, DataWrapper):
                result = result.copy()  # never hand out the caller's memory
            results[name] = result
        if self.single_output:
            return results["_pt_out"]
        return results


def generate_numpy(result: Array | DictOfNamedArrays | dict[str, Array]
                   ) -> NumpyBoundProgram:
    """A program evaluating *result* (an :class:`~pytato_like.Array` or a
    :class:`~pytato_like.DictOfNamedArrays`) with NumPy."""
    return NumpyBoundProgram(result)


generate_numpy_like = generate_numpy
