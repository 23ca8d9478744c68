"""Targets: what a DAG is turned into, and the bound programs that run it.

.. autoclass:: Target

The program contract, :class:`~pytato_like.target.program.BoundProgram`
(importable from here too), is documented in :mod:`pytato_like.target.program`.

.. autoclass:: ProgramInputs
.. autofunction:: gather_program_inputs
.. autofunction:: unwrap_named
.. autofunction:: normalize_outputs
.. autofunction:: as_host_array
.. autofunction:: scalar_input_as_placeholder_dtype
.. autofunction:: check_input_value
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import numpy as np

from pytato_like.array import (
    Array,
    DataWrapper,
    InputArgumentBase,
    NamedArray,
    Placeholder,
    SizeParam,
    normalize_outputs,  # noqa: F401  (re-export: the one output normaliser)
)
from pytato_like.diagnostic import (
    InputDTypeMismatchError,
    InputShapeMismatchError,
    InvalidSizeError,
    MissingInputError,
    NameClashError,
    UnexpectedInputError,
)
from pytato_like.target.program import BoundProgram  # noqa: F401  (re-export)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class Target:
    """Base class of code generation targets."""


class ShapedValue(Protocol):
    """What an input value is checked by: a NumPy, pyopencl or JAX array
    (or NumPy scalar) has a shape and a dtype."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...


#: what a target's conversion makes of an input value
ValueT = TypeVar("ValueT")


@dataclasses.dataclass(frozen=True)
class ProgramInputs:
    """The inputs a DAG reads, by name."""

    placeholders: dict[str, Placeholder]
    size_params: dict[str, SizeParam]
    data_wrappers: list[DataWrapper]

    def check_and_convert(self, kwargs: Mapping[str, object],
                          to_numpy: Callable[[object, Placeholder], ValueT]
                          ) -> dict[str, ValueT | np.int64]:
        """The call arguments checked against the placeholders (names,
        shapes, dtypes) and converted by *to_numpy*; size parameters not
        passed are inferred from placeholder shapes where possible."""
        unexpected = set(kwargs) - set(self.placeholders) - set(self.size_params)
        if unexpected:
            raise UnexpectedInputError(
                f"unexpected input(s) {sorted(unexpected)}; the program takes "
                f"{sorted(self.placeholders) + sorted(self.size_params)}")
        values: dict[str, ValueT | np.int64] = {}
        for name, ph in self.placeholders.items():
            if name not in kwargs:
                raise MissingInputError(
                    f"missing input '{name}' (placeholder of shape {ph.shape}, "
                    f"dtype {ph.dtype})")
            values[name] = to_numpy(kwargs[name], ph)
        sizes: dict[str, int] = {}
        for name in self.size_params:
            if name in kwargs:
                sizes[name] = _size_value(name, kwargs[name])
        for name, ph in self.placeholders.items():
            # (a converted input: an array, or a value np.shape reads)
            shape = np.shape(cast("ArrayLike", values[name]))
            for dim, actual in zip(ph.shape, shape):
                if isinstance(dim, SizeParam) and dim.name not in sizes:
                    sizes[dim.name] = int(actual)
        for name in self.size_params:
            if name not in sizes:
                raise MissingInputError(f"missing value for size parameter '{name}'")
            values[name] = np.int64(sizes[name])
        return values


def _size_value(name: str, value: object) -> int:
    """The value passed for size parameter *name*, refused unless it is a
    non-negative integer (``int(2.5)`` would truncate silently)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, np.integer)):
        raise InvalidSizeError(f"size parameter '{name}' must be an integer, "
                               f"got {value!r} ({type(value).__name__})")
    if value < 0:
        raise InvalidSizeError(f"size parameter '{name}' must not be "
                               f"negative, got {value}")
    return int(value)


def as_host_array(value: object) -> np.ndarray:
    """*value* (a NumPy array, a pyopencl array or anything
    :func:`numpy.asarray` takes) as a NumPy array on the host."""
    if isinstance(value, np.ndarray):
        return value
    get = getattr(value, "get", None)
    if get is not None and hasattr(value, "queue"):  # pyopencl array
        return get()
    return np.asarray(value)


def scalar_input_as_placeholder_dtype(value: np.ndarray, ph: Placeholder
                                      ) -> np.ndarray:
    """A 0-d input (typically a Python scalar) converted to the placeholder's
    dtype when NumPy's same-kind casting allows it; anything else unchanged
    (and checked by :func:`check_input_value`)."""
    if value.dtype != ph.dtype and value.ndim == 0 and np.can_cast(
            value.dtype, ph.dtype, "same_kind"):
        return value.astype(ph.dtype)
    return value


def check_input_value(value: ShapedValue, ph: Placeholder,
                      shape: tuple[int, ...]) -> None:
    """Raise if *value* does not have the placeholder's shape and dtype."""
    if tuple(value.shape) != tuple(shape):
        raise InputShapeMismatchError(
            f"input '{ph.name}' has shape {tuple(value.shape)}, expected "
            f"{tuple(shape)}")
    if value.dtype != ph.dtype:
        raise InputDTypeMismatchError(
            f"input '{ph.name}' has dtype {value.dtype}, expected {ph.dtype}")


def unwrap_named(ary: Array) -> Array:
    """The array a :class:`~pytato_like.NamedArray` (output of a
    :class:`~pytato_like.DictOfNamedArrays`) names; any other array
    itself."""
    while isinstance(ary, NamedArray):
        ary = ary.expr
    return ary


def gather_program_inputs(order: list[Array]) -> ProgramInputs:
    """The inputs among the nodes *order*; raises :class:`NameClashError`
    when two different inputs share a name."""
    by_name: dict[str, InputArgumentBase] = {}
    placeholders: dict[str, Placeholder] = {}
    size_params: dict[str, SizeParam] = {}
    data_wrappers: list[DataWrapper] = []
    for node in order:
        if not isinstance(node, InputArgumentBase):
            continue
        if isinstance(node, DataWrapper):
            data_wrappers.append(node)
        # (every input kind has a name; a data wrapper's may be None)
        name: str | None = cast("Placeholder | SizeParam | DataWrapper",
                                node).name
        if name is None:
            continue
        other = by_name.get(name)
        if other is not None and other is not node and other != node:
            raise NameClashError(
                f"two different inputs share the name '{name}': "
                f"{type(other).__name__} of shape {other.shape}, dtype "
                f"{other.dtype} and {type(node).__name__} of shape "
                f"{node.shape}, dtype {node.dtype}")
        by_name[name] = node
        if isinstance(node, Placeholder):
            placeholders[name] = node
        elif isinstance(node, SizeParam):
            size_params[name] = node
    return ProgramInputs(placeholders, size_params, data_wrappers)
