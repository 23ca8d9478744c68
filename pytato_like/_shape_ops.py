"""Shape manipulation: reshape, transpose, concatenate, stack, roll,
expand_dims, squeeze, broadcast_to (NumPy semantics, lazy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pytato_like._frontend import ElementwiseBuilder, as_operand
from pytato_like.array import (
    NO_TAGS,
    Array,
    AxisPermutation,
    Concatenate,
    Reshape,
    Roll,
    Stack,
    shape_product,
    make_data_wrapper,
    normalize_shape,
)
from pytato_like.diagnostic import (
    AxisError,
    CannotBroadcastError,
    ShapeMismatchError,
)
from pytato_like.scalar_expr import substitute
from pytato_like.tags import ExpandedDimsReshape
from pytato_like.utils import (
    Polynomial,
    are_shape_components_equal,
    are_shapes_equal,
    dim_to_index_lambda_components,
    get_shape_after_broadcasting,
    normalize_axes,
    normalize_axis,
    poly_mul,
    size_polynomial,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pytato_like.array import Operand, ShapeComponent, SizeParam

    #: a shape: one length or a sequence of lengths (ints or size expressions)
    ShapeArg = int | Sequence[ShapeComponent]
    #: one axis or several
    AxesArg = int | Sequence[int]


def _require_array(a: Operand, what: str) -> Array:
    a = as_operand(a)
    if not isinstance(a, Array):
        a = make_data_wrapper(np.asarray(a))
    return a


def reshape(a: Operand, newshape: ShapeArg, order: str = "C") -> Array:
    """*a* with shape *newshape* (one entry may be -1), read in *order*.
    On a symbolic shape the -1 becomes an expression of the size
    parameters, e.g. ``3*n`` for ``(n, 3) -> (-1,)``; a length that is not
    a multiple for every value of them raises
    :class:`~pytato_like.diagnostic.ShapeMismatchError`."""
    a = _require_array(a, "reshape")
    if (type(newshape) is tuple and order in ("C", "F")
            and all(type(d) is int and d >= 0 for d in newshape)
            and type(a.size) is int):
        # fast path: a concrete shape without -1
        if newshape == a.shape:
            return a
        size = 1
        for d in newshape:
            size *= d
        if size == a.size:
            return Reshape(a, newshape, order, None, NO_TAGS)
    if order not in ("C", "F"):
        raise ShapeMismatchError(f"reshape order must be 'C' or 'F', got {order!r}")
    if isinstance(newshape, (int, np.integer, Array)):
        newshape = (newshape,)
    newshape = list(newshape)
    n_inferred = sum(1 for s in newshape if not isinstance(s, Array) and s == -1)
    if n_inferred > 1:
        raise ShapeMismatchError(f"can only infer one dimension in reshape of "
                                 f"{a.shape} to {tuple(newshape)}")
    if n_inferred:
        given = [s for s in newshape if isinstance(s, Array) or s != -1]
        known = shape_product(given)
        if isinstance(known, int) and isinstance(a.size, int):
            if known == 0 or a.size % known:
                raise ShapeMismatchError(
                    f"cannot reshape array of shape {a.shape} (size {a.size}) "
                    f"into shape {tuple(newshape)}")
            inferred = a.size // known
        else:
            inferred = _infer_symbolic_dim(a.shape, given, newshape)
        newshape = [inferred if not isinstance(s, Array) and s == -1 else s
                    for s in newshape]
    newshape = normalize_shape(newshape)
    if are_shapes_equal(newshape, a.shape):
        return a
    old_size, new_size = a.size, shape_product(newshape)
    if not are_shape_components_equal(old_size, new_size):
        raise ShapeMismatchError(
            f"cannot reshape array of shape {a.shape} (size {old_size}) into "
            f"shape {newshape} (size {new_size})")
    return Reshape(a, newshape, order, None, NO_TAGS)


# {{{ -1 in reshapes of symbolic shapes

def _shape_poly(dims: Iterable[ShapeComponent], size_params: dict[str, SizeParam]
                ) -> Polynomial | None:
    result: Polynomial | None = {(): 1}
    for d in dims:
        p = size_polynomial(d, size_params)
        if p is None or result is None:
            return None
        result = poly_mul(result, p)
    return result


def _poly_to_component(p: Polynomial, size_params: dict[str, SizeParam]
                       ) -> ShapeComponent:
    """Polynomial *p* as a shape component: an int or an expression of the
    size parameters (a size parameter itself for ``n``)."""
    result: ShapeComponent = 0
    for m, c in sorted(p.items()):
        term: ShapeComponent | None = c if c != 1 or not m else None
        for name, e in m:
            for _ in range(e):
                term = size_params[name] if term is None else term * size_params[name]
        result = term if type(result) is int and result == 0 else result + term
    return result


def _dim_str(dim: ShapeComponent) -> str:
    """A shape component as an expression of size parameter names."""
    if not isinstance(dim, Array):
        return str(dim)
    size_params: dict[str, SizeParam] = {}
    p = size_polynomial(dim, size_params)
    if p is None:  # (not a polynomial: print the expression)
        import pymbolic.primitives as prim

        try:
            expr, bindings = dim_to_index_lambda_components(dim)
            return str(substitute(expr, {k: prim.Variable(sp.name)
                                         for k, sp in bindings.items()}))
        except (RecursionError, ShapeMismatchError):
            return "<size expression>"
    if not p:
        return "0"
    terms = []
    for m, c in sorted(p.items(), key=lambda mc: (-sum(e for _, e in mc[0]),
                                                  mc[0])):
        factors = ([str(c)] if c != 1 or not m else []) + [
            name if e == 1 else f"{name}**{e}" for name, e in m]
        terms.append("*".join(factors))
    return " + ".join(terms)


def _shape_str(shape: Iterable[ShapeComponent]) -> str:
    dims = [_dim_str(d) for d in shape]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def _infer_symbolic_dim(shape: tuple, given: list, newshape: list
                        ) -> ShapeComponent:
    """The ``-1`` entry of *newshape* when reshaping an array of symbolic
    *shape*: its size divided by the product of the *given* entries,
    exactly for every value of the size parameters. Equal components
    cancel first (``(n, 3) -> (n, -1)`` gives 3); otherwise the division
    by a monomial is done term by term (``(2*n, 3) -> (-1, 6)`` gives n).
    Raises :class:`~pytato_like.diagnostic.ShapeMismatchError` naming the
    shapes when the quotient is not a polynomial with integer coefficients
    (``(n, 3) -> (-1, 2)``)."""
    # 1. cancel equal factors, then divide the integer parts
    remaining = [d for d in shape if isinstance(d, Array)]
    size_int = shape_product(d for d in shape if not isinstance(d, Array))
    known_int = shape_product(d for d in given if not isinstance(d, Array))
    unmatched = []
    for d in given:
        if not isinstance(d, Array):
            continue
        for i, r in enumerate(remaining):
            if are_shape_components_equal(d, r):
                del remaining[i]
                break
        else:
            unmatched.append(d)
    if known_int == 0:
        raise ShapeMismatchError(
            f"cannot reshape array of shape {_shape_str(shape)} into shape "
            f"{_shape_str(newshape)}: the other lengths multiply to 0")
    if size_int == 0:
        return 0
    if not unmatched and size_int % known_int == 0:
        coefficient = size_int // known_int
        factors = [coefficient] if coefficient != 1 or not remaining else []
        result = (factors + remaining)[0]
        for factor in (factors + remaining)[1:]:
            result = result * factor
        return result
    # 2. divide the polynomials (by a monomial)
    size_params: dict[str, SizeParam] = {}
    p = _shape_poly([size_int, *remaining], size_params)
    q = _shape_poly([known_int, *unmatched], size_params)
    quotient: Polynomial | None = None
    if p is not None and q is not None and len(q) == 1:
        ((qm, qc),) = q.items()
        qpowers = dict(qm)
        quotient = {}
        for m, c in p.items():
            powers = dict(m)
            if c % qc or any(powers.get(name, 0) < e
                             for name, e in qpowers.items()):
                quotient = None
                break
            for name, e in qpowers.items():
                powers[name] -= e
            quotient[tuple(sorted((k, e) for k, e in powers.items() if e))] = \
                c // qc
    if quotient is None:
        size = shape_product(shape)
        raise ShapeMismatchError(
            f"cannot infer the -1 in reshaping an array of shape "
            f"{_shape_str(shape)} into shape {_shape_str(newshape)}: its size "
            f"{_dim_str(size)} is not a multiple of "
            f"{_dim_str(shape_product(given))} for every value of the size "
            "parameters")
    return _poly_to_component(quotient, size_params)

# }}}


def transpose(a: Operand, axes: Sequence[int] | None = None) -> Array:
    """*a* with its axes permuted (reversed when *axes* is None)."""
    a = _require_array(a, "transpose")
    if axes is None:
        axes = tuple(range(a.ndim))[::-1]
    axes = tuple(normalize_axis(ax, a.ndim, f"array of shape {a.shape}")
                 for ax in axes)
    if sorted(axes) != list(range(a.ndim)):
        raise AxisError(f"axes {axes} are not a permutation of the axes of an "
                        f"array of shape {a.shape}")
    if axes == tuple(range(a.ndim)):
        return a
    return AxisPermutation(a, axes, None, NO_TAGS)


def _check_joinable(arrays, axis_to_skip, what):
    first = arrays[0]
    for other in arrays[1:]:
        if other.ndim != first.ndim:
            raise ShapeMismatchError(
                f"{what}: all arrays must have the same number of dimensions, "
                f"got shapes {[a.shape for a in arrays]}")
        for ax, (d1, d2) in enumerate(zip(first.shape, other.shape)):
            if ax != axis_to_skip and not are_shape_components_equal(d1, d2):
                raise ShapeMismatchError(
                    f"{what}: shapes {[a.shape for a in arrays]} differ in "
                    f"axis {ax}")


def concatenate(arrays: Iterable[Operand], axis: int = 0) -> Array:
    """*arrays* joined along existing axis *axis*."""
    given = [_require_array(a, "concatenate") for a in arrays]
    if not given:
        raise ShapeMismatchError("concatenate needs at least one array")
    if given[0].ndim == 0:
        raise ShapeMismatchError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, given[0].ndim, f"array of shape {given[0].shape}")
    _check_joinable(given, axis, "concatenate")
    if len(given) == 1:
        return given[0]
    return Concatenate(tuple(given), axis, None, NO_TAGS)


def stack(arrays: Iterable[Operand], axis: int = 0) -> Array:
    """*arrays* (all of one shape) joined along a new axis *axis*."""
    given = [_require_array(a, "stack") for a in arrays]
    if not given:
        raise ShapeMismatchError("stack needs at least one array")
    _check_joinable(given, None, "stack")
    for a in given[1:]:
        if not are_shapes_equal(a.shape, given[0].shape):
            raise ShapeMismatchError(
                f"stack: all arrays must have the same shape, got "
                f"{[x.shape for x in given]}")
    axis = normalize_axis(axis, given[0].ndim + 1,
                          f"stacked result of arrays of shape {given[0].shape}")
    return Stack(tuple(given), axis, None, NO_TAGS)


def roll(a: Operand, shift: int | Sequence[int], axis: AxesArg | None = None
         ) -> Array:
    """Elements of *a* shifted cyclically by *shift* along *axis* (the
    flattened array when None), as :func:`numpy.roll`."""
    a = _require_array(a, "roll")
    if axis is None:
        if isinstance(shift, (tuple, list)):
            raise AxisError("roll with axis=None takes a single integer shift")
        if a.ndim == 0:
            return a  # one element: nothing moves (NumPy and pytato agree)
        if a.ndim == 1:
            return roll(a, shift, 0)  # already flat: no reshapes to undo
        return reshape(roll(reshape(a, (-1,)), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise AxisError(f"roll: shift {shift} and axis {axis} do not match")
    result = a
    for sh, ax in zip(shifts, axes):
        ax = normalize_axis(ax, a.ndim, f"array of shape {a.shape}")
        sh = int(sh)
        dim = a.shape[ax]
        if isinstance(dim, int):
            if dim == 0:
                continue
            sh %= dim
        if sh == 0:
            continue
        result = Roll(result, sh, ax, None, NO_TAGS)
    return result


def expand_dims(a: Operand, axis: AxesArg) -> Array:
    """*a* with unit axes inserted at the positions *axis*."""
    a = _require_array(a, "expand_dims")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    new_ndim = a.ndim + len(axes)
    positions = normalize_axes(axes, new_ndim, f"expanded array of shape {a.shape}")
    old = iter(a.shape)
    newshape = tuple(1 if i in positions else next(old) for i in range(new_ndim))
    return Reshape(a, newshape, "C", None,
                   frozenset([ExpandedDimsReshape(tuple(positions))]))


def squeeze(a: Operand, axis: AxesArg | None = None) -> Array:
    """*a* without its unit axes (only those in *axis* when given)."""
    a = _require_array(a, "squeeze")
    if axis is None:
        drop = {i for i, d in enumerate(a.shape)
                if not isinstance(d, Array) and d == 1}
    else:
        drop = set(normalize_axes(axis, a.ndim, f"array of shape {a.shape}"))
        for ax in drop:
            if isinstance(a.shape[ax], Array) or a.shape[ax] != 1:
                raise ShapeMismatchError(
                    f"cannot squeeze axis {ax} of length {a.shape[ax]} "
                    f"(array shape {a.shape})")
    if not drop:
        return a
    newshape = tuple(d for i, d in enumerate(a.shape) if i not in drop)
    return Reshape(a, newshape, "C", None, NO_TAGS)


def broadcast_to(a: Operand, shape: ShapeArg) -> Array:
    """*a* broadcast to *shape*, as :func:`numpy.broadcast_to`."""
    a = _require_array(a, "broadcast_to")
    shape = normalize_shape(shape)
    if len(shape) < a.ndim:
        raise CannotBroadcastError(
            f"cannot broadcast array of shape {a.shape} to fewer dimensions "
            f"{shape}")
    result_shape = get_shape_after_broadcasting([a, ShapeOnly(shape)])
    if not are_shapes_equal(result_shape, shape):
        raise CannotBroadcastError(f"cannot broadcast array of shape {a.shape} "
                                 f"to shape {shape}")
    if are_shapes_equal(a.shape, shape):
        return a
    builder = ElementwiseBuilder((a,), shape, "broadcast_to")
    return builder.build(builder.access(a, a.dtype), a.dtype)


class ShapeOnly:
    """Stand-in with just a shape, for broadcasting checks."""

    def __init__(self, shape) -> None:
        self.shape = shape

