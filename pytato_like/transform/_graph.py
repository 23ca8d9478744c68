"""Graph helpers shared by the transforms and analyses (private).

* :func:`walk_children` -- what a mapper descends into from a node;
* :func:`data_operands` -- the arrays whose *values* a node reads (no shape
  expressions), used by materialization;
* :func:`toposort` -- children-first order for any children function;
* :func:`structural_representatives` -- for each node, the first node of
  the DAG that is structurally equal (``==``) to it, found in linear time;
* :func:`with_stack_headroom` -- run a long loop where CPython's frame stack
  has room.

All of them are iterative, so DAG depth never reaches Python's recursion
limit.

.. autofunction:: walk_children
.. autofunction:: data_operands
.. autofunction:: toposort
.. autofunction:: structural_representatives
.. autofunction:: with_stack_headroom
.. autofunction:: stack_headroom
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import ParamSpec, TypeVar, cast

from pytato_like._traversal import ArrayRef, topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    NamedArray,
    array_fields,  # noqa: F401  (re-exported for the copy mappers)
    children_of,
)

_EMPTY: tuple = ()

_P = ParamSpec("_P")
_R = TypeVar("_R")

def walk_children(expr: object) -> tuple:
    """What the built-in mappers visit below *expr*: for an array every array
    it refers to (as :func:`~pytato_like.array.children_of`: operands, shape
    expressions, index arrays, in field order; a
    :class:`~pytato_like.array.NamedArray` refers to the array it names);
    for a :class:`~pytato_like.array.DictOfNamedArrays` its arrays."""
    if isinstance(expr, Array):
        return children_of(expr)
    if isinstance(expr, AbstractResultWithNamedArrays):
        # (the containers that are not arrays are DictOfNamedArrays)
        return tuple(cast("DictOfNamedArrays", expr)._data.values())
    return _EMPTY


def data_operands(expr: Array) -> tuple[Array, ...]:
    """The arrays whose values *expr* reads: operands and index arrays, but
    not the size expressions in shapes."""
    return children_of(expr, include_shape=False)


def toposort(roots: Iterable[Array],
             children: Callable[[Array], Sequence[Array]]) -> list[Array]:
    """Every node reachable from *roots* through *children*, once each
    (by identity), children before their users."""
    return topological_order(roots, children)


def _structural_key(node: Array, class_of: Callable[[Array], int]) -> tuple:
    """Everything ``==`` compares, with children replaced by their class
    numbers."""
    t = type(node)
    if t is NamedArray:
        named = cast(NamedArray, node)
        return (t, node.axes, node.tags, named.name, class_of(named.expr))

    def ref(ary: Array) -> ArrayRef:
        return ArrayRef(class_of(ary))
    return (t, node.axes, node.tags,
            *(kind.canonical(getattr(node, name), ref)
              for name, kind in t._fields))


def structural_representatives(order: list[Array]) -> list[Array]:
    """For each node of *order* (children before users, as returned by
    :func:`~pytato_like._traversal.topological_order`), the first node of
    *order* that is structurally equal to it.

    Why: comparing two distinct-but-equal deep DAGs with ``==`` is linear,
    so putting many such nodes into one ``dict``/``set`` could be quadratic.
    Here nodes are bucketed by their (precomputed) hash, which equal nodes
    share; only within a bucket are keys compared, made of the node's type,
    metadata, non-array field values and the class numbers of its children
    (known already: children come first). Equal keys exactly when the nodes
    are equal; linear overall, and one dictionary operation per node when
    no two nodes share a hash.
    """
    reps: list[Array] = []
    # a node's class is that of the first class of its hash, unless noted
    # in other_class_of_id (hash collisions of unequal nodes)
    first_class_of_hash: dict[int, int] = {}
    other_class_of_id: dict[int, int] = {}
    more_classes_of_hash: dict[int, list[int]] = {}
    key_of_class: dict[int, tuple] = {}

    def class_of(node: Array) -> int:
        cls = other_class_of_id.get(id(node))
        return first_class_of_hash[node._hash] if cls is None else cls

    result: list[Array] = []
    for node in order:
        h = node._hash
        first = first_class_of_hash.get(h)
        if first is None:
            first_class_of_hash[h] = len(reps)
            reps.append(node)
            result.append(node)
            continue
        key = _structural_key(node, class_of)
        for candidate in (first, *more_classes_of_hash.get(h, ())):
            candidate_key = key_of_class.get(candidate)
            if candidate_key is None:
                candidate_key = key_of_class[candidate] = _structural_key(
                    reps[candidate], class_of)
            if candidate_key == key:
                cls = candidate
                break
        else:
            cls = len(reps)
            reps.append(node)
            more_classes_of_hash.setdefault(h, []).append(cls)
            key_of_class[cls] = key
        if cls != first:
            other_class_of_id[id(node)] = cls
        result.append(reps[cls])
    return result


# {{{ interpreter stack headroom for long loops

# CPython 3.11+ keeps Python frames in a chunked "data stack" and frees a
# chunk as soon as the frame at its base returns. A loop that runs just
# below a chunk boundary and calls a few frames per iteration therefore
# maps and unmaps a chunk (two system calls) on *every* iteration: measured
# here, a 4x slowdown of a whole-DAG walk, depending only on how deep the
# caller's stack happened to be. Calling the loop through two frames that
# are each larger than half a chunk guarantees it starts with more than
# 14 KB of free chunk: either one of them lands at the base of a fresh
# chunk (of at least 32 KB) or both fit in the current one.

_SPACER_LOCALS = 1100  # slots of 8 bytes; a default chunk has 2048

@functools.cache
def _spacer() -> Callable[..., object]:
    # made at the first walk, not at import (compiling its 1100 locals
    # costs ~1.5 ms, which a warm start that walks nothing need not pay)
    namespace: dict[str, object] = {}
    exec(  # noqa: S102 -- builds a function with a large frame, no user input
        "def _spacer(fn, *args):\n"
        "    return fn(*args)\n"
        "    " + " = ".join(f"_slot{i}" for i in range(_SPACER_LOCALS))
        + " = None\n", namespace)
    return cast("Callable[..., object]", namespace["_spacer"])


def with_stack_headroom(fn: Callable[..., _R], *args: object) -> _R:
    """``fn(*args)``, called where the interpreter's frame stack has room
    for the frames *fn*'s loop creates (costs a few microseconds: use it
    for loops over a whole DAG, not per node)."""
    spacer = _spacer()
    return cast("_R", spacer(spacer, fn, *args))


def stack_headroom(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: run *func* through :func:`with_stack_headroom`."""
    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return with_stack_headroom(lambda: func(*args, **kwargs))
    return wrapper

# }}}


