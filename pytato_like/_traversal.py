"""Iterative walks over array DAGs that the IR itself needs.

Everything here uses explicit stacks, so DAGs of any depth are handled at
Python's default recursion limit:

* :func:`topological_order` -- every node once, children before users;
* :func:`structurally_equal_many` -- linear-time structural equality;
* :func:`pickle_dag` -- a flat, index-linked pickle representation.

Nodes are identified by ``id`` during a walk (the roots keep them alive), so
a walk never calls ``__eq__`` and stays linear even when a DAG contains
structurally equal but distinct subgraphs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from pytato_like.array import (
    Array,
    NamedArray,
    children_of,
)

#: What :func:`depth_first` yields when it pauses.
PAUSED: tuple[None, tuple] = (None, ())


def depth_first(roots: Iterable[object],
                children: Callable[[Any], Sequence[Any]] = children_of,
                enter: Callable[[Any], bool] | None = None,
                once: bool = True, pause_after: int | None = None
                ) -> Iterator[tuple[Any, Sequence[Any]]]:
    """The one depth-first walk: ``(node, children(node))`` for every node
    reachable from *roots*, each yielded after all its children were.

    With *once* (the default) a node is entered once (by identity), else
    once per path reaching it. *enter*, if given, is called when a node is
    first reached, before its children; when it returns False the node's
    children are not walked and the node is not yielded. Children are
    walked last first (so a walk needing first-child-first order passes
    reversed children). An explicit stack: any depth works.

    With *pause_after*, :data:`PAUSED` is yielded once after that many
    steps, so that a caller can continue the walk elsewhere (where the
    interpreter's frame stack has room, see
    :func:`~pytato_like.transform._graph.with_stack_headroom`).
    """
    if once and enter is None and pause_after is None:
        # the common walk, without the tests for the options per step
        yield from _depth_first_once(roots, children)
        return
    visited: set[int] = set()
    seen = visited.__contains__
    mark = visited.add
    stack: list[tuple[object, Sequence[object] | None]] = [
        (root, None) for root in reversed(list(roots))]
    pop, push = stack.pop, stack.append
    while stack:
        if pause_after is not None:
            pause_after -= 1
            if pause_after < 0:
                pause_after = None
                yield PAUSED
        node, kids = pop()
        if kids is not None:
            yield node, kids
            continue
        if once:
            if seen(id(node)):
                continue
            mark(id(node))
        if enter is not None and not enter(node):
            continue
        kids = children(node)
        push((node, kids))
        for child in kids:
            if not (once and seen(id(child))):
                push((child, None))


def _depth_first_once(roots: Iterable[object],
                      children: Callable[[Any], Sequence[Any]]
                      ) -> Iterator[tuple[Any, Sequence[Any]]]:
    """:func:`depth_first` with its defaults (each node once, no *enter*,
    no pause): the walk most passes make, kept to the fewest steps."""
    visited: set[int] = set()
    seen = visited.__contains__
    mark = visited.add
    stack: list[tuple[object, Sequence[object] | None]] = [
        (root, None) for root in reversed(list(roots))]
    pop, push = stack.pop, stack.append
    while stack:
        node, kids = pop()
        if kids is not None:
            yield node, kids
            continue
        key = id(node)
        if seen(key):
            continue
        mark(key)
        kids = children(node)
        push((node, kids))
        for child in kids:
            if not seen(id(child)):
                push((child, None))


def topological_order(roots: Iterable[Array],
                      children: Callable[[Array], Sequence[Array]] = children_of
                      ) -> list[Array]:
    """All nodes reachable from *roots* through *children* (by default every
    array a node refers to), each once, every node after all the nodes it
    refers to."""
    # depth_first's walk, appending instead of yielding (this order is
    # asked for several times per compile)
    order: list[Array] = []
    append = order.append
    visited: set[int] = set()
    seen = visited.__contains__
    mark = visited.add
    stack: list[tuple[Array, bool]] = [(root, False)
                                       for root in reversed(list(roots))]
    pop, push = stack.pop, stack.append
    while stack:
        node, done = pop()
        if done:
            append(node)
            continue
        key = id(node)
        if seen(key):
            continue
        mark(key)
        push((node, True))
        for child in children(node):
            if not seen(id(child)):
                push((child, False))
    return order


def structurally_equal(a: Array, b: Array) -> bool:
    """Whether the DAGs rooted at *a* and *b* have the same structure."""
    return structurally_equal_many([a], [b])


def structurally_equal_many(xs: list[Array], ys: list[Array]) -> bool:
    """Whether ``xs[i]`` and ``ys[i]`` are structurally equal for all *i*.

    Each pair of nodes is compared once, so the cost is linear in the number
    of node pairs visited (at most the size of the smaller DAG when the two
    are equal)."""
    compared: set[tuple[int, int]] = set()
    stack = list(zip(xs, ys, strict=True))
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        key = (id(a), id(b))
        if key in compared:
            continue
        compared.add(key)
        if a._hash != b._hash or not fields_pair(a, b, stack):
            return False
    return True


# class -> (all its fields at once, each field's pair function or None
# for a value compared with ==)
_PAIR_PLANS: dict[type, tuple[Callable[[Array], tuple], tuple]] = {}


def _pair_plan(cls: type) -> tuple[Callable[[Array], tuple], tuple]:
    fields = cls._fields  # type: ignore[attr-defined]
    names = [name for name, _ in fields]
    get: Callable[[Array], tuple]
    if len(names) > 1:
        get = operator.attrgetter(*names)
    else:
        # (attrgetter of one name gives the value, not a 1-tuple)
        getters = [operator.attrgetter(name) for name in names]

        def get(node: Array) -> tuple:
            return tuple(read(node) for read in getters)
    pair_of = tuple(None if not kind.holds_arrays and not kind.by_identity
                    else kind.pair for _, kind in fields)
    _PAIR_PLANS[cls] = plan = (get, pair_of)
    return plan


def fields_pair(a: Array, b: Array, pairs: list[tuple[Array, Array]]) -> bool:
    """Whether nodes *a* and *b* are alike but for the arrays they refer
    to: the same class, field values, axes and tags. If so, their arrays,
    position by position, are appended to *pairs* (for a named array, its
    array)."""
    cls = type(a)
    if cls is not type(b) or a.axes != b.axes or a.tags != b.tags:
        return False
    if cls is NamedArray:
        na = cast("NamedArray", a)  # (so is b: same type)
        nb = cast("NamedArray", b)
        if na.name != nb.name:
            return False
        pairs.append((na.expr, nb.expr))
        return True
    get, pair_of = _PAIR_PLANS.get(cls) or _pair_plan(cls)
    # (one attrgetter call per node; a value field shared by both nodes,
    # as the expressions of a time loop's steps are, is one identity test)
    for pair, va, vb in zip(pair_of, get(a), get(b)):
        if pair is None:
            if va is not vb and va != vb:
                return False
        elif not pair(va, vb, pairs):
            return False
    return True


# {{{ pickling

class ArrayRef:
    """Stands for the array numbered *i* (a position in a flat pickle, a
    structural class, ...) inside a field value; equal to refs of the same
    number only, never to an int, so it cannot pass for a shape entry."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i

    def __eq__(self, other: object) -> bool:
        return type(other) is ArrayRef and other.i == self.i

    def __hash__(self) -> int:
        return hash((ArrayRef, self.i))

    def __repr__(self) -> str:
        return f"@{self.i}"

    def __reduce__(self):
        return (ArrayRef, (self.i,))


