"""Which arrays code generation stores, decided by a cost model.

Every array of a DAG is either *stored* (computed once, kept in memory --
a register of the fused loop when all its users read it at the same index,
a global array otherwise) or *inlined* (its expression is substituted into
each user). Inlining saves memory traffic but repeats work once per use;
storing costs a write and reads. :func:`decide_storage` walks the DAG once,
children before users (linear time, no recursion), and stores an array when

========================  =============================================
reason                    rule
========================  =============================================
``input``                 placeholders, data wrappers, size parameters
``output``                a result of the program
``tag``                   tagged :class:`~pytato_like.tags.ImplStored`
``reuse``                 users evaluate it ``F`` times per element and
                          ``(F - 1) * work > duplication_threshold``
                          (a lower threshold applies when every user reads
                          it elementwise at the same index: storing is
                          then a register, not memory)
``depth``                 its inlined expression would nest deeper than
                          ``max_inline_depth`` (keeps generated
                          expressions, and loopy's recursion, bounded)
``size``                  its inlined expression would exceed
                          ``max_inline_work`` operations per element
``outlined``              a node without an index lambda (a CSR
                          product, a loopy call): its own kernel writes it
``index``                 a computed integer array narrower than 32 bits
                          used as an index array: its inlined value
                          carries wrap-around casts that loopy's index
                          analysis cannot read
========================  =============================================

Arrays tagged :class:`~pytato_like.tags.ImplInlined` are never stored unless
they are inputs or outputs. ``work`` is the number of scalar operations per
element of the inlined expression (math functions count 8, divisions 4-6) (reductions count their extent, symbolic
extents count as :attr:`CostModel.unknown_extent`).

:func:`explain_materialization` prints the decisions as a table;
:func:`materialize_with_cost_model` returns the DAG with
:class:`~pytato_like.tags.ImplStored` tags added where the model stores.

.. autoclass:: CostModel
.. autoclass:: NodeCost
.. autofunction:: decide_storage
.. autofunction:: materialize_with_cost_model
.. autofunction:: explain_materialization
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import TYPE_CHECKING, cast

import pymbolic.primitives as prim

from pytato_like.collector import paused_collection
from pytato_like._shapes import concrete_size
from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    Concatenate,
    DictOfNamedArrays,
    IndexBase,
    InputArgumentBase,
    NamedArray,
    Stack,
    children_of,
    output_arrays,
)
from pytato_like.diagnostic import CannotBeLoweredToIndexLambda
from pytato_like.scalar_expr import Reduce, TypeCast
from pytato_like.tags import ImplInlined, ImplStored
from pytato_like.transform.copy import rebuild_with
from pytato_like.transform.lower_to_index_lambda import (
    SELECT_CHAIN_MAX,
    to_index_lambda,
)

if TYPE_CHECKING:
    from pytato_like.array import ShapeComponent
    from pytato_like.scalar_expr import ScalarExpression


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Knobs of the storage decision (operations are per array element)."""

    #: store when ``(F - 1) * work`` exceeds this and some user reads the
    #: array at another index or shape (storing means global memory)
    duplication_threshold: float = 16.0
    #: the same, when every user reads it elementwise at the same index
    #: (storing means a register of the fused loop)
    register_duplication_threshold: float = 1.0
    #: pymbolic nesting depth an inlined expression may reach
    max_inline_depth: int = 40
    #: scalar operations per element an inlined expression may reach
    max_inline_work: float = 400.0
    #: assumed extent of reductions over symbolic lengths
    unknown_extent: int = 16


DEFAULT_COST_MODEL = CostModel()


@dataclasses.dataclass
class NodeCost:
    """What the model computed for one array."""

    kind: str
    #: operations per element of the node's own definition
    ops: float
    #: operations per element when everything not stored below is inlined
    work: float
    #: nesting depth of the inlined expression
    depth: int
    #: evaluations per element requested by all users (``F``)
    uses: float = 0.0
    #: whether every use reads it elementwise at the user's own index
    elementwise_uses: bool = True
    stored: bool = False
    reason: str = ""


# {{{ per-expression facts

@dataclasses.dataclass(frozen=True)
class _ExprFacts:
    ops: float
    depth: int
    #: binding name -> evaluations per output element
    uses: dict[str, float]
    #: binding names read only at the identity index outside reductions
    identity_names: frozenset[str]
    #: binding names read only inside the branches of selects (the pieces
    #: of a concatenation: each read on its own part of the domain)
    selected_names: frozenset[str] = frozenset()


