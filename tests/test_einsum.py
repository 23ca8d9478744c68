"""einsum, matmul (``@``), dot and vdot against eager NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import EinsumSpecError, ShapeMismatchError
from pytato_like.testing import assert_matches_numpy, random_input

EINSUM_CASES = [
    # (subscripts, operand shapes)
    ("ij,jk->ik", [(3, 4), (4, 5)]),           # matmul-like
    ("ij,jk", [(3, 4), (4, 5)]),               # implicit output
    ("ji,jk", [(4, 3), (4, 5)]),               # implicit output, sorted letters
    ("ba", [(3, 4)]),                          # implicit output transposes
    ("ii->", [(4, 4)]),                        # trace
    ("ii", [(4, 4)]),                          # implicit trace
    ("ii->i", [(4, 4)]),                       # diagonal
    ("iij->ij", [(3, 3, 2)]),                  # partial diagonal
    ("ij->ji", [(3, 4)]),                      # transpose
    ("ij->", [(3, 4)]),                        # total sum
    ("ij->j", [(3, 4)]),                       # column sums
    ("i,i->", [(5,), (5,)]),                   # inner product
    ("i,j->ij", [(3,), (4,)]),                 # outer product
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),  # batched matmul
    ("ij,ij->i", [(3, 4), (3, 4)]),            # row-wise dot
    ("ij,j->i", [(3, 4), (4,)]),               # matvec
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),           # size-1 axis broadcasts
    ("ij,ij->ij", [(1, 4), (3, 1)]),           # broadcasting on both sides
    ("ij,jk->ik", [(3, 4), (1, 5)]),           # broadcast reduction axis
    ("i,i->i", [(1,), (4,)]),
    ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]),
    ("i->", [(0,)]),                           # empty reduction: 0
    (",->", [(), ()]),                         # scalars
    ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUM_CASES,
                         ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy(subscripts, shapes, rng):
    operands = [random_input(rng, s, "float64") for s in shapes]
    assert_matches_numpy(lambda xp, *ops: xp.einsum(subscripts, *ops), *operands)


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float32", "float64"),
                                    ("int8", "int8"), ("int32", "float32"),
                                    ("uint8", "int8"), ("complex64", "float32"),
                                    ("int64", "complex128")],
                         ids="-".join)
def test_einsum_result_dtype_matches_numpy(dtypes, rng):
    a = random_input(rng, (3, 4), dtypes[0])
    b = random_input(rng, (4, 2), dtypes[1])
    assert_matches_numpy(lambda xp, x, y: xp.einsum("ij,jk->ik", x, y), a, b)


def test_einsum_with_spaces_and_repeated_operand(rng):
    a = random_input(rng, (3, 3), "float64")
    assert_matches_numpy(lambda xp, x: xp.einsum("ij, jk -> ik", x, x), a)


def test_einsum_of_computed_operands(rng):
    a = random_input(rng, (3, 4), "float64")
    b = random_input(rng, (4,), "float64")
    assert_matches_numpy(
        lambda xp, x, y: xp.einsum("ij,j->i", xp.sin(x) + 1, y * 2) - 1, a, b)


# {{{ ellipsis

ELLIPSIS_CASES = [
    ("...i->...", [(2, 3, 4)]),                # sum over the last axis
    ("...i", [(2, 3, 4)]),                     # implicit: '...' first
    ("...i,...i", [(2, 3, 4), (3, 1)]),        # '...' axes broadcast
    ("i...,i...->...", [(2, 3, 4), (2, 3, 4)]),
    ("...i,i->...", [(2, 3, 4), (4,)]),
    ("ij...->...", [(2, 3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),              # batched diagonal
    ("...,...", [(2, 3, 4), (4,)]),            # broadcasting product
    ("a...b->...", [(2, 3, 4)]),
    ("...ij->i...j", [(2, 3, 4)]),             # '...' inside the output
    ("...i->", [(4,)]),                        # '...' of no axes
    ("i...j,kj->...ik", [(2, 3, 4), (5, 4)]),
    ("...->...", [()]),
]


@pytest.mark.parametrize("subscripts, shapes", ELLIPSIS_CASES,
                         ids=[c[0] for c in ELLIPSIS_CASES])
def test_einsum_with_ellipsis_matches_numpy(subscripts, shapes, rng):
    operands = [random_input(rng, s, "float64") for s in shapes]
    assert_matches_numpy(lambda xp, *ops: xp.einsum(subscripts, *ops), *operands)


def test_einsum_with_ellipsis_on_loopy_target(queue, rng):
    x, w = random_input(rng, (2, 3, 4), "float64"), random_input(rng, (5, 4),
                                                                 "float64")
    px = pt.make_placeholder("x", x.shape, np.float64)
    pw = pt.make_placeholder("w", w.shape, np.float64)
    _, (out,) = pt.generate_loopy(pt.einsum("...j,kj->...k", px, pw))(
        queue, x=x, w=w)
    np.testing.assert_allclose(out, np.einsum("...j,kj->...k", x, w),
                               rtol=1e-13)


@pytest.mark.parametrize("subscripts", ["...i->", "i...->i", "..i", "...i..."])
def test_einsum_ellipsis_misuse_raises_as_numpy_does(subscripts):
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError):
        np.einsum(subscripts, x)
    with pytest.raises(EinsumSpecError, match=r"\.\.\."):
        pt.einsum(subscripts, pt.make_data_wrapper(x))

# }}}


# {{{ matmul, dot, vdot

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),            # 1-d @ 1-d: scalar
    ((4,), (4, 5)),          # 1-d on the left: prepended axis removed
    ((3, 4), (4,)),          # 1-d on the right
    ((2, 3, 4), (4, 5)),     # batched against a matrix
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),  # broadcast batch axes
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)),
    ((1, 4), (4, 1)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_operator_matches_numpy(shapes, rng):
    a, b = (random_input(rng, s, "float64") for s in shapes)
    assert_matches_numpy(lambda xp, x, y: x @ y, a, b)
    assert_matches_numpy(lambda xp, x, y: xp.matmul(x, y), a, b)


def test_matmul_with_numpy_operand(rng):
    a = random_input(rng, (3, 4), "float64")
    b = random_input(rng, (4, 2), "float64")
    assert_matches_numpy(lambda xp, x: x @ b, a)
    assert_matches_numpy(lambda xp, x: xp.matmul(b.T, x.T), a)


def test_matmul_of_integers_and_mixed_dtypes(rng):
    a = random_input(rng, (3, 4), "int8")
    b = random_input(rng, (4, 2), "float32")
    assert_matches_numpy(lambda xp, x, y: x @ y, a, b)
    assert_matches_numpy(lambda xp, x: x @ x.T, a)


DOT_SHAPES = [((), (3,)), ((3,), ()), ((4,), (4,)), ((3, 4), (4,)),
              ((3, 4), (4, 2)), ((2, 3, 4), (4,)), ((2, 3, 4), (5, 4, 2)),
              ((4,), (4, 3))]


@pytest.mark.parametrize("shapes", DOT_SHAPES, ids=str)
def test_dot_matches_numpy(shapes, rng):
    a, b = (random_input(rng, s, "float64") for s in shapes)
    assert_matches_numpy(lambda xp, x, y: xp.dot(x, y), a, b)


def test_dot_method(rng):
    a = random_input(rng, (3, 4), "float64")
    b = random_input(rng, (4,), "float64")
    assert_matches_numpy(lambda xp, x, y: x.dot(y), a, b)


@pytest.mark.parametrize("dtype", ["float64", "complex128", "complex64", "int32",
                                   "bool"])
@pytest.mark.parametrize("shapes", [((4,), (4,)), ((2, 3), (3, 2)), ((2, 3), (6,))],
                         ids=str)
def test_vdot_conjugates_and_flattens_like_numpy(shapes, dtype, rng):
    a, b = (random_input(rng, s, dtype) for s in shapes)
    assert_matches_numpy(lambda xp, x, y: xp.vdot(x, y), a, b)

# }}}


# {{{ errors

def test_einsum_operand_count_mismatch_raises():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    with pytest.raises(EinsumSpecError, match="2 operands"):
        pt.einsum("ij,jk->ik", x)


def test_einsum_extent_mismatch_raises():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    y = pt.make_placeholder("y", (5, 2), np.float64)
    with pytest.raises(ShapeMismatchError, match="'j'.*4.*5"):
        pt.einsum("ij,jk->ik", x, y)


def test_matmul_inner_dimension_mismatch_raises():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    y = pt.make_placeholder("y", (5, 2), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(3, 4\).*\(5, 2\)"):
        x @ y

# }}}

# vim: foldmethod=marker
