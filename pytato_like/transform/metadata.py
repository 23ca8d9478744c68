"""Axis-tag inference: spread tags along axes that index the same thing.

:func:`unify_axes_tags` copies a DAG with the axis tags it already carries
(say, "this axis runs over mesh elements") propagated to every axis known to
be indexed by the same index. How:

1. :class:`AxesTagsEquationCollector` visits every node once, children
   first (an iterative topological walk, so any depth works), and records
   *equations* ``u = v`` between variables standing for axes: one per
   operand axis that passes straight through to an output axis, and one per
   tag of type *tag_t* already on an axis (``axis = tag``). A node is first
   lowered to its :class:`~pytato_like.IndexLambda` (by
   :func:`~pytato_like.transform.lower_to_index_lambda.to_index_lambda`), and
   an operand axis subscripted by the output index ``_k`` (not broadcast,
   same extent) equals output axis ``k``; one subscripted by a reduction
   variable equals that reduction (``(node, "_r0")``), which is how tags
   reach reduction descriptors and flow through reductions and einsums.
   A reshape keeps the axes that only gain or lose unit axes around them
   (``expand_dims``, ``squeeze``); named arrays, device transfers and
   send-reference holders keep all axes.
2. The equations form an undirected graph; every axis variable reachable
   from a tag's variable gets that tag (a breadth-first search per tag,
   linear in the graph). Axes carrying :class:`AxisIgnoredForPropagationTag`
   stop the search, and tags of that type do not spread.
3. :class:`AxisTagAttacher` copies the DAG adding the solved tags to each
   axis (and, with *unify_redn_descrs*, to each reduction descriptor).

Conflicts are pytato's: an axis reachable from two tags gets both; when
they are :class:`~pytools.tag.UniqueTag`\\ s of one family, attaching them
raises :class:`~pytools.tag.NonUniqueTagError` naming the node and axis.

Nodes are keyed by identity throughout (``(array, axis)`` keys compare the
array with ``is``), so the passes stay linear on DAGs with structurally
equal but distinct subgraphs.

.. currentmodule:: pytato_like

.. autofunction:: unify_axes_tags

.. currentmodule:: pytato_like.transform.metadata

.. autoclass:: AxesTagsEquationCollector
    :members: get_var_for_axis, get_var_for_tag, record_equation,
        record_equations_from_axes_tags,
        add_equations_using_index_lambda_version_of_expr
.. autoclass:: AxisTagAttacher
.. autoclass:: AxisIgnoredForPropagationTag
.. autoclass:: AxisMap
.. data:: BINDING_NAME_RESERVED_PATTERN

    A compiled regular expression (pytato's) that fully matches the binding
    names the front end gives the operands of an
    :class:`~pytato_like.array.IndexLambda`: ``_in`` or ``_i`` followed by a
    decimal number without leading zeros (``_in0``, ``_in12``, ``_i3``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar, cast, overload

import pymbolic.primitives as prim
from pytools import UniqueNameGenerator
from pytools.tag import NonUniqueTagError, Tag

from pytato_like._traversal import topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    Einsum,
    IndexLambda,
    NamedArray,
    children_of,
)
from pytato_like.scalar_expr import expression_children
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.lower_to_index_lambda import to_index_lambda
from pytato_like.transform.mapper import ArrayOrNames, Mapper
from pytato_like.utils import are_shape_components_equal, is_one

if TYPE_CHECKING:
    from pymbolic.typing import Expression
    from typing_extensions import Self

    from pytato_like.array import Axis, ReductionDescriptor
    from pytato_like.function import FunctionDefinition

logger = logging.getLogger("pytato_like")

__all__ = [
    "BINDING_NAME_RESERVED_PATTERN",
    "AxesTagsEquationCollector",
    "AxisIgnoredForPropagationTag",
    "AxisMap",
    "AxisTagAttacher",
    "unify_axes_tags",
]

BINDING_NAME_RESERVED_PATTERN = re.compile(r"^(_in?(0|([1-9][0-9]*)))$")

_AXIS_INDEX = re.compile(r"_(?P<index>0|[1-9][0-9]*)")

_V = TypeVar("_V")
_TaggedT = TypeVar("_TaggedT", "Axis", "ReductionDescriptor")
_ArrayOrNamesT = TypeVar("_ArrayOrNamesT", Array, AbstractResultWithNamedArrays)


class AxisIgnoredForPropagationTag(Tag):
    """On an axis: tags neither enter nor leave the axis through
    propagation (it cuts the axis out of the propagation graph). Used, e.g.,
    on the axes of an operator matrix whose rows and columns must not take
    the tags of the vectors it is applied to."""


class AxisMap(Mapping[tuple[Array, int | str], _V]):
    """A mapping keyed by ``(array, axis)`` that compares arrays by identity
    (``axis`` is an int, or a reduction variable's name). ``inverse`` maps
    each value back to its key when the values are unique (the axis
    variables of :class:`AxesTagsEquationCollector`; off with
    *track_inverse* false, e.g. for unhashable values)."""

    def __init__(self, track_inverse: bool = True) -> None:
        self._entries: dict[tuple[int, int | str],
                            tuple[Array, int | str, _V]] = {}
        self.inverse: dict[_V, tuple[Array, int | str]] = {}
        self._track_inverse = track_inverse

    def __getitem__(self, key: tuple[Array, int | str]) -> _V:
        ary, axis = key
        try:
            return self._entries[id(ary), axis][2]
        except KeyError:
            raise KeyError(key) from None

    def __setitem__(self, key: tuple[Array, int | str], value: _V) -> None:
        ary, axis = key
        self._entries[id(ary), axis] = (ary, axis, value)
        if self._track_inverse:
            self.inverse[value] = (ary, axis)

    def __contains__(self, key: object) -> bool:
        ary, axis = cast("tuple[Array, int | str]", key)
        return (id(ary), axis) in self._entries

    def __iter__(self) -> Iterator[tuple[Array, int | str]]:
        return ((ary, axis) for ary, axis, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


# {{{ subscripts in scalar expressions

def _binding_subscripts(expr: Expression) -> tuple[tuple[str, tuple], ...]:
    """``(binding name, index tuple)`` of every subscript of a variable in
    the scalar expression *expr*."""
    # the front end shares expression objects between nodes of the same
    # signature: most nodes of a large DAG hit the cache
    try:
        return _binding_subscripts_cached(expr)
    except TypeError:  # unhashable constant inside
        return _walk_binding_subscripts(expr)


@lru_cache(maxsize=4096)
def _binding_subscripts_cached(expr: Expression
                               ) -> tuple[tuple[str, tuple], ...]:
    return _walk_binding_subscripts(expr)


def _walk_binding_subscripts(expr: Expression) -> tuple[tuple[str, tuple], ...]:
    """:func:`_binding_subscripts`, walking *expr* with a stack."""
    result = []
    stack: list[object] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, prim.Subscript) and isinstance(e.aggregate, prim.Variable):
            index = e.index if isinstance(e.index, tuple) else (e.index,)
            result.append((e.aggregate.name, index))
        stack.extend(expression_children(e))
    return tuple(result)

# }}}


# {{{ equation collection

def _kept_reshape_axes(in_shape, out_shape) -> list[tuple[int, int]]:
    """``(input axis, output axis)`` pairs a reshape keeps: when the two
    shapes only differ by unit axes, the i-th non-unit input axis is the
    i-th non-unit output axis (in C and in F order alike)."""
    ins = [i for i, d in enumerate(in_shape) if not is_one(d)]
    outs = [i for i, d in enumerate(out_shape) if not is_one(d)]
    if len(ins) != len(outs) or not all(
            are_shape_components_equal(in_shape[i], out_shape[o])
            for i, o in zip(ins, outs)):
        return []
    return list(zip(ins, outs))


def _data_children(expr: ArrayOrNames) -> tuple[Array, ...]:
    if isinstance(expr, Array):
        return children_of(expr, include_shape=False)
    if isinstance(expr, AbstractResultWithNamedArrays):
        # (the containers that are not arrays are DictOfNamedArrays)
        return tuple(cast("DictOfNamedArrays", expr)._data.values())
    return ()


class AxesTagsEquationCollector(Mapper):
    """Records the equations between axes (and known tags) of a DAG; call
    it on an array or a :class:`~pytato_like.DictOfNamedArrays`.

    Subclass it to change propagation rules: override ``map_*`` methods
    (calling ``self.rec`` on children, as in pytato: children are visited
    before their users, so those calls return at once) and record equations
    with :meth:`record_equation` between variables from
    :meth:`get_var_for_axis`.

    .. attribute:: tag_t

        The type of the tags to propagate.

    .. attribute:: equations

        A list of ``(u, v)`` pairs of variable names, each meaning
        :math:`u \\doteq v`.

    .. attribute:: known_tag_to_var

        Tag -> the variable standing for it.

    .. attribute:: axis_to_var

        An :class:`AxisMap`: ``(array, iaxis)`` -> the variable standing for
        that axis (``iaxis`` a reduction variable's name for a reduction
        axis); its ``inverse`` maps variables back.
    """

    def __init__(self, tag_t: type[Tag]) -> None:
        super().__init__()
        self.tag_t = tag_t
        self._visited: set[int] = set()
        self._visited_nodes: list[ArrayOrNames] = []  # keeps the ids unique
        self.var_name_gen = UniqueNameGenerator()
        self.axis_to_var: AxisMap[str] = AxisMap()
        self.known_tag_to_var: dict[Tag, str] = {}
        self.equations: list[tuple[str, str]] = []
        self._counter = 0

    # {{{ unification helpers

    def get_var_for_axis(self, ary: Array, iaxis: int | str) -> str:
        """The variable standing for axis *iaxis* of *ary*."""
        try:
            return self.axis_to_var[ary, iaxis]
        except KeyError:
            # numbered directly: "ax<k>" never collides with "tag<k>"
            var = f"ax{self._counter}"
            self._counter += 1
            self.axis_to_var[ary, iaxis] = var
            return var

    def get_var_for_tag(self, tag: Tag) -> str:
        """The variable standing for *tag*."""
        try:
            return self.known_tag_to_var[tag]
        except KeyError:
            var = self.known_tag_to_var[tag] = f"tag{len(self.known_tag_to_var)}"
            return var

    def record_equation(self, lhs: str, rhs: str) -> None:
        """Record :math:`\\text{lhs} \\doteq \\text{rhs}`."""
        self.equations.append((lhs, rhs))

    def record_equations_from_axes_tags(self, ary: Array) -> None:
        """Record ``axis = tag`` for every tag of type :attr:`tag_t` on an
        axis of *ary* (and on its reduction descriptors)."""
        for iaxis, axis in enumerate(ary.axes):
            for tag in axis.tags:
                if isinstance(tag, self.tag_t):
                    self.record_equation(self.get_var_for_axis(ary, iaxis),
                                         self.get_var_for_tag(tag))
        descrs: Mapping[str, ReductionDescriptor] = {}
        if isinstance(ary, IndexLambda):
            descrs = ary.var_to_reduction_descr
        elif isinstance(ary, Einsum):
            descrs = {f"_r{axis.dim}": descr
                      for axis, descr in ary.redn_axis_to_redn_descr.items()}
        for name, descr in descrs.items():
            for tag in descr.tags:
                if isinstance(tag, self.tag_t):
                    self.record_equation(self.get_var_for_axis(ary, name),
                                         self.get_var_for_tag(tag))

    def add_equations_using_index_lambda_version_of_expr(self, expr: Array) -> None:
        """Equate each operand axis subscripted by output index ``_k`` (with
        the same extent) with output axis ``k``, and each operand axis
        subscripted by a reduction variable with that reduction, reading
        the index lambda *expr* lowers to."""
        lam = expr if isinstance(expr, IndexLambda) else to_index_lambda(expr)
        for name, index in _binding_subscripts(lam.expr):
            binding = lam.bindings.get(name)
            if binding is None:
                continue
            for iaxis, idx in enumerate(index):
                if not isinstance(idx, prim.Variable) or iaxis >= binding.ndim:
                    continue
                match = _AXIS_INDEX.fullmatch(idx.name)
                if match:
                    out_axis = int(match.group("index"))
                    if are_shape_components_equal(lam.shape[out_axis],
                                                  binding.shape[iaxis]):
                        self.record_equation(
                            self.get_var_for_axis(binding, iaxis),
                            self.get_var_for_axis(expr, out_axis))
                elif idx.name in lam.var_to_reduction_descr:
                    self.record_equation(self.get_var_for_axis(binding, iaxis),
                                         self.get_var_for_axis(expr, idx.name))
                # other index expressions (shifted, data-dependent) relate
                # no axes

    def _equate_all_axes(self, a: Array, b: Array) -> None:
        for iaxis in range(a.ndim):
            self.record_equation(self.get_var_for_axis(a, iaxis),
                                 self.get_var_for_axis(b, iaxis))

    # }}}

    # {{{ traversal

    def __call__(self, expr: ArrayOrNames) -> None:
        # (topological_order is annotated for arrays; with _data_children
        # it walks a DictOfNamedArrays root as well)
        roots = cast("list[Array]", [expr])
        for node in topological_order(roots, _data_children):

            self.rec(node)

    def rec(self, expr: ArrayOrNames) -> None:
        if id(expr) in self._visited:
            return
        if isinstance(expr, Array):
            self.record_equations_from_axes_tags(expr)
        Mapper.rec(self, expr)
        self._visited.add(id(expr))
        self._visited_nodes.append(expr)

    # }}}

    # {{{ mapper methods

    def _map_input(self, expr: Array) -> None:
        """Inputs have no operands: nothing to equate."""

    map_placeholder = _map_input
    map_data_wrapper = _map_input
    map_size_param = _map_input
    map_distributed_recv = _map_input

    def _map_lowered(self, expr: Array) -> None:
        for child in children_of(expr, include_shape=False):
            self.rec(child)
        self.add_equations_using_index_lambda_version_of_expr(expr)

    map_index_lambda = _map_lowered
    map_einsum = _map_lowered
    map_stack = _map_lowered
    map_concatenate = _map_lowered
    map_axis_permutation = _map_lowered
    map_roll = _map_lowered
    map_basic_index = _map_lowered
    map_contiguous_advanced_index = _map_lowered
    map_non_contiguous_advanced_index = _map_lowered

    def map_reshape(self, expr) -> None:
        """Only axes that gain or lose unit axes around them are kept."""
        self.rec(expr.array)
        for i_in, i_out in _kept_reshape_axes(expr.array.shape, expr.shape):
            self.record_equation(self.get_var_for_axis(expr.array, i_in),
                                 self.get_var_for_axis(expr, i_out))

    def map_named_array(self, expr: NamedArray) -> None:
        self.rec(expr.expr)
        self._equate_all_axes(expr, expr.expr)

    def map_to_device(self, expr) -> None:
        self.rec(expr.array)
        self._equate_all_axes(expr, expr.array)

    def map_distributed_send_ref_holder(self, expr) -> None:
        self.rec(expr.passthrough_data)
        self.rec(expr.send_data)
        self._equate_all_axes(expr, expr.passthrough_data)

    def map_dict_of_named_arrays(self, expr: DictOfNamedArrays) -> None:
        for _, ary in sorted(expr._data.items()):
            self.rec(ary)

    # }}}

# }}}


# {{{ attaching the solved tags

class AxisTagAttacher(CopyMapper):
    """Copies a DAG adding ``axis_to_tags[array, iaxis]`` to each axis
    (a mapping keyed by ``(array, iaxis)``, arrays compared by identity
    when it is an :class:`AxisMap`). With *tag_corresponding_redn_descr*,
    reduction descriptors of index lambdas get ``axis_to_tags[array,
    redn_var]`` and those of einsums the tags of the operand axes they
    reduce."""

    def __init__(self, axis_to_tags: Mapping[tuple[Array, int | str],
                                             Collection[Tag]],
                 tag_corresponding_redn_descr: bool) -> None:
        super().__init__()
        self.axis_to_tags = axis_to_tags
        self.tag_corresponding_redn_descr = tag_corresponding_redn_descr

    def clone_for_callee(self, function: FunctionDefinition) -> Self:
        return type(self)(self.axis_to_tags, self.tag_corresponding_redn_descr)

    def _tags_for(self, ary: Array, axis: int | str) -> frozenset[Tag]:
        return frozenset(self.axis_to_tags.get((ary, axis), ()))

    @overload
    def _map_uncached(self, expr: Array) -> Array: ...
    @overload
    def _map_uncached(self, expr: AbstractResultWithNamedArrays
                      ) -> AbstractResultWithNamedArrays: ...

    def _map_uncached(self, expr: ArrayOrNames) -> ArrayOrNames:
        if isinstance(expr, Array):
            return self._attach_tags(expr, super()._map_uncached(expr))
        return super()._map_uncached(expr)

    def _attach_tags(self, expr: Array, result: Array) -> Array:
        new_axes = list(result.axes)
        changed = False
        for iaxis, axis in enumerate(result.axes):
            tags = self._tags_for(expr, iaxis)
            if tags <= axis.tags:
                continue
            new_axes[iaxis] = _tagged(axis, tags, expr, f"axis {iaxis}")
            changed = True
        if changed:
            result = result.copy(axes=tuple(new_axes))
        if not self.tag_corresponding_redn_descr:
            return result
        if isinstance(expr, IndexLambda) and expr.var_to_reduction_descr:
            # (result: expr rebuilt, of expr's class)
            descrs = dict(cast(IndexLambda, result).var_to_reduction_descr)
            changed = False
            for name, descr in descrs.items():
                tags = self._tags_for(expr, name)
                if not tags <= descr.tags:
                    descrs[name] = _tagged(descr, tags, expr, f"reduction {name}")
                    changed = True
            if changed:
                result = result.copy(var_to_reduction_descr=descrs)
        elif isinstance(expr, Einsum):
            descrs = dict(cast(Einsum, result).redn_axis_to_redn_descr)
            changed = False
            for arg, access in zip(expr.args, expr.access_descriptors, strict=True):
                for iaxis, descr_key in enumerate(access):
                    if descr_key not in descrs:
                        continue
                    tags = (self._tags_for(arg, iaxis)
                            | self._tags_for(expr, f"_r{descr_key.dim}"))
                    if not tags <= descrs[descr_key].tags:
                        descrs[descr_key] = _tagged(
                            descrs[descr_key], tags, expr,
                            f"reduction _r{descr_key.dim}")
                        changed = True
            if changed:
                result = result.copy(redn_axis_to_redn_descr=descrs)
        return result


def _tagged(metadata: _TaggedT, tags: frozenset[Tag], expr: Array,
            where: str) -> _TaggedT:
    try:
        return metadata.tagged(tags)
    except NonUniqueTagError as err:
        raise NonUniqueTagError(
            f"unify_axes_tags: {where} of {type(expr).__name__} of shape "
            f"{expr.shape} would carry conflicting unique tags "
            f"{sorted(map(repr, tags | metadata.tags))}: {err}") from err

# }}}


def unify_axes_tags(expr: _ArrayOrNamesT, *, tag_t: type[Tag] = Tag,
                    equations_collector_t: type[AxesTagsEquationCollector]
                    = AxesTagsEquationCollector,
                    unify_redn_descrs: bool = True) -> _ArrayOrNamesT:
    """A copy of *expr* (an array or a
    :class:`~pytato_like.DictOfNamedArrays`) whose axes carry, in addition,
    the tags of type *tag_t* that propagate to them along the equations
    recorded by *equations_collector_t* (see the module documentation).
    With *unify_redn_descrs*, reduction descriptors get the tags of the
    axes they reduce.

    An axis reachable from several tags gets all of them; use
    :class:`~pytools.tag.UniqueTag` subclasses for *tag_t* to have such a
    conflict raise :class:`~pytools.tag.NonUniqueTagError`.
    """
    collector = equations_collector_t(tag_t)
    collector(expr)

    graph: dict[str, set[str]] = {}
    for lhs, rhs in collector.equations:
        if lhs != rhs:
            graph.setdefault(lhs, set()).add(rhs)
            graph.setdefault(rhs, set()).add(lhs)

    tag_vars = set(collector.known_tag_to_var.values())
    blocked = {var for tag, var in collector.known_tag_to_var.items()
               if isinstance(tag, AxisIgnoredForPropagationTag)}
    for ary, axis, var in collector.axis_to_var._entries.values():
        if isinstance(axis, int) and any(
                isinstance(t, AxisIgnoredForPropagationTag)
                for t in ary.axes[axis].tags):
            blocked.add(var)

    solved: AxisMap[set[Tag]] = AxisMap(track_inverse=False)

    for tag, source in collector.known_tag_to_var.items():
        if source in blocked:
            continue
        seen = {source}
        stack = [source]
        while stack:
            var = stack.pop()
            for other in graph.get(var, ()):
                if other not in seen and other not in blocked:
                    seen.add(other)
                    stack.append(other)
        for var in seen - tag_vars:
            key = collector.axis_to_var.inverse[var]
            if key in solved:
                solved[key].add(tag)
            else:
                solved[key] = {tag}
    logger.debug("unify_axes_tags: %d equations, %d axes tagged",
                 len(collector.equations), len(solved))

    return AxisTagAttacher(solved, tag_corresponding_redn_descr=unify_redn_descrs
                           )(expr)
