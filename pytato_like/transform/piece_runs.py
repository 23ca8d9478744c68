"""Runs of look-alike pieces of a concatenation or stack, read as one.

A concatenation of thousands of slices of one array (``x[a_k:a_k + w]``)
lowered piece by piece is an expression, and a kernel, whose size grows
with the number of pieces: loopy's code generator and the OpenCL build
then cost tens of milliseconds per piece. Most such pieces differ only
in integer constants (a slice's start, a roll's shift): lowered to
:class:`~pytato_like.array.IndexLambda`, their expressions are equal once
those integers are replaced by placeholders, and they read the same
arrays. :func:`piece_runs` finds maximal runs of consecutive such pieces
in which each of those integers changes by a fixed step from piece to
piece (``x[k*w:(k+1)*w]`` for ``k`` up or down); :func:`run_value` writes
one run as a single expression of the piece number ``p``, each integer
becoming ``c0 + d * p``. Integers in no such order (a permutation of
slices) are not gathered: that would need a table of them read by the
kernel, an input the lowering of one node cannot add.

The size of the result does not depend on the length of the run. Pieces
are compared only when their expression has at most
:data:`TEMPLATE_MAX_SIZE` nodes (which also bounds the depth of the
recursive pymbolic mappers used here).

.. autodata:: TEMPLATE_MAX_SIZE
.. autodata:: RUN_MIN_PIECES
.. autoclass:: PieceTemplate
.. autoclass:: Run
.. autofunction:: piece_runs
.. autofunction:: run_value
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import pymbolic.primitives as prim

from pytato_like.array import Array, IndexLambda
from pytato_like.diagnostic import CannotBeLoweredToIndexLambda
from pytato_like.scalar_expr import IdentityMapper, expression_size, substitute

if TYPE_CHECKING:
    from pymbolic.typing import ArithmeticExpression, Expression

    from pytato_like.scalar_expr import ScalarExpression

#: largest piece expression (in nodes) compared with its neighbours; a
#: larger piece is lowered on its own
TEMPLATE_MAX_SIZE = 64
#: fewest consecutive look-alike pieces read as one run (fewer are
#: selected one by one, as before)
RUN_MIN_PIECES = 4

_MARKER = "_pt_k"


class _IntAbstractor(IdentityMapper[[]]):
    """Replaces every integer constant by a marker variable ``_pt_k<j>``
    (numbered in visiting order) and records the integers."""

    def __init__(self) -> None:
        super().__init__()
        self.ints: list[int] = []

    def map_constant(self, expr: object) -> Expression:
        # Python ints only: a NumPy integer carries a dtype the lowering
        # chose (a uint64 bound) and stays part of the skeleton
        if type(expr) is int:
            self.ints.append(expr)
            return prim.Variable(f"{_MARKER}{len(self.ints) - 1}")
        # (a constant of an expression: an Expression itself)
        return cast("Expression", expr)


@dataclasses.dataclass(frozen=True)
class PieceTemplate:
    """A piece lowered with its integer constants taken out."""

    #: the piece's lambda expression, integers replaced by markers
    skeleton: ScalarExpression
    #: the piece's bindings (name -> array)
    bindings: dict[str, Array]
    #: what two pieces of one run share: shape, dtype, skeleton, bound arrays
    key: tuple
    #: the integers taken out, in marker order
    ints: tuple[int, ...]


def _template(ary: Array, lower: Callable[[Array], IndexLambda]
              ) -> PieceTemplate | None:
    if not all(isinstance(d, int) for d in ary.shape):
        return None
    try:
        lam = lower(ary)
    except CannotBeLoweredToIndexLambda:
        return None
    if (lam.var_to_reduction_descr
            or expression_size(lam.expr, TEMPLATE_MAX_SIZE + 1)
            > TEMPLATE_MAX_SIZE):
        return None
    abstractor = _IntAbstractor()
    skeleton = abstractor(lam.expr)
    bindings = dict(lam.bindings)
    key = (ary.shape, ary.dtype, skeleton,
           tuple((name, id(bound)) for name, bound in sorted(bindings.items())))
    return PieceTemplate(skeleton, bindings, key, tuple(abstractor.ints))


@dataclasses.dataclass(frozen=True)
class Run:
    """Pieces ``first .. stop - 1`` of a concatenation or stack."""

    first: int
    stop: int
    #: the template they share (that of the first), None for a lone piece
    template: PieceTemplate | None
    #: the integers of each piece (marker order); empty for a lone piece
    ints: list[tuple[int, ...]]


def piece_runs(arrays: tuple[Array, ...] | list[Array],
               lower: Callable[[Array], IndexLambda]) -> list[Run]:
    """Consecutive ranges of *arrays* covering all of them: a range of at
    least :data:`RUN_MIN_PIECES` look-alike pieces with their shared
    template, any other piece a range of its own. *lower* gives a
    piece's index lambda
    (:func:`~pytato_like.transform.lower_to_index_lambda.to_index_lambda`,
    which calls this function: passed in, so neither module imports the
    other's caller)."""
    templates = [_template(ary, lower) for ary in arrays]
    runs: list[Run] = []
    k = 0
    while k < len(arrays):
        first = templates[k]
        stop = k + 1
        if first is not None and k + 1 < len(arrays):
            second = templates[k + 1]
            if second is not None and second.key == first.key:
                steps = [b - a for a, b in zip(first.ints, second.ints)]
                while stop < len(arrays):
                    t = templates[stop]
                    if t is None or t.key != first.key or any(
                            v != a + d * (stop - k) for v, a, d
                            in zip(t.ints, first.ints, steps)):
                        break
                    stop += 1
        if first is not None and stop - k >= RUN_MIN_PIECES:
            runs.append(Run(k, stop, first,
                            [t.ints for t in templates[k:stop]]))  # type: ignore[union-attr]
            k = stop
        else:
            runs.append(Run(k, k + 1, None, []))
            k += 1
    return runs


def run_value(run: Run, piece_number: ArithmeticExpression,
              index: Mapping[str, ScalarExpression],
              read_name: Callable[[Array], str]) -> ArithmeticExpression:
    """The value of the pieces of *run* at piece *piece_number* of the
    run (an expression) and at the piece's own index given by *index*
    (``"_<axis>"`` -> expression). *read_name(array)* gives the variable
    name under which the caller binds each array the pieces read."""
    template = run.template
    assert template is not None
    assignments: dict[str, ScalarExpression] = dict(index)
    first, second = run.ints[0], run.ints[1]
    for col, (a, b) in enumerate(zip(first, second)):
        # piece_runs made every integer affine in the piece number
        assignments[f"{_MARKER}{col}"] = a if a == b else prim.Sum(
            (a, prim.Product((b - a, piece_number))))
    for bound_name, bound in template.bindings.items():
        assignments[bound_name] = prim.Variable(read_name(bound))
    # (the value of an array's piece: arithmetic, as its lowering built it)
    return cast("ArithmeticExpression",
                substitute(template.skeleton, assignments))


__all__ = ["TEMPLATE_MAX_SIZE", "RUN_MIN_PIECES", "PieceTemplate", "Run",
           "piece_runs", "run_value"]