def _extent(bound: ShapeComponent, unknown: int) -> int:
    return bound if isinstance(bound, int) else unknown


@lru_cache(maxsize=4096)
def _expr_facts(expr: ScalarExpression, ndim: int, unknown: int,
                names: frozenset[str]) -> _ExprFacts:
    """Operation count, depth and binding uses of one index-lambda
    expression. Single expressions are shallow (the front end builds one
    operation per index lambda), so recursion here is bounded."""

    uses: dict[str, float] = {}
    non_identity: set[str] = set()
    unbranched: set[str] = set()
    identity = tuple(prim.Variable(f"_{i}") for i in range(ndim))

    def walk(e, mult: float, in_reduce: bool,
             in_branch: bool = False) -> tuple[float, int]:
        if isinstance(e, prim.Variable):
            if e.name not in names:
                return 0.0, 0
            uses[e.name] = uses.get(e.name, 0.0) + mult
            if not in_branch:
                unbranched.add(e.name)
            if in_reduce or ndim != 0:
                non_identity.add(e.name)
            return 0.0, 1
        if isinstance(e, prim.Subscript):
            name = cast(prim.Variable, e.aggregate).name
            uses[name] = uses.get(name, 0.0) + mult
            if not in_branch:
                unbranched.add(name)
            index = e.index if isinstance(e.index, tuple) else (e.index,)
            if in_reduce or tuple(index) != identity:
                non_identity.add(name)
            ops = 0.0
            depth = 1
            for i in index:
                o, d = walk(i, mult, in_reduce, in_branch)
                ops += o
                depth = max(depth, d + 1)
            return ops, depth
        if isinstance(e, Reduce):
            extent = 1
            for lo, hi in e.bounds.values():
                if isinstance(lo, int) and isinstance(hi, int):
                    extent *= max(hi - lo, 1)
                else:
                    extent *= unknown
            o, d = walk(e.inner_expr, mult * extent, True, in_branch)
            return (o + 1) * extent, d + 1
        if isinstance(e, TypeCast):
            o, d = walk(e.inner_expr, mult, in_reduce, in_branch)
            return o + 1, d + 1
        if isinstance(e, prim.ExpressionNode):
            ops = 0.0
            depth = 0
            # (a select on the position, as a concatenation's: each
            # branch is evaluated on its part of the domain only)
            branches = ((e.then, e.else_) if isinstance(e, prim.If)
                        and _is_position_test(e.condition, ndim) else ())
            for child in _expression_children(e):
                o, d = walk(child, mult, in_reduce,
                            in_branch or any(child is b for b in branches))
                ops += o
                depth = max(depth, d)
            return ops + _OP_WEIGHTS.get(type(e), 1.0), depth + 1
        return 0.0, 0

    ops, depth = walk(expr, 1.0, False)
    return _ExprFacts(ops, depth, uses, frozenset(set(uses) - non_identity),
                      frozenset(set(uses) - unbranched))


def _is_position_test(cond: object, ndim: int) -> bool:
    """Whether *cond* compares an output index (``_0``, ...) with
    something: the selects of a concatenation or stack."""
    return (isinstance(cond, prim.Comparison)
            and isinstance(cond.left, prim.Variable)
            and cond.left.name in {f"_{i}" for i in range(ndim)})


#: rough cost of one scalar operation, in additions
_OP_WEIGHTS = {prim.Call: 8.0, prim.Quotient: 4.0, prim.FloorDiv: 6.0,
               prim.Remainder: 6.0, prim.Power: 8.0}


def _expression_children(e) -> tuple:
    if isinstance(e, prim.Call):
        return tuple(e.parameters)
    if isinstance(e, prim.If):
        return (e.condition, e.then, e.else_)
    if isinstance(e, prim.Comparison):
        return (e.left, e.right)
    if isinstance(e, (prim.Quotient, prim.FloorDiv, prim.Remainder)):
        return (e.numerator, e.denominator)
    if isinstance(e, prim.Power):
        return (e.base, e.exponent)
    if isinstance(e, (prim.LeftShift, prim.RightShift)):
        return (e.shiftee, e.shift)
    if hasattr(e, "children"):
        return tuple(e.children)
    if hasattr(e, "child"):
        return (e.child,)
    return ()

# }}}


def _named_expr(node: NamedArray) -> Array | None:
    """The expression *node* names, or ``None`` for the results of
    containers computed by their own kernel (loopy calls)."""
    try:
        return node.expr
    except AttributeError:
        return None


