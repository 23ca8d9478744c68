"""``einsum`` and the products built on it (matmul, dot, vdot)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytato_like._frontend import as_operand
from pytato_like._shape_ops import ShapeOnly, broadcast_to
from pytato_like.array import (
    Array,
    Einsum,
    EinsumAxisDescriptor,
    EinsumElementwiseAxis,
    EinsumReductionAxis,
    ReductionDescriptor,
    check_tags,
    make_data_wrapper,
)
from pytato_like.cmath import conj
from pytato_like.diagnostic import (
    EinsumSpecError,
    InvalidEinsumIndex,
    NotAReductionAxis,
    ShapeMismatchError,
)
from pytato_like.utils import (
    are_shape_components_equal,
    get_shape_after_broadcasting,
    is_one,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from numpy.typing import ArrayLike
    from pytools.tag import Tag

    from pytato_like.array import Operand, ShapeComponent


def _expand_ellipsis(subscripts: str, operands: tuple[Array, ...]) -> str:
    """*subscripts* with each ``...`` replaced by letters no subscript uses,
    as NumPy reads it: an operand's ``...`` stands for its axes that no
    letter names; those axes of all operands broadcast together, aligned
    on the right; without ``->`` the output is ``...`` followed by the
    letters used once, in order."""
    spec = subscripts.replace(" ", "")
    in_spec, arrow, out_spec = spec.partition("->")
    in_specs = in_spec.split(",")
    if len(in_specs) != len(operands):
        raise EinsumSpecError(
            f"einsum subscripts '{subscripts}' name {len(in_specs)} operands "
            f"but {len(operands)} were given")
    for part in (*in_specs, out_spec):
        if part.replace("...", "", 1).count(".") or part.count("...") > 1:
            raise EinsumSpecError(
                f"einsum subscripts '{subscripts}': '.' only appears as one "
                "ellipsis '...' per operand and output")
    unused = [c for c in _ALL_LETTERS if c not in spec]
    ellipsis_ndims = []
    for part, op in zip(in_specs, operands):
        n_named = len(part.replace("...", ""))
        n = op.ndim - n_named if "..." in part else 0
        if n < 0:
            raise EinsumSpecError(
                f"einsum '{subscripts}': operand subscript '{part}' names "
                f"{n_named} axes but the operand has shape {op.shape}")
        ellipsis_ndims.append(n)
    n_broadcast = max(ellipsis_ndims, default=0)
    if n_broadcast > len(unused):
        raise EinsumSpecError(f"einsum '{subscripts}': too many axes for the "
                              "letters left for '...'")
    letters = "".join(unused[:n_broadcast])
    expanded = [part.replace("...", letters[n_broadcast - n:])
                for part, n in zip(in_specs, ellipsis_ndims)]
    if arrow:
        if "..." not in out_spec and n_broadcast:
            raise EinsumSpecError(
                f"einsum '{subscripts}': the output has no '...' for the "
                f"{n_broadcast} axes the operands' '...' stand for (NumPy "
                "refuses this too)")
        out = out_spec.replace("...", letters)
    else:
        named = "".join(in_specs).replace("...", "")
        out = letters + "".join(sorted(c for c in set(named)
                                       if named.count(c) == 1))
    return ",".join(expanded) + "->" + out


_ALL_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def parse_subscripts(subscripts: str, n_operands: int):
    """The input and output index lists of einsum *subscripts* for
    *n_operands* operands."""
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        in_spec, out_spec = spec.split("->")
        if "->" in out_spec:
            raise EinsumSpecError(f"einsum subscripts '{subscripts}' have more "
                                  "than one '->'")
    else:
        in_spec = spec
        letters = in_spec.replace(",", "")
        out_spec = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    in_specs = in_spec.split(",")
    if len(in_specs) != n_operands:
        raise EinsumSpecError(
            f"einsum subscripts '{subscripts}' name {len(in_specs)} operands "
            f"but {n_operands} were given")
    for part in (*in_specs, out_spec):
        for c in part:
            if not c.isalpha():
                raise InvalidEinsumIndex(f"invalid character '{c}' in einsum "
                                      f"subscripts '{subscripts}'")
    if len(set(out_spec)) != len(out_spec):
        raise InvalidEinsumIndex(f"output subscript '{out_spec}' repeats an index "
                              f"in '{subscripts}'")
    all_in = set("".join(in_specs))
    for c in out_spec:
        if c not in all_in:
            raise InvalidEinsumIndex(f"output index '{c}' does not appear in any "
                                  f"input of einsum '{subscripts}'")
    return in_specs, out_spec


def einsum(subscripts: str, *operands: Operand,
           tags: Tag | Iterable[Tag] = frozenset(),
           index_to_redn_descr: Mapping[str, ReductionDescriptor] | None = None
           ) -> Array:
    """Einstein summation over *operands*, as :func:`numpy.einsum` (size-1
    axes broadcast, repeated indices take diagonals, ``...`` stands for
    the axes no letter names and broadcasts across operands).
    *index_to_redn_descr* maps summed index letters to the
    :class:`~pytato_like.array.ReductionDescriptor` of their reduction."""
    arrays = tuple(_as_array(as_operand(op)) for op in operands)
    if "." in subscripts:
        subscripts = _expand_ellipsis(subscripts, arrays)
    key = (subscripts, tuple((op.shape, op.dtype) for op in arrays))
    cached = _DESCRIPTOR_CACHE.get(key)
    if cached is None:
        cached = _DESCRIPTOR_CACHE[key] = _access_descriptors(subscripts, arrays)
    access, redn_descr = cached
    if index_to_redn_descr:
        redn_descr = _with_given_descriptors(subscripts, len(arrays), redn_descr,
                                             index_to_redn_descr)
    return Einsum(access, arrays, redn_descr, None, check_tags(tags))


def _with_given_descriptors(subscripts: str, n_operands: int, redn_descr,
                            index_to_redn_descr):
    """*redn_descr* with the user's descriptors for summed index letters."""
    in_specs, out_spec = parse_subscripts(subscripts, n_operands)
    redn_letters = sorted(set("".join(in_specs)) - set(out_spec))
    new = dict(redn_descr)
    for letter, descr in index_to_redn_descr.items():
        if letter not in redn_letters:
            raise NotAReductionAxis(
                f"einsum '{subscripts}': index {letter!r} is not summed over "
                f"(summed indices: {redn_letters})")
        if not isinstance(descr, ReductionDescriptor):
            raise NotAReductionAxis(
                f"einsum '{subscripts}': descriptor for index {letter!r} is a "
                f"{type(descr).__name__}, not a ReductionDescriptor")
        new[EinsumReductionAxis(redn_letters.index(letter))] = descr
    return new


