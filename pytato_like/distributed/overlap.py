"""Splitting arrays into boundary and interior, so that messages overlap
with the interior's computation.

A stencil step written as a whole -- ``u + c * (ext[:-2] - 2 * u +
ext[2:])`` with ``ext = concatenate([ghost_l, u, ghost_r])`` -- makes the
whole new field depend on the halos received this step. The partitioner
would then compute every cell after the halos arrive, and the part that
sends the next step's boundary cells would compute the whole field first.
Only a few cells at each end read the halos, though. This pass finds such
arrays and rewrites each as ``concatenate([head, interior, tail])``:

* *head* and *tail* are the cells that read this step's receives, computed
  from slices of the operands (the slices pushed down through the
  elementwise expressions, slices and concatenations below);
* *interior* is computed from the earlier step's values only, tagged
  :class:`~pytato_like.tags.ImplStored`, so the partitioner computes it in
  the part that runs while this step's messages travel;
* slices of the rewritten array (the next step's sends of its boundary
  cells, the next step's stencil reads) are pushed down to the pieces they
  need, so the sending part computes the boundary cells only.

The values are unchanged, bit for bit (each cell is the same expression of
the same operands). Whether :func:`~pytato_like.find_distributed_partition`
keeps the split for a DAG is decided by the cost model of
:mod:`~pytato_like.distributed.overlap_cost` (``split_interior="auto"``).

**Deep interiors** (``deep_interiors=True``, the default). Split step by
step, step *k*'s interior still waits for step *k-1*'s boundary, so a chain
of *S* steps costs *S* interior computations, each in its own part. But
the rows of step *k* farther than *k* stencil reaches from the ends read
no halo at all, of any step. So an array whose first-axis ends alone
depend on receives of *any* time is split instead into

* its *deep* rows, past those ends: computed from the deep rows of the
  arrays it reads, so from no receive. They are not stored: the
  partitioner computes them with their first user, in the end the
  outputs' own deep rows -- outputs are split deep too -- in the last
  part, where the time tiles of
  :mod:`~pytato_like.target.loopy.time_tiles` fuse every step's deep
  rows into the kernel that writes the outputs' (stored in a part of
  their own, the last step's deep rows would be written out and read
  back, one more pass over the fields);
* two *strips* of boundary rows, each as wide as the strips of its readers
  need (one more stencil reach per earlier step): computed from the strips
  of the arrays it reads, never from their deep rows, so that a strip
  waits for its own step's receives only. The rows where a strip and the
  deep rows overlap are computed twice (the same expression of the same
  values: the same bits).

Which arrays are split deep: those wanted early (as in the step-by-step
split) and the outputs -- an output that is a row slice stands for the
array it views -- and every array computed once for several users that
their deep rows read (found by a walk through send holders, row slices,
concatenations and index lambdas of one user): unsplit, such an array
would be computed whole, after the receives. That is how steps written on
a halo-extended field (``ext = ext[1:-1] + c * (ext[:-2] - 2 * ext[1:-1]
+ ext[2:])``, several steps per exchange) are split: each step reads the
one before through slices only. A slice of a deep-split array that spans
several of its pieces keeps the pieces (their rows shifted to the
slice's), so rows wanted of the slice are read from the one piece that
holds them: a strip from a strip, never from the deep rows. The user's
:class:`~pytato_like.tags.ImplStored` on a deep-split array stays with its
strips; its deep rows are not stored (written out, they would cost a pass
over memory per step).

The strip widths come from a pass from the outputs back to the inputs
that carries each strip's rows down the way row slices are pushed (index
lambdas read at row offsets, row slices, concatenations; an array with
several users that is not split itself is computed whole, and its
readers' strips read it as it is). An array whose strips would take more
than a quarter of its rows, or whose deep rows would still depend on a
receive, is split step by step as above. An output is split deep only
if that widens no other array's strips past that quarter (its strips make
every earlier strip one stencil reach wider); it is never split step by
step (its interior would only be copied into it).

How it decides, along the first axis of each array (the one a 1-D domain
decomposition splits):

1. Every array has a *time*, as in the partitioner: 0 without receives, else
   one more than the latest communication batch among the receives it
   depends on (given by *source_time*).
2. Every array gets the rows (first-axis indices) that depend on receives
   of its own time, kept as a prefix and a suffix ("edge") when they are,
   else "all". Rules: a receive is all of it; an elementwise or index
   expression reading an operand at row ``i + c`` shifts the operand's
   edges by ``-c``; a slice clips them; a concatenation along the axis
   places them; any other use of such an operand (a transpose, a
   reduction over the axis, a roll along it, an integer row) makes all rows
   depend.
3. An array with edge rows and an interior of at least
   *min_interior_elements* elements (and no smaller than its edges) is
   split if the interior is worth computing early: it is used at a later
   time, by a send, or by more than one array (so pushing slices into it
   duplicates no work).

The passes are iterative (topological orders and an explicit work stack),
so DAG depth never reaches Python's recursion limit.

.. autofunction:: split_interior_from_boundary
.. data:: MIN_INTERIOR_ELEMENTS
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import pymbolic.primitives as prim

from pytato_like.array import (
    Array,
    BasicIndex,
    Concatenate,
    DictOfNamedArrays,
    IndexLambda,
    NormalizedSlice,
)
from pytato_like.distributed.nodes import (
    DistributedSend,
    DistributedSendRefHolder,
)
from pytato_like.scalar_expr import (
    INT_CLASSES,
    IdentityMapper,
    WalkMapper,
    affine_form,
    index_var,
)
from pytato_like.tags import ImplStored
from pytato_like.transform._graph import toposort, walk_children
from pytato_like.transform.copy import rebuild_with

if TYPE_CHECKING:
    from pytato_like.scalar_expr import ScalarExpression
    from pytato_like.tags import Tag

#: The smallest interior (elements) worth a split: below it the two extra
#: boundary kernels cost more than the overlap gains.
MIN_INTERIOR_ELEMENTS = 32768

#: every row depends on this time's receives
ALL = "all"
#: the rows that depend on this time's receives: None (no row), ALL, or
#: ``(p, s)``: the first *p* and the last *s* rows (Any, not that union:
#: the code tells them apart with ``is ALL``, which mypy does not narrow on)
Rows = Any

_ROW = index_var(0)
_ROW_NAME = (_ROW.name,)


# {{{ reading the first axis of index lambdas

def _row_offset(index: ScalarExpression | None) -> int | None:
    """``c`` if *index* is ``_0 + c`` (integer *c*), else None."""
    # (affine_form answers None for None too, as for any non-affine value)
    form = affine_form(index, _ROW_NAME)  # type: ignore[arg-type]
    return form[1] if form is not None and form[0] == {"_0": 1} else None


class _Accesses(WalkMapper):
    """For each binding name, how its first axis is read: a list with an
    offset ``c`` per read at row ``_0 + c``, ``("row", k)`` per read of the
    fixed row *k*, and ``None`` per read of any other kind."""

    def __init__(self, names) -> None:
        super().__init__()
        self.names = names
        self.reads: dict[str, list] = {}

    def map_variable(self, expr: prim.Variable) -> None:
        if expr.name in self.names:  # used whole: a 0-d binding
            self.reads.setdefault(expr.name, []).append(None)

    def map_subscript(self, expr: prim.Subscript) -> None:
        agg = expr.aggregate
        idx = expr.index_tuple
        if isinstance(agg, prim.Variable) and agg.name in self.names:
            first = idx[0] if idx else None
            offset: int | tuple[str, int] | None = _row_offset(first)
            if offset is None and isinstance(first, INT_CLASSES):
                offset = ("row", int(first))
            self.reads.setdefault(agg.name, []).append(offset)
        else:
            self.rec(agg)
        for i in idx:
            self.rec(i)


@functools.lru_cache(maxsize=4096)
def _reads(expr: ScalarExpression, names: frozenset[str]
           ) -> dict[str, tuple]:
    """:class:`_Accesses` of *expr* (the same expressions recur across a
    DAG's index lambdas)."""
    walker = _Accesses(names)
    walker(expr)
    return {name: tuple(reads) for name, reads in walker.reads.items()}


@functools.lru_cache(maxsize=4096)
def _shift_rows(expr: ScalarExpression, a: int,
                starts: tuple[tuple[str, int], ...]) -> ScalarExpression:
    return _ShiftRows(a, dict(starts))(expr)


class _ShiftRows(IdentityMapper):
    """The expression for rows ``a + _0``: every ``_0`` shifted by *a*, and
    reads of the bindings in *starts* (now sliced from that row on)
    re-based."""

    def __init__(self, a: int, starts: Mapping[str, int]) -> None:
        super().__init__()
        self.a = a
        self.starts = starts

    def map_variable(self, expr: prim.Variable) -> ScalarExpression:
        if expr == _ROW and self.a:
            return prim.Sum((_ROW, self.a))
        return expr

    def map_subscript(self, expr: prim.Subscript) -> ScalarExpression:
        agg = expr.aggregate
        if isinstance(agg, prim.Variable) and agg.name in self.starts:
            idx = expr.index_tuple
            offset = _row_offset(idx[0])
            assert offset is not None  # (sliced bindings are read at rows)
            c = self.a + offset - self.starts[agg.name]
            first = prim.Sum((_ROW, c)) if c else _ROW
            return prim.Subscript(agg, (first, *(self.rec(i) for i in idx[1:])))
        return super().map_subscript(expr)

# }}}


def _is_row_slice(index: object) -> bool:
    """Whether *index* takes consecutive rows ``start:stop``."""
    return (isinstance(index, NormalizedSlice) and index.step == 1
            and index.stop is not None)


def _index_rest(rows: Array, n: int, rest: tuple, tags: frozenset[Tag]
                ) -> Array:
    """*rows* (an array of *n* rows) indexed on its other axes by *rest*:
    *rows* itself when *rest* takes them whole."""
    if all(isinstance(i, NormalizedSlice) and i.step == 1 and i.start == 0
           and i.stop == d for i, d in zip(rest, rows.shape[1:], strict=True)):
        return rows
    return BasicIndex(rows, (NormalizedSlice(0, n, 1), *rest), tags=tags)


def _rows_len(ary: object) -> int | None:
    if not isinstance(ary, Array) or not ary.shape:
        return None
    n = ary.shape[0]
    return n if isinstance(n, int) else None


def _edges(intervals: list[tuple[int, int]], n: int) -> Rows:
    """The rows in *intervals* (half-open) as edges, or ALL."""
    spans = sorted((lo, hi) for lo, hi in intervals if lo < hi)
    if not spans:
        return None
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    head = merged[0][1] if merged[0][0] == 0 else 0
    tail = n - merged[-1][0] if merged[-1][1] >= n else 0
    inner = [m for m in merged if m[0] > 0 and m[1] < n]
    if inner or head + tail >= n:
        return ALL
    return (head, tail)


def _slice_rows(n: int, p: int, s: int, start: int, length: int) -> Rows:
    """The rows of ``x[start:start + length]`` from the rows *p*, *s* of
    ``x`` (of *n* rows)."""
    return _edges([(0, p - start), (n - s - start, length)], length)


class _Splitter:
    """The state of one split: every array's time and rows (by id), the
    row slices pushed down so far, and the splits made."""

    def __init__(self, source_time: Callable[[Array], int | None],
                 min_interior_elements: int, any_time: bool = False) -> None:
        self.source_time = source_time
        self.min_interior = min_interior_elements
        #: rows that depend on receives of any time, not only of their own
        #: (for finding deep interiors)
        self.any_time = any_time
        #: id of a deep-split array -> ``(lo, hi, piece)``: rows lo:hi of
        #: the array are the rows of *piece* (its deep interior and its
        #: strips, which overlap); row slices are served from them
        self.covers: dict[int, list[tuple[int, int, Array]]] = {}
        # by id of every node built or kept (references held in _keep)
        self.time: dict[int, int] = {}
        self.rows: dict[int, Rows] = {}
        self._keep: list[object] = []
        self._pushed: dict[tuple, Array] = {}
        #: ids of the arrays with several users (computed once, so slices
        #: are views of them, never recomputed pieces)
        self.shared: set[int] = set()
        self.n_split = 0

    # {{{ time and rows of a node from its children

    def annotate(self, node: object) -> None:
        key = id(node)
        if key in self.time:
            return
        self._keep.append(node)
        src = self.source_time(node) if isinstance(node, Array) else None
        kids = walk_children(node)
        if src is not None:
            t = src
        else:
            t = max((self.time[id(k)] for k in kids), default=0)
        self.time[key] = t
        if src is not None:
            self.rows[key] = ALL
            return
        if isinstance(node, DistributedSendRefHolder):
            # (the array it passes on: its send is a reader of its own)
            self.rows[key] = self.rows[id(node.passthrough_data)]
            return
        self.rows[key] = self._rows_from_children(node, t, kids)

    def _child_rows(self, child: object, t: int) -> Rows:
        if self.any_time:
            return self.rows[id(child)]
        return self.rows[id(child)] if self.time[id(child)] == t else None

    def _rows_from_children(self, node: object, t: int, kids) -> Rows:
        if all(self._child_rows(k, t) is None for k in kids):
            return None
        n = _rows_len(node)
        if n is None:
            return ALL
        if isinstance(node, Concatenate):
            spans = []
            offset = 0
            for piece in node.arrays:
                m = piece.shape[node.axis] if node.axis == 0 else n
                r = self._child_rows(piece, t)
                if r is ALL:
                    spans.append((offset, offset + m))
                elif r is not None:
                    spans += [(offset, offset + r[0]),
                              (offset + m - r[1], offset + m)]
                if node.axis == 0:
                    offset += m
            return _edges(spans, n)
        if isinstance(node, BasicIndex):
            r = self._child_rows(node.array, t)
            first = node.indices[0]
            if _is_row_slice(first) and r is not ALL:
                na = node.array.shape[0]
                return _slice_rows(na, r[0], r[1], first.start, n)
            return ALL
        if isinstance(node, IndexLambda):
            reads = _reads(node.expr, frozenset(node.bindings))
            spans = []
            for name, binding in node.bindings.items():
                r = self._child_rows(binding, t)
                if r is None:
                    continue
                nb = _rows_len(binding)
                for read in reads.get(name, ()):
                    if nb is None or read is None:
                        return ALL
                    if isinstance(read, tuple):  # one fixed row, every row
                        k = read[1]
                        if r is ALL or k < r[0] or k >= nb - r[1]:
                            return ALL
                        continue
                    if r is ALL:
                        spans.append((-read, nb - read))
                    else:
                        spans += [(0, r[0] - read),
                                  (nb - r[1] - read, n)]
            return _edges([(max(lo, 0), min(hi, n)) for lo, hi in spans], n)
        return ALL

    # }}}

    # {{{ pushing a row slice down

    def rows_of(self, node: Array, a: int, b: int, t: int) -> Array:
        """``node[a:b]`` (along the first axis), built so that it depends on
        time-*t* receives only where its rows do."""
        stack: list[tuple[Array, int, int, bool]] = [(node, a, b, False)]
        while stack:
            ary, lo, hi, expanded = stack.pop()
            key = (id(ary), lo, hi, t)
            if key in self._pushed:
                continue
            requests, build = self._plan(ary, lo, hi, t, ary is node)
            if not expanded and requests:
                stack.append((ary, lo, hi, True))
                stack.extend((r, rlo, rhi, False) for r, rlo, rhi in requests)
                continue
            result = build([self._pushed[(id(r), rlo, rhi, t)]
                            for r, rlo, rhi in requests])
            self.annotate(result)
            if result.dtype != ary.dtype:
                result = result.astype(ary.dtype)
                self.annotate(result)
            # built here, perhaps for several users: later slices view it
            self.shared.add(id(result))
            self._pushed[key] = result
        return self._pushed[(id(node), a, b, t)]

    def _plan(self, ary: Array, a: int, b: int, t: int, root: bool):
        n = _rows_len(ary)
        if n is None or (a == 0 and b == n):
            return [], lambda _: ary
        for lo, hi, piece in self.covers.get(id(ary), ()):
            if lo <= a and b <= hi:
                return [(piece, a - lo, b - lo)], lambda got: got[0]
        if isinstance(ary, Concatenate):
            if ary.axis != 0:
                return ([(p, a, b) for p in ary.arrays],
                        lambda got: ary.copy(arrays=tuple(got)))
            requests = []
            offset = 0
            for piece in ary.arrays:
                m = piece.shape[0]
                lo, hi = max(a, offset), min(b, offset + m)
                if lo < hi:
                    requests.append((piece, lo - offset, hi - offset))
                offset += m
            if len(requests) == 1:
                return requests, lambda got: got[0]
            return requests, lambda got: Concatenate(
                got, axis=0, tags=ary.tags)
        if isinstance(ary, BasicIndex):
            first = ary.indices[0]
            if _is_row_slice(first):
                lo, hi = first.start + a, first.start + b
                return [(ary.array, lo, hi)], lambda got: _index_rest(
                    got[0], hi - lo, ary.indices[1:], ary.tags)
        if isinstance(ary, IndexLambda) and (root
                                             or id(ary) not in self.shared):
            # (an operand of one user: its rows computed where they are used)
            return self._plan_index_lambda(ary, a, b)
        return [], lambda _: self._view(ary, a, b)

    @staticmethod
    def _view(ary: Array, a: int, b: int) -> Array:
        return BasicIndex(ary, (NormalizedSlice(a, b, 1),
                                *(NormalizedSlice(0, d, 1)
                                  for d in ary.shape[1:])))

    def _plan_index_lambda(self, ary: IndexLambda, a: int, b: int):
        all_reads = _reads(ary.expr, frozenset(ary.bindings))
        requests = []
        starts: dict[str, int] = {}
        for name, binding in ary.bindings.items():
            reads = all_reads.get(name, ())
            nb = _rows_len(binding)
            if (nb is None or not reads
                    or any(not isinstance(r, INT_CLASSES) for r in reads)):
                continue  # read whole (a clean operand, see the rows rules)
            lo = max(a + min(reads), 0)
            hi = min(b + max(reads), nb)
            if lo >= hi:
                continue
            starts[name] = lo
            requests.append((binding, lo, hi))

        def build(got):
            bindings = dict(ary.bindings)
            for name, value in zip(starts, got, strict=True):
                bindings[name] = value
            expr = _shift_rows(ary.expr, a, tuple(starts.items()))
            return IndexLambda(expr, (b - a, *ary.shape[1:]), ary.dtype,
                               bindings, ary.var_to_reduction_descr,
                               axes=ary.axes, tags=ary.tags)
        return requests, build

    # }}}

    def split(self, node: Array) -> Array | None:
        """``concatenate([head, interior, tail])`` for *node* if worth it."""
        rows = self.rows[id(node)]
        n = _rows_len(node)
        if not isinstance(rows, tuple) or n is None \
                or not isinstance(node, IndexLambda):
            return None  # (slices and concatenations compute nothing)
        head, tail = rows
        middle = n - head - tail
        width = 1
        for d in node.shape[1:]:
            if not isinstance(d, int):
                return None
            width *= d
        if middle < head + tail or middle * width < self.min_interior:
            return None
        t = self.time[id(node)]
        interior = self.rows_of(node, head, n - tail, t)
        if self.time[id(interior)] >= t:
            return None  # it reads a whole array of this time: no gain
        if not any(isinstance(tag, ImplStored) for tag in interior.tags):
            interior = interior.tagged(ImplStored())
        self.annotate(interior)
        self.shared.add(id(interior))
        pieces = [self.rows_of(node, 0, head, t)] if head else []
        pieces.append(interior)
        if tail:
            pieces.append(self.rows_of(node, n - tail, n, t))
        result = Concatenate(pieces, axis=0, axes=node.axes, tags=node.tags)
        self.annotate(result)
        self.n_split += 1
        return result

    def deep_split(self, node: Array, edges: tuple[int, int],
                   strips: tuple[int, int]) -> Array | None:
        """``concatenate([left, deep, right])`` for *node*: *deep* its
        rows past the *edges* (those that depend on no receive), computed
        from the deep rows of the arrays it reads; *left* and *right* the
        first and last rows of its *strips* (as wide as the strips of its
        readers need: they are computed from the strips of the arrays it
        reads, never from their deep rows). None if the deep rows still
        depend on a receive."""
        n = _rows_len(node)
        assert n is not None
        head, tail = edges
        t = self.time[id(node)]
        deep = self.rows_of(node, head, n - tail, t)
        if self.time[id(deep)] != 0:
            return None
        if any(isinstance(tag, ImplStored) for tag in deep.tags):
            # (the array's stored tag stays with its strips: deep rows
            # written out would cost a pass over memory per step)
            deep = deep.without_tags(ImplStored(), verify_existence=False)
            self.annotate(deep)
        # computed once (slices of it are views), but not tagged stored:
        # the partitioner computes it with its first user -- the output
        # whose deep rows end the chain, in the last part, where the time
        # tiles fuse every step's deep rows into the one kernel that
        # writes the output's
        self.shared.add(id(deep))
        # (strips first: a slice within a strip and the deep rows -- the
        # next step's strip reads such -- is read from the strip, so that
        # strips never wait for the deep rows)
        covers = []
        pieces = []
        left, right = strips
        if left:
            strip = self._stored(self.rows_of(node, 0, left, t))
            covers.append((0, left, strip))
            pieces.append(self._piece(strip, 0, head))
        pieces.append(deep)
        if right:
            strip = self._stored(self.rows_of(node, n - right, n, t))
            covers.append((n - right, n, strip))
            pieces.append(self._piece(strip, right - tail, right))
        covers.append((head, n - tail, deep))
        result = Concatenate([p for p in pieces if p is not None], axis=0,
                             axes=node.axes, tags=node.tags)
        self.annotate(result)
        self.covers[id(result)] = covers
        self.n_split += 1
        return result

    def _piece(self, strip: Array, a: int, b: int) -> Array | None:
        """Rows *a:b* of the stored *strip* (a view), None if empty."""
        if a >= b:
            return None
        n = _rows_len(strip)
        piece = strip if (a, b) == (0, n) else self._view(strip, a, b)
        self.annotate(piece)
        return piece

    def _stored(self, ary: Array) -> Array:
        if not any(isinstance(tag, ImplStored) for tag in ary.tags):
            ary = ary.tagged(ImplStored())
        self.annotate(ary)
        self.shared.add(id(ary))
        return ary


def _value_of(node: Array) -> Array:
    while isinstance(node, DistributedSendRefHolder):
        node = node.passthrough_data
    return node


def split_interior_from_boundary(
        outputs: Mapping[str, Array],
        source_time: Callable[[Array], int | None],
        min_interior_elements: int = MIN_INTERIOR_ELEMENTS,
        deep_interiors: bool = True,
) -> tuple[dict[str, Array], int]:
    """*outputs* with each array whose first-axis ends alone depend on the
    receives of its time split into boundary and interior (see the module
    documentation), and the number of arrays split.

    *source_time* gives the time of a receive (one more than its
    communication batch) and None for every other array. Sends held by
    :class:`~pytato_like.DistributedSendRefHolder` nodes are kept (with
    their data rewritten the same way), all held by the first output. With
    nothing to split *outputs* come back as they are, with 0. With
    *deep_interiors* (see the module documentation), arrays whose ends
    depend on receives of any time are split into deep rows and strips
    where that is worth it; without, every split is step by step."""
    if not outputs:
        return dict(outputs), 0
    order = toposort(list(outputs.values()), walk_children)
    if not all(isinstance(node, (Array, DictOfNamedArrays)) for node in order):
        # a container rebuild_with does not rebuild
        return dict(outputs), 0
    return _split(outputs, order, source_time, min_interior_elements,
                  deep_interiors)


def _split(outputs, order, source_time, min_interior_elements,
           deep_interiors=True):
    splitter = _Splitter(source_time, min_interior_elements)

    # {{{ which arrays to split

    # times on the DAG as written (a send holder is the array it passes)
    time: dict[int, int] = {}
    for node in order:
        if isinstance(node, DistributedSendRefHolder):
            time[id(node)] = time[id(node.passthrough_data)]
            continue
        src = source_time(node) if isinstance(node, Array) else None
        time[id(node)] = src if src is not None else max(
            (time[id(k)] for k in walk_children(node)), default=0)
    # arrays computed once for several users: never pushed into (slices
    # of them are views), and split if ...
    shared: set[int] = set()
    # ... their interior is wanted before their time: by a later time or
    # by a send (the sends then wait for the boundary only)
    early: set[int] = set()
    n_users: dict[int, int] = {}
    for node in order:
        if isinstance(node, DistributedSendRefHolder):
            data = _value_of(node.send_data)
            early.add(id(data))
            if isinstance(data, BasicIndex):
                early.add(id(_value_of(data.array)))
            continue
        t = time[id(node)]
        for kid in set(map(id, map(_value_of, walk_children(node)))):
            n_users[kid] = n_users.get(kid, 0) + 1
            if n_users[kid] > 1:
                shared.add(kid)
            if time[kid] < t:
                early.add(kid)
    shared.update(id(_value_of(o)) for o in outputs.values()
                  if n_users.get(id(_value_of(o)), 0))
    if not any(time[k] for k in shared & early):
        return dict(outputs), 0  # no receives, or no array worth a split

    # the outputs too, deep only: their deep rows then join the chain of
    # deep rows in the kernel that writes them (a step-by-step split of an
    # output gains nothing: its interior would be copied into it)
    results = set()
    for output in outputs.values():
        # (an output that is a row slice: the array it views)
        node = _value_of(output)
        while isinstance(node, BasicIndex) and _is_row_slice(node.indices[0]):
            results.add(id(node))
            node = _value_of(node.array)
        results.add(id(node))
    deep = (_deep_splits(order, source_time, shared & early, shared,
                         min_interior_elements, results)
            if deep_interiors else {})

    # }}}

    new: dict[int, Array] = {}
    sends: dict[DistributedSend, None] = {}
    split_results: set[int] = set()
    for node in order:
        if isinstance(node, DistributedSendRefHolder):
            new[id(node)] = new[id(node.passthrough_data)]
            sends[DistributedSend(new[id(node.send_data)], node.dest_rank,
                                  node.comm_tag, node.send_tags)] = None
            continue
        built = rebuild_with(node, lambda kid: new[id(kid)])
        if (isinstance(built, BasicIndex)
                and id(built.array) in split_results):
            # a slice of a split array: the pieces it needs
            splitter.annotate(built)
            built = _through_concatenate(splitter, built)
        splitter.annotate(built)
        if id(node) in shared and isinstance(built, Array):
            splitter.shared.add(id(built))
        step_split = id(node) in shared and id(node) in early
        if step_split or id(node) in deep:
            result = None
            if id(node) in deep:
                result = splitter.deep_split(built, *deep[id(node)])
            if result is None and step_split:
                result = splitter.split(built)
            if result is not None:
                split_results.add(id(result))
                built = result
        new[id(node)] = built

    if not splitter.n_split:
        return dict(outputs), 0
    result = {name: new[id(ary)] for name, ary in outputs.items()}
    first = next(iter(result))
    for send in sends:
        result[first] = DistributedSendRefHolder(send, result[first])
    return result, splitter.n_split


# {{{ deep interiors: which arrays, how wide their strips

def _deep_splits(order, source_time, wanted: set[int], shared: set[int],
                 min_interior_elements: int,
                 results: AbstractSet[int] = frozenset()
                 ) -> dict[int, tuple[tuple[int, int], tuple[int, int]]]:
    """id of each array of *wanted* or *results* to split deep -> ``(edges,
    strips)`` (see :meth:`_Splitter.deep_split`): arrays computed by index
    lambdas whose first and last rows alone depend on receives of any
    time, with a deep interior worth computing early and strips narrow
    beside it. The *results* (outputs) are split only if that widens no
    other array's strips past the quarter rule below: their strips make
    every earlier strip one stencil reach wider.

    The strip of an array must hold every row its readers' strips read
    (so that strips are computed from strips): a pass from the outputs
    back to the inputs carries each strip's rows down the way
    :meth:`_Splitter.rows_of` pushes row slices -- through index lambdas
    read at row offsets (a deep-split array, or one with a single user),
    row slices and concatenations."""
    rows_of_any = _Splitter(source_time, min_interior_elements, any_time=True)
    for node in order:
        rows_of_any.annotate(node)
    #: every array that could be split deep (computed once for several
    #: users, or an output) -> its edge rows
    candidates: dict[int, tuple[int, int]] = {}
    #: rows of each candidate
    lengths: dict[int, int] = {}
    for node in order:
        key = id(node)
        rows = rows_of_any.rows[key]
        n = _rows_len(node)
        if ((key not in shared and key not in results)
                or not isinstance(node, IndexLambda)
                or not isinstance(rows, tuple) or not any(rows)
                or n is None or any(not isinstance(d, int)
                                    for d in node.shape[1:])):
            continue
        middle = n - rows[0] - rows[1]
        width = math.prod(node.shape[1:])
        if middle >= rows[0] + rows[1] and middle * width >= min_interior_elements:
            candidates[key] = rows
            lengths[key] = n
    # the arrays wanted, and the candidates their deep rows read (else
    # those would be computed whole, and the deep rows would wait for the
    # receives)
    by_id = {id(node): node for node in order}
    wanted = _deep_reads(by_id, wanted, candidates, shared)
    # (the walk from the outputs stops where the first one went: what
    # it finds there is wanted already)
    results = _deep_reads(by_id, results, candidates, shared, wanted)
    edges = {key: rows for key, rows in candidates.items()
             if key in wanted or key in results}
    if not edges:
        return {}
    need = _strip_needs(order, edges, shared)

    def narrow(key: int) -> bool:
        # strips no wider than a quarter of the array: beyond that the
        # redundant rows cost more than the deep interior saves
        return 4 * sum(need[key]) <= lengths[key]

    if any(not narrow(key) for key in edges if key not in results) \
            and any(key in results for key in edges):
        edges = {key: rows for key, rows in edges.items()
                 if key not in results or key in wanted}
        need = _strip_needs(order, edges, shared)
    return {key: (rows, need[key]) for key, rows in edges.items()
            if narrow(key)}


def _deep_reads(by_id: Mapping[int, Array], seeds: AbstractSet[int],
                candidates: Mapping[int, object], shared: set[int],
                known: AbstractSet[int] = frozenset()) -> set[int]:
    """The ids of *seeds* and of every array whose rows the deep rows of a
    seed read (*by_id*: the DAG's nodes by id): through send holders, row
    slices, concatenations, index lambdas with one user (pushed into, see
    :meth:`_Splitter.rows_of`) and the *candidates* (split deep
    themselves); an index lambda computed once for several users that is
    no candidate ends the walk (read whole). The ids in *known* (the
    result of an earlier walk, so closed under it) are neither walked
    through nor returned."""
    stack = [by_id[key] for key in seeds if key in by_id]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        key = id(node)
        if key in seen or key in known:
            continue
        seen.add(key)
        if isinstance(node, DistributedSendRefHolder):
            kids: Iterable[Array] = (node.passthrough_data,)
        elif isinstance(node, (BasicIndex, Concatenate)):
            kids = walk_children(node)
        elif isinstance(node, IndexLambda) and (key in candidates
                                                or key not in shared):
            kids = node.bindings.values()
        else:
            continue
        stack.extend(kid for kid in kids
                     if not (isinstance(kid, IndexLambda)
                             and id(kid) in shared
                             and id(kid) not in candidates))
    return seen


def _strip_needs(order, edges: dict[int, tuple[int, int]], shared: set[int]
                 ) -> dict[int, tuple[int, int]]:
    """id -> (first rows, last rows) the strips of the arrays to split
    (*edges*: id -> their edge rows) need of each array, from the outputs
    back to the inputs."""
    need: dict[int, tuple[int, int]] = {}

    def widen(key: int, left: int, right: int) -> None:
        old_left, old_right = need.get(key, (0, 0))
        need[key] = (max(old_left, left), max(old_right, right))

    for node in reversed(order):
        key = id(node)
        if key in edges:
            widen(key, *edges[key])
        left, right = need.get(key, (0, 0))
        if not (left or right):
            continue
        for child, child_left, child_right in _strip_reads(
                node, left, right, key in edges or key not in shared):
            widen(id(child), child_left, child_right)
    return need


def _strip_reads(node: Array, left: int, right: int, into_expression: bool):
    """``(child, first rows, last rows)`` that rows ``:left`` and
    ``-right:`` of *node* read (an index lambda only if *into_expression*:
    else its strips are views of it, computed whole)."""
    if isinstance(node, DistributedSendRefHolder):
        yield node.passthrough_data, left, right
        return
    n = _rows_len(node)
    if n is None:
        return
    if isinstance(node, Concatenate):
        offset = 0
        for piece in node.arrays:
            if node.axis != 0:
                yield piece, left, right
                continue
            m = piece.shape[0]
            if not isinstance(m, int):
                return
            first = min(left - offset, m) if left > offset else 0
            last = (m - max(n - right - offset, 0)
                    if right and n - right < offset + m else 0)
            if first or last:
                yield piece, first, last
            offset += m
    elif isinstance(node, BasicIndex):
        first_index = node.indices[0]
        nb = _rows_len(node.array)
        if _is_row_slice(first_index) and nb is not None:
            a = first_index.start
            yield (node.array, a + left if left else 0,
                   nb - (a + n - right) if right else 0)
    elif isinstance(node, IndexLambda) and into_expression:
        all_reads = _reads(node.expr, frozenset(node.bindings))
        for name, binding in node.bindings.items():
            reads = all_reads.get(name, ())
            nb = _rows_len(binding)
            if (nb is None or not reads
                    or any(not isinstance(r, INT_CLASSES) for r in reads)):
                continue
            first = min(left + max(reads), nb) if left else 0
            last = (min(nb - (n - right + min(reads)), nb)
                    if right else 0)
            if first > 0 or last > 0:
                yield binding, max(first, 0), max(last, 0)

# }}}


def _through_concatenate(splitter: _Splitter, sliced: BasicIndex) -> Array:
    """A slice of a split array through its pieces (whatever the time:
    reading pieces of a concatenation computes nothing twice)."""
    n = _rows_len(sliced)
    first = sliced.indices[0]
    if n is None or not _is_row_slice(first):
        return sliced
    start = first.start
    inner = splitter.rows_of(sliced.array, start, start + n,
                             splitter.time[id(sliced)])
    covers = splitter.covers.get(id(sliced.array))
    if covers and isinstance(inner, Concatenate) \
            and id(inner) not in splitter.covers:
        # the slice, built of several pieces, keeps the pieces of the
        # deep split it views (shifted to its rows): rows wanted of it
        # are then read from one piece where one holds them, so the
        # strips that read the slice read strips, never the deep rows
        splitter.covers[id(inner)] = [(lo - start, hi - start, piece)
                                      for lo, hi, piece in covers]
    return _index_rest(inner, n, sliced.indices[1:], sliced.tags)

# vim: foldmethod=marker