_KEEP_ALIVE = "keep alive"  # (a memo key no expression key equals)


def _own_cost(node: Array, model: CostModel, memo: dict | None = None,
              outlined: set[int] | None = None
              ) -> tuple[float, int, list[tuple[Array, float, bool, bool]]]:
    """``(ops, depth, [(child, evaluations per element, elementwise,
    selected)])`` (*selected*: read only in the branches of selects on the
    position, as the pieces of a concatenation are) of
    *node*'s own definition, read from its index lambda
    (:func:`~pytato_like.transform.lower_to_index_lambda.to_index_lambda`:
    the model sees every node kind the way code generation inlines it).
    *memo* caches expression facts by expression identity (the front end
    shares expressions between nodes). Nodes without an index lambda
    are added to *outlined* (by ``id``)."""
    if isinstance(node, NamedArray) and _named_expr(node) is not None:
        return 0.0, 0, [(node.expr, 1.0, True, False)]
    try:
        lam = to_index_lambda(node)
    except CannotBeLoweredToIndexLambda:
        # inputs and nodes computed outside the inlined loops: each
        # operand (index arrays, shape expressions) read once per element
        if outlined is not None:
            outlined.add(id(node))
        return 2.0, 3, [(child, 1.0, False, False) for child in children_of(node)]
    unknown = model.unknown_extent
    bindings = lam.bindings
    ndim = len(lam.shape)
    key = (id(lam.expr), ndim, tuple(bindings))
    facts = memo.get(key) if memo is not None else None
    if facts is None:
        facts = _expr_facts(lam.expr, ndim, unknown, frozenset(bindings))
        if memo is not None:
            memo[key] = facts
            if lam is not node:
                # the key holds the expression's id: keep the expression
                # alive while the memo is (lowerings repeat expressions:
                # every roll by the same amount has the same one)
                memo.setdefault(_KEEP_ALIVE, []).append(lam.expr)
    # pieces read only in the selects of a concatenation or stack are not
    # broadcast reuse; only beyond SELECT_CHAIN_MAX pieces, where storing
    # each piece would cost a kernel per piece (a few pieces, such as a
    # halo around a field, keep the verdicts the time tiles are built for)
    many_pieces = (isinstance(node, (Concatenate, Stack))
                   and len(node.arrays) > SELECT_CHAIN_MAX)
    uses = []
    for name, child in bindings.items():
        n = facts.uses.get(name, 0.0)
        elementwise = (name in facts.identity_names
                       and child.shape == node.shape)
        uses.append((child, n, elementwise,
                     many_pieces and name in facts.selected_names))
    return facts.ops, facts.depth, uses


