"""Sparse matrices in compressed sparse row (CSR) form, and their products
with dense arrays.

A :class:`CSRMatrix` is not an array: it only describes a matrix by three
arrays of the DAG (its nonzero values, their column indices, and where each
row's entries start), as :class:`scipy.sparse.csr_array` does with
``data``, ``indices`` and ``indptr``. Multiplying it by a dense array
(``A @ x`` or :func:`sparse_matmul`) gives a :class:`CSRMatmul`, an array
node whose children are those three arrays and the dense operand, so every
mapper, equality, pickling and the visualisation treat it through the field
table like any other node.

The NumPy target computes the product by scattering the entries of each
row (:func:`numpy.add.at`); the loopy target launches a kernel with one
work-item per row (:mod:`pytato_like.target.loopy.sparse`). The cost model
stores every product: its rows read data-dependent entries, which cannot be
fused into the users.

.. autofunction:: make_csr_matrix
.. autofunction:: sparse_matmul
.. autoclass:: SparseMatrix
.. autoclass:: CSRMatrix
.. autoclass:: SparseMatmul
.. autoclass:: CSRMatmul
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from pytools.tag import Tag, normalize_tags

from pytato_like.array import (
    ARRAY,
    VALUE,
    Array,
    Axis,
    default_axes,
)
from pytato_like.diagnostic import DTypeError, NotAnArrayError, ShapeMismatchError

if TYPE_CHECKING:
    from pytools.tag import ToTagSetConvertible

__all__ = ["CSRMatmul", "CSRMatrix", "SparseMatmul", "SparseMatrix",
           "make_csr_matrix", "sparse_matmul"]

_NO_TAGS: frozenset[Tag] = frozenset()


class SparseMatrix:
    """Base class of sparse matrix descriptions.

    .. attribute:: shape
    .. attribute:: dtype
    .. attribute:: tags
    .. attribute:: axes
    """

    shape: tuple[int, int]
    dtype: np.dtype
    tags: frozenset[Tag]
    axes: tuple[Axis, ...]

    def __matmul__(self, other: Array) -> Array:
        return sparse_matmul(self, other)

    @property
    def ndim(self) -> int:
        return 2


class CSRMatrix(SparseMatrix):
    """A matrix of :attr:`shape` ``(nrows, ncols)`` whose row ``i`` holds
    ``elem_values[k]`` in column ``elem_col_indices[k]`` for ``row_starts[i]
    <= k < row_starts[i+1]``.

    .. attribute:: elem_values
    .. attribute:: elem_col_indices
    .. attribute:: row_starts
    """

    def __init__(self, shape: tuple[int, int], elem_values: Array,
                 elem_col_indices: Array, row_starts: Array, *,
                 tags: frozenset[Tag] = _NO_TAGS,
                 axes: tuple[Axis, ...] | None = None) -> None:
        self.shape = shape
        self.elem_values = elem_values
        self.elem_col_indices = elem_col_indices
        self.row_starts = row_starts
        self.dtype = elem_values.dtype
        self.tags = frozenset(tags)
        self.axes = default_axes(2) if axes is None else tuple(axes)

    def _key(self) -> tuple:
        return (self.shape, self.elem_values, self.elem_col_indices,
                self.row_starts, self.tags, self.axes)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CSRMatrix) and self._key() == other._key())

    def __hash__(self) -> int:
        return hash((CSRMatrix, *self._key()))

    def __repr__(self) -> str:
        return (f"CSRMatrix(shape={self.shape}, dtype={self.dtype}, "
                f"nnz={self.elem_values.shape[0]})")

    def tagged(self, tags: ToTagSetConvertible) -> CSRMatrix:
        return CSRMatrix(self.shape, self.elem_values, self.elem_col_indices,
                         self.row_starts, tags=self.tags | normalize_tags(tags),
                         axes=self.axes)


def _check_index_array(name: str, ary: object, length: int | None) -> None:
    if not isinstance(ary, Array):
        raise NotAnArrayError(f"make_csr_matrix: {name} must be an array, got "
                              f"a {type(ary).__name__}")
    if ary.dtype.kind not in "iu":
        raise DTypeError(f"make_csr_matrix: {name} must hold integers, got "
                         f"dtype {ary.dtype}")
    if ary.ndim != 1 or (length is not None and ary.shape[0] != length):
        expected = "1-D" if length is None else f"of shape ({length},)"
        raise ShapeMismatchError(f"make_csr_matrix: {name} must be {expected}, "
                                 f"got shape {ary.shape}")


def make_csr_matrix(shape: tuple[int, int], elem_values: Array,
                    elem_col_indices: Array, row_starts: Array, *,
                    tags: frozenset[Tag] = _NO_TAGS,
                    axes: tuple[Axis, ...] | None = None) -> CSRMatrix:
    """A :class:`CSRMatrix` of *shape* from its nonzero values (1-D), their
    column indices (1-D integers, as many) and the start of each row in
    them (1-D integers, ``nrows + 1`` entries, the last one the number of
    nonzeros). Indices are not checked against the data: out-of-range
    column indices, as with :mod:`scipy.sparse`, give undefined results."""
    if (not isinstance(shape, tuple) or len(shape) != 2
            or not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)):
        raise ShapeMismatchError(f"make_csr_matrix: shape must be a pair of "
                                 f"non-negative integers, got {shape!r}")
    shape = (int(shape[0]), int(shape[1]))
    if not isinstance(elem_values, Array):
        raise NotAnArrayError("make_csr_matrix: elem_values must be an array, "
                              f"got a {type(elem_values).__name__}")
    if elem_values.ndim != 1:
        raise ShapeMismatchError("make_csr_matrix: elem_values must be 1-D, "
                                 f"got shape {elem_values.shape}")
    _check_index_array("elem_col_indices", elem_col_indices,
                       elem_values.shape[0])
    _check_index_array("row_starts", row_starts, shape[0] + 1)
    if axes is not None and len(axes) != 2:
        raise ShapeMismatchError(f"make_csr_matrix: 2 axes expected, got "
                                 f"{len(axes)}")
    return CSRMatrix(shape, elem_values, elem_col_indices, row_starts,
                     tags=frozenset(normalize_tags(tags)), axes=axes)


class SparseMatmul(Array):
    """Base class of products of a sparse matrix with a dense array."""

    __slots__ = ()


class CSRMatmul(SparseMatmul):
    """``matrix @ array`` for a :class:`CSRMatrix` *matrix* and a dense
    *array* of shape ``(ncols,)`` or ``(ncols, k)``; the result has shape
    ``(nrows,)`` or ``(nrows, k)``.

    .. attribute:: matrix
    .. attribute:: array
    """

    __slots__ = ("array", "elem_col_indices", "elem_values", "matrix_axes",
                 "matrix_shape", "matrix_tags", "row_starts")
    _mapper_method = "map_csr_matmul"
    _fields = (("elem_values", ARRAY), ("elem_col_indices", ARRAY),
               ("row_starts", ARRAY), ("array", ARRAY),
               ("matrix_shape", VALUE), ("matrix_tags", VALUE),
               ("matrix_axes", VALUE))

    def __init__(self, elem_values: Array, elem_col_indices: Array,
                 row_starts: Array, array: Array, matrix_shape: tuple[int, int],
                 matrix_tags: frozenset[Tag] = _NO_TAGS,
                 matrix_axes: tuple[Axis, ...] | None = None,
                 axes: tuple[Axis, ...] | None = None,
                 tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        self.elem_values = elem_values
        self.elem_col_indices = elem_col_indices
        self.row_starts = row_starts
        self.array = array
        self.matrix_shape = cast("tuple[int, int]", tuple(matrix_shape))
        self.matrix_tags = frozenset(matrix_tags)
        self.matrix_axes = (default_axes(2) if matrix_axes is None
                            else tuple(matrix_axes))
        self.shape = (self.matrix_shape[0], *array.shape[1:])
        self.dtype = np.result_type(elem_values.dtype, array.dtype)
        self._finish_init(axes, tags, non_equality_tags)

    @property
    def matrix(self) -> CSRMatrix:
        return CSRMatrix(self.matrix_shape, self.elem_values,
                         self.elem_col_indices, self.row_starts,
                         tags=self.matrix_tags, axes=self.matrix_axes)


def sparse_matmul(x1: SparseMatrix, x2: Array, *,
                  tags: frozenset[Tag] = _NO_TAGS) -> Array:
    """The product of the sparse matrix *x1* with the dense array *x2*
    (1-D or 2-D, with as many rows as *x1* has columns)."""
    if not isinstance(x1, CSRMatrix):
        raise NotAnArrayError(f"sparse_matmul: the first operand must be a "
                              f"CSRMatrix, got a {type(x1).__name__}")
    if not isinstance(x2, Array):
        raise NotAnArrayError(f"sparse_matmul: the second operand must be an "
                              f"array, got a {type(x2).__name__}")
    if x2.ndim not in (1, 2) or x2.shape[0] != x1.shape[1]:
        raise ShapeMismatchError(
            f"sparse_matmul: a matrix of shape {x1.shape} cannot multiply an "
            f"array of shape {x2.shape} (1-D or 2-D with {x1.shape[1]} rows "
            "expected)")
    if x2.dtype.kind not in "biufc":
        raise DTypeError(f"sparse_matmul: cannot multiply an array of dtype "
                         f"{x2.dtype}")
    return CSRMatmul(x1.elem_values, x1.elem_col_indices, x1.row_starts, x2,
                     x1.shape, x1.tags, x1.axes,
                     tags=frozenset(normalize_tags(tags)))


def evaluate_csr_matmul(values: np.ndarray, cols: np.ndarray,
                        starts: np.ndarray, array: np.ndarray,
                        shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The product with NumPy: each entry's contribution scattered onto its
    row (the reference the device kernel is checked against)."""
    nrows = starts.shape[0] - 1
    rows = np.repeat(np.arange(nrows), np.diff(starts))
    nnz = rows.shape[0]
    vals = values[:nnz].astype(dtype, copy=False)
    picked = array[cols[:nnz]].astype(dtype, copy=False)
    contrib = vals.reshape(-1, *([1] * (picked.ndim - 1))) * picked
    out = np.zeros(shape, dtype)
    np.add.at(out, rows, contrib)
    return out