def flatten_dags(roots: list[Array]) -> tuple[list[tuple], list[int]]:
    """A flat description of the DAGs under *roots*: one record per node
    (children referenced by position) and the positions of the roots."""
    order = topological_order(roots)
    index = {id(node): i for i, node in enumerate(order)}
    records = []
    for node in order:
        if type(node) is NamedArray:
            fields = (node._container, node.name)
        else:
            def ref(ary: Array) -> ArrayRef:
                return ArrayRef(index[id(ary)])
            fields = tuple(kind.map(getattr(node, name), ref)
                           for name, kind in node._fields)
        records.append((type(node), fields, node.axes, node.tags))
    return records, [index[id(r)] for r in roots]


def unflatten_dags(records: list[tuple], root_positions: list[int]) -> list[Array]:
    """Inverse of :func:`flatten_dags`."""
    built: list[Array] = []
    for cls, fields, axes, tags in records:
        if cls is NamedArray:
            container, name = fields
            node = container[name]
            if axes != node.axes or tags != node.tags:
                node = NamedArray(container, name, axes=axes, tags=tags)
        else:
            def deref(r: ArrayRef) -> Array:
                return built[r.i]
            kwargs = {name: kind.map(value, deref, ArrayRef)
                      for (name, kind), value in zip(cls._fields, fields,
                                                     strict=True)}
            node = cls(**kwargs, axes=axes, tags=tags)
        built.append(node)
    return [built[i] for i in root_positions]


def _unpickle_array(records, root_position):
    return unflatten_dags(records, [root_position])[0]


def pickle_dag(root: Array):
    """``__reduce__`` value for *root*: the whole DAG as one flat record
    list, so pickling never recurses through the graph."""
    records, (root_position,) = flatten_dags([root])
    return (_unpickle_array, (records, root_position))

# }}}