@paused_collection
def decide_storage(outputs: list[Array], model: CostModel | None = None,
                   order: list[Array] | None = None) -> dict[int, NodeCost]:
    """The cost model's verdict for every array reachable from *outputs*,
    keyed by ``id(array)``. *order* may pass a precomputed topological
    order of *outputs*."""
    if model is None:
        model = DEFAULT_COST_MODEL
    if order is None:
        order = topological_order(outputs)
    output_ids = set()
    for out in outputs:
        output_ids.add(id(out))
        while isinstance(out, NamedArray) and _named_expr(out) is not None:
            out = out.expr
            output_ids.add(id(out))

    # total evaluations per element requested by users, and whether all
    # of them are elementwise at the same index
    uses: dict[int, float] = {}
    elementwise: dict[int, bool] = {}
    own: list[tuple] = []  # position in order -> _own_cost
    sizes: dict[int, int | None] = {}
    memo: dict = {}
    outlined: set[int] = set()
    for node in order:
        info = _own_cost(node, model, memo, outlined)
        own.append(info)
        node_size = sizes[id(node)] = concrete_size(node.shape)
        for child, n, elw, selected in info[2]:
            child_size = sizes[id(child)]
            if (node_size is not None and child_size and node_size != child_size
                    and not selected):
                # broadcasts and reductions evaluate the child more often
                # than it has elements; slicing less often
                n = n * node_size / child_size
            cid = id(child)
            uses[cid] = uses.get(cid, 0.0) + n
            if not elw:
                elementwise[cid] = False

    narrow_index_ids = {
        id(i) for node in order if isinstance(node, IndexBase)
        for i in node.indices
        if isinstance(i, Array) and not isinstance(i, InputArgumentBase)
        and i.dtype.kind in "iu" and i.dtype.itemsize < 4}

    costs: dict[int, NodeCost] = {}
    for node, (ops, own_depth, child_uses) in zip(order, own, strict=True):
        if isinstance(node, InputArgumentBase):
            costs[id(node)] = NodeCost(
                type(node).__name__, 0.0, 0.0, 1, uses.get(id(node), 0.0),
                elementwise.get(id(node), True), True, "input")
            continue
        work = ops
        depth = 0
        for child, n, _, _ in child_uses:
            c = costs[id(child)]
            if not c.stored:
                work += n * c.work
                depth = max(depth, c.depth)
        depth += own_depth
        cost = NodeCost(type(node).__name__, ops, work, depth,
                        uses.get(id(node), 0.0), elementwise.get(id(node), True))
        costs[id(node)] = cost
        if isinstance(node, NamedArray) and id(node) not in outlined:
            continue  # the named expression is what gets stored
        strategy = [t for t in node.tags if isinstance(t, (ImplStored,
                                                            ImplInlined))
                    ] if node.tags else None
        if id(node) in output_ids:
            cost.stored, cost.reason = True, "output"
        elif strategy and isinstance(strategy[0], ImplStored):
            cost.stored, cost.reason = True, "tag"
        elif strategy:
            cost.reason = "tag"
        elif id(node) in narrow_index_ids:
            cost.stored, cost.reason = True, "index"
        elif id(node) in outlined:
            # no index lambda (a CSR product, a loopy call): code
            # generation computes it by its own kernel into memory
            cost.stored, cost.reason = True, "outlined"
        else:
            threshold = (model.register_duplication_threshold
                         if cost.elementwise_uses
                         else model.duplication_threshold)
            if (cost.uses - 1) * work > threshold and cost.uses > 1.0001:
                cost.stored, cost.reason = True, "reuse"
            elif depth > model.max_inline_depth:
                cost.stored, cost.reason = True, "depth"
            elif work > model.max_inline_work:
                cost.stored, cost.reason = True, "size"
        if cost.stored:
            cost.work = ops  # users read it: per-use cost is one load
            cost.depth = 1
    return costs


def materialize_with_cost_model(result, model: CostModel | None = None):
    """*result* (an :class:`~pytato_like.array.Array` or a
    :class:`~pytato_like.array.DictOfNamedArrays`) with
    :class:`~pytato_like.tags.ImplStored` added to every non-input array the
    cost model stores. Linear time, iterative."""
    outputs = output_arrays(result)
    order = topological_order(outputs)
    costs = decide_storage(outputs, model, order)
    new: dict[int, Array] = {}

    def mapped(a: Array) -> Array:
        return new[id(a)]

    for node in order:
        if isinstance(node, NamedArray):
            new[id(node)] = node  # containers are rebuilt below
            continue
        copy = rebuild_with(node, mapped)
        c = costs[id(node)]
        if (c.stored and c.reason not in ("input", "tag")
                and not isinstance(node, InputArgumentBase)):
            copy = copy.tagged(ImplStored())
        new[id(node)] = copy
    if isinstance(result, DictOfNamedArrays):
        return DictOfNamedArrays({name: new[id(ary)]
                                  for name, ary in result._data.items()},
                                 tags=result.tags)
    return new[id(result)]


def explain_materialization(result, model: CostModel | None = None,
                            max_rows: int = 50) -> str:
    """A table of the cost model's decisions for the non-input arrays of
    *result*: kind, shape, own ops, inlined work, depth, uses, verdict."""
    outputs = output_arrays(result)
    order = topological_order(outputs)
    costs = decide_storage(outputs, model, order)
    rows: list[tuple[str, ...]] = []
    n_stored = 0
    for i, node in enumerate(order):
        c = costs[id(node)]
        if isinstance(node, InputArgumentBase):
            continue
        n_stored += c.stored
        rows.append((str(i), c.kind, str(tuple(node.shape)), f"{c.ops:g}",
                     f"{c.work:g}", str(c.depth), f"{c.uses:g}",
                     "stored" if c.stored else "inlined", c.reason))
    header = ("node", "kind", "shape", "ops", "work", "depth", "uses",
              "decision", "reason")
    shown = rows if len(rows) <= max_rows else rows[:max_rows // 2] + [
        ("...",) * len(header)] + rows[-max_rows // 2:]
    widths = [max(len(r[k]) for r in [header, *shown]) for k in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True))
              for r in shown]
    lines.append(f"{n_stored} of {len(rows)} computed arrays stored")
    return "\n".join(lines)


__all__ = ["CostModel", "NodeCost", "decide_storage",
           "explain_materialization", "materialize_with_cost_model"]