# subscripts and operand shapes/dtypes -> validated access descriptors
_DESCRIPTOR_CACHE: dict[tuple, tuple] = {}


def _access_descriptors(subscripts: str, operands: tuple[Array, ...]):
    in_specs, out_spec = parse_subscripts(subscripts, len(operands))

    extents: dict[str, ShapeComponent] = {}
    for spec, op in zip(in_specs, operands):
        if len(spec) != op.ndim:
            raise EinsumSpecError(
                f"einsum '{subscripts}': operand subscript '{spec}' has "
                f"{len(spec)} indices but the operand has shape {op.shape}")
        for c, dim in zip(spec, op.shape):
            if c not in extents or is_one(extents[c]):
                extents[c] = dim
            elif not is_one(dim) and not are_shape_components_equal(extents[c], dim):
                raise ShapeMismatchError(
                    f"einsum '{subscripts}': index '{c}' has extent "
                    f"{extents[c]} in one operand and {dim} in another "
                    f"(shapes {[o.shape for o in operands]})")

    redn_letters = sorted(set("".join(in_specs)) - set(out_spec))
    descr_of: dict[str, EinsumAxisDescriptor] = {
        c: EinsumElementwiseAxis(i) for i, c in enumerate(out_spec)}
    descr_of.update({c: EinsumReductionAxis(i) for i, c in enumerate(redn_letters)})
    access = tuple(tuple(descr_of[c] for c in spec) for spec in in_specs)
    redn_descr = {EinsumReductionAxis(i): ReductionDescriptor()
                  for i in range(len(redn_letters))}
    return access, redn_descr


def _wrap(x):
    return make_data_wrapper(np.asarray(x))


def _ndim(x: Array | ArrayLike) -> int:
    return x.ndim if isinstance(x, Array) else np.ndim(x)


def _as_array(x: Array | ArrayLike) -> Array:
    return x if isinstance(x, Array) else _wrap(x)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def matmul(a: object, b: object) -> Array:
    """``a @ b`` with NumPy's rules for 1-d operands and broadcast batch
    axes."""
    a, b = _as_array(as_operand(a)), _as_array(as_operand(b))
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeMismatchError(
            f"matmul: operands must not be scalars (shapes {a.shape}, {b.shape})")
    if a.ndim == 1 and b.ndim == 1:
        return einsum("i,i->", a, b)
    if a.ndim == 1:
        batch_b = _LETTERS[:b.ndim - 2]
        return einsum(f"y,{batch_b}yz->{batch_b}z", a, b)
    if b.ndim == 1:
        batch_a = _LETTERS[:a.ndim - 2]
        return einsum(f"{batch_a}xy,y->{batch_a}x", a, b)

    batch = get_shape_after_broadcasting([ShapeOnly(a.shape[:-2]),
                                          ShapeOnly(b.shape[:-2])])
    a = broadcast_to(a, (*batch, *a.shape[-2:])) if a.ndim > 2 or batch else a
    b = broadcast_to(b, (*batch, *b.shape[-2:])) if b.ndim > 2 or batch else b
    if not are_shape_components_equal(a.shape[-1], b.shape[-2]):
        raise ShapeMismatchError(
            f"matmul: inner dimensions differ for shapes {a.shape} and {b.shape}")
    bl = _LETTERS[:len(batch)]
    return einsum(f"{bl}xy,{bl}yz->{bl}xz", a, b)


def dot(a: Any, b: Any) -> Array:
    """:func:`numpy.dot`: products of scalars, inner product of vectors,
    matrix products, and for N-d the sum over the last axis of *a* and the
    second-to-last of *b*."""
    a, b = as_operand(a), as_operand(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return a * b
    a, b = _as_array(a), _as_array(b)
    if b.ndim == 1:
        sa = _LETTERS[:a.ndim]
        return einsum(f"{sa},{sa[-1]}->{sa[:-1]}", a, b)
    sa = _LETTERS[:a.ndim]
    sb_letters = _LETTERS[a.ndim:a.ndim + b.ndim - 1]
    sb = sb_letters[:-1] + sa[-1] + sb_letters[-1]
    return einsum(f"{sa},{sb}->{sa[:-1]}{sb_letters}", a, b)


def vdot(a: Operand, b: Operand) -> Array:
    """:func:`numpy.vdot`: inner product of the flattened operands, the first
    conjugated."""
    a, b = _as_array(as_operand(a)), _as_array(as_operand(b))
    if a.dtype.kind == "c":  # (conj of bool would be int8, unlike np.vdot)
        a = conj(a)
    return einsum("i,i->", a.reshape(-1), b.reshape(-1))
