"""Helpers for testing targets against NumPy: comparisons, inputs, random DAGs.

Differential testing is how this project knows a target is right: the same
program is evaluated lazily (by the target under test) and eagerly (by
NumPy), and the results must agree in shape, dtype and value.

Comparing results
-----------------

.. autofunction:: assert_results_close
.. autofunction:: default_tolerance
.. autofunction:: random_input
.. autofunction:: evaluate_lazy_and_eager
.. autofunction:: assert_matches_numpy

Random DAGs
-----------

:func:`make_random_dag` (seeded, for fuzzing from the command line) and
:func:`random_dags` (a :mod:`hypothesis` strategy, which shrinks failures to
small programs) build random programs from the same random choices twice:
once lazily with :mod:`pytato_like` and once eagerly with :mod:`numpy`. The
result is a :class:`RandomDAG` holding the lazy outputs, the input values
and NumPy's expected results::

    from pytato_like.testing import make_random_dag

    for seed in range(10_000):
        dag = make_random_dag(seed)
        dag.check(my_target(dag.result)(**dag.inputs))

The programs mix elementwise arithmetic (with NumPy 2 promotion, Python
scalars and broadcasting), math functions, comparisons, ``where``, casts,
reductions, ``einsum`` and ``@``, reshape/transpose/roll/concatenate/stack/
pad/broadcast_to, basic and advanced indexing (with NumPy and lazy index
arrays) and creation functions, over several dtypes, with nodes used several
times and several outputs. They avoid what would make comparisons flaky:
integer overflow (ranges are checked before each operation), NaN and
infinities (domains are guarded, e.g. ``log(1 + |x|)``), values beyond
``1e4``, and comparisons, casts to integers and floor divisions of values
that another evaluation order could round differently (these only see
values every correct target computes bit for bit). :meth:`RandomDAG.check`
compares exactly the outputs NumPy computes through correctly rounded real
``+ - * /`` at most (:attr:`RandomDAG.bitwise`), and the others with
tolerances derived from the dtypes and magnitudes each output went through.

.. autoclass:: RandomDAG
    :members: result, check, program_text
.. autofunction:: make_random_dag
.. autofunction:: random_dags
.. data:: DEFAULT_DTYPES

    The input dtypes random DAGs draw from by default.
"""

from __future__ import annotations

import dataclasses
import math
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

import pytato_like as pt
from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    Placeholder,
    make_dict_of_named_arrays,
    output_arrays,
)
from pytato_like.dtype import DTypeLike
from pytato_like.diagnostic import (
    IndexOutOfBoundsError,
    NegativeIntegerPowerError,
    PytatoLikeError,
)

if TYPE_CHECKING:
    from types import EllipsisType

# {{{ comparing results


_T = TypeVar("_T")


def default_tolerance(dtype: DTypeLike) -> float:
    """Relative tolerance for comparing values of *dtype* computed in a
    different order (0 for exact dtypes: integers and booleans)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0
    eps = np.finfo(dtype).eps
    # float64: 1e-10, float32: ~1e-4, float16: ~1e-1
    return float(min(1e-1, max(1e-10, 1e3 * eps)))


def assert_results_close(actual: object, expected: object, *, rtol: float | None = None,
                         atol: float | None = None, check_dtype: bool = True,
                         err_msg: str = "") -> None:
    """Assert that *actual* matches *expected* in shape, dtype and value.

    Both may be arrays (or NumPy scalars) or mappings from names to arrays
    (the result of a program returning a
    :class:`~pytato_like.DictOfNamedArrays`). Integers and booleans must match
    exactly. Floating-point and complex values match within *rtol* (default
    :func:`default_tolerance` of the dtype) and *atol* (default ``rtol``
    times the largest magnitude in *expected*, at least ``rtol``), so that
    cancellation in a different summation order does not fail a test; NaNs
    must sit at the same positions.
    """
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            raise AssertionError(f"{err_msg}expected a mapping of results, got "
                                 f"{type(actual).__name__}")
        if set(actual) != set(expected):
            raise AssertionError(f"{err_msg}result names differ: got "
                                 f"{sorted(actual)}, expected {sorted(expected)}")
        for name in expected:
            assert_results_close(actual[name], expected[name], rtol=rtol,
                                 atol=atol, check_dtype=check_dtype,
                                 err_msg=f"{err_msg}[{name!r}] ")
        return

    if not isinstance(actual, (np.ndarray, np.generic)):
        raise AssertionError(f"{err_msg}expected a NumPy array, got "
                             f"{type(actual).__name__}")
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(f"{err_msg}shape {actual.shape} != expected "
                             f"{expected.shape}")
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{err_msg}dtype {actual.dtype} != expected "
                             f"{expected.dtype}")
    if expected.dtype.kind not in "fc" and actual.dtype.kind not in "fc":
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    if rtol is None:
        rtol = max(default_tolerance(actual.dtype), default_tolerance(expected.dtype))
    if atol is None:
        finite = np.abs(expected[np.isfinite(expected)])
        scale = float(finite.max()) if finite.size else 1.0
        atol = rtol * max(1.0, scale)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=err_msg)


def random_input(rng: np.random.Generator, shape: tuple[int, ...],
                 dtype: DTypeLike) -> np.ndarray:
    """Test data of *shape* and *dtype*: small integers (non-negative for
    unsigned dtypes), standard normal floats, random booleans."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 10, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape)
                + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def evaluate_lazy_and_eager(fn: Callable[..., Any], *arrays: np.ndarray,
                            as_data_wrappers: bool = False
                            ) -> tuple[object, object]:
    """``(lazy, eager)``: *fn* applied to lazy inputs and evaluated by
    :func:`~pytato_like.generate_numpy`, and *fn* applied to *arrays*
    directly.

    *fn* is called as ``fn(xp, *operands)`` where *xp* is
    :mod:`pytato_like` or :mod:`numpy`, so one function states the program
    for both sides. The lazy inputs are placeholders named ``x0``, ``x1``,
    ... (data wrappers if *as_data_wrappers*).
    """
    operands: list[pt.Array]
    if as_data_wrappers:
        operands = [pt.make_data_wrapper(a) for a in arrays]
        inputs: dict[str, np.ndarray] = {}
    else:
        operands = [pt.make_placeholder(f"x{i}", a.shape, a.dtype)
                    for i, a in enumerate(arrays)]
        inputs = {f"x{i}": a for i, a in enumerate(arrays)}
    result = fn(pt, *operands)
    # A program need not read every input (``imag`` of a real array is
    # zeros): pass only the ones it reads, as a caller would.
    read = _placeholder_names(result)
    lazy = pt.generate_numpy(result)(**{name: value for name, value in inputs.items()
                                        if name in read})
    with np.errstate(all="ignore"):
        eager = fn(np, *arrays)
    return lazy, eager


def _placeholder_names(result: object) -> set[str]:
    return {node.name for node in topological_order(output_arrays(result))
            if isinstance(node, Placeholder)}


def assert_matches_numpy(fn: Callable[..., Any], *arrays: np.ndarray,
                         rtol: float | None = None, atol: float | None = None,
                         as_data_wrappers: bool = False) -> None:
    """Assert that *fn* (see :func:`evaluate_lazy_and_eager`) gives NumPy's
    shape, dtype and values when built lazily and run by the NumPy target."""
    lazy, eager = evaluate_lazy_and_eager(fn, *arrays,
                                          as_data_wrappers=as_data_wrappers)
    if not isinstance(eager, Mapping):
        eager = np.asarray(eager)
    assert_results_close(lazy, eager, rtol=rtol, atol=atol)

# }}}

# {{{ random DAGs

#: Input dtypes of random DAGs unless the caller chooses others.
DEFAULT_DTYPES: tuple[str, ...] = ("float64", "float32", "int64", "int32", "int8",
                                   "uint8", "uint16", "uint64", "bool", "complex128",
                                   "complex64")

# Values beyond these would make tolerances meaningless (floats) or risk
# overflow in a target that computes in another order (integers).
_FLOAT_LIMIT = 1e4
_INT_LIMIT = 2**31 - 1
# No value (or einsum iteration space) gets bigger than this: keeps a DAG
# cheap to evaluate many thousand times.
_MAX_SIZE = 256
_MAX_EINSUM_SPACE = 2048


class _Choices:
    """The random decisions a DAG is built from. Subclasses take them from
    :class:`random.Random` or from a hypothesis ``draw``."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""
        raise NotImplementedError

    def choice(self, options: Sequence[_T]) -> _T:
        return options[self.integer(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


class _SeededChoices(_Choices):
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


class _DrawnChoices(_Choices):
    def __init__(self, draw) -> None:
        from hypothesis import strategies as st
        self._draw = draw
        self._st = st

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(self._st.integers(lo, hi))

    def choice(self, options: Sequence[_T]) -> _T:
        return self._draw(self._st.sampled_from(options))


@dataclasses.dataclass
class _Value:
    """One array of the program under construction, in both forms."""

    label: str
    lazy: Array
    eager: np.ndarray
    # bit-for-bit reproducible by any correct evaluation order (inputs,
    # integer arithmetic, data movement, max/min, casts): only such values
    # are compared, floor-divided or cast to integers
    exact: bool
    # what NumPy computes it from, in NumPy's order, through IEEE's
    # correctly rounded real + - * / at most, besides what ``exact`` allows:
    # a target that evaluates as NumPy does (no reassociation, no fused
    # multiply-add; see doc/numerics.rst) gives the same bits
    bitwise: bool
    # largest machine epsilon of the rounding operations it went through
    eps: float
    # largest magnitude of it and everything it was computed from: sets the
    # absolute tolerance (cancellation)
    scale: float

    @property
    def dtype(self) -> np.dtype:
        return self.eager.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.eager.shape

    @property
    def kind(self) -> str:
        return self.eager.dtype.kind

    def int_range(self) -> tuple[int, int]:
        """Smallest and largest entry (integers and booleans)."""
        if self.eager.size == 0:
            return 0, 0
        return int(self.eager.min()), int(self.eager.max())

    def absmax(self) -> float:
        if self.eager.size == 0:
            return 0.0
        return float(np.max(np.abs(self.eager)))


def _fits(lo: float, hi: float, dtype: np.dtype) -> bool:
    """Whether all integers in ``[lo, hi]`` are representable in *dtype*
    (and within the integer limit)."""
    if dtype.kind == "b":
        return 0 <= lo and hi <= 1
    if dtype.kind not in "iu":
        return True
    info = np.iinfo(dtype)
    # signed: not the most negative value (its negation overflows)
    low = 0 if dtype.kind == "u" else max(info.min + 1, -_INT_LIMIT)
    return low <= lo and hi <= min(info.max, _INT_LIMIT)


def _hull(*ranges: tuple[float, float]) -> tuple[float, float]:
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def _product_range(a: tuple[float, float], b: tuple[float, float]
                   ) -> tuple[float, float]:
    products = [x * y for x in a for y in b]
    return min(products), max(products)


def _eps_of(dtype: np.dtype) -> float:
    if dtype.kind in "fc":
        return float(np.finfo(dtype).eps)
    return 0.0


@dataclasses.dataclass
class RandomDAG:
    """A random program with its inputs and NumPy's results.

    .. attribute:: outputs

        Output name -> lazy :class:`~pytato_like.Array`.

    .. attribute:: inputs

        Placeholder name -> NumPy value (exactly the placeholders the
        outputs read).

    .. attribute:: expected

        Output name -> result of the same operations run eagerly by NumPy.

    .. attribute:: tolerances

        Output name -> ``(rtol, atol)`` used by :meth:`check`.

    .. attribute:: bitwise

        The outputs NumPy computes through correctly rounded real ``+ - *
        /`` at most, besides integer arithmetic, data movement, max/min and
        casts: a target that evaluates in NumPy's order (no reassociation,
        no fused multiply-add) returns them bit for bit, and :meth:`check`
        compares them exactly.
    """

    outputs: dict[str, Array]
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    tolerances: dict[str, tuple[float, float]]
    lines: list[str]
    #: the typed error (from :mod:`pytato_like.diagnostic`) every target
    #: must raise when running the program, because NumPy raises on its
    #: values (a negative integer power, an out-of-range gather); None for
    #: a program that must run
    expected_error: type[Exception] | None = None
    bitwise: frozenset[str] = frozenset()

    @property
    def result(self):
        """The outputs as one :class:`~pytato_like.DictOfNamedArrays`."""
        return make_dict_of_named_arrays(self.outputs)

    def program_text(self) -> str:
        """The program as NumPy-style lines, one per operation."""
        return "\n".join(self.lines)

    def check(self, actual: Mapping[str, object], *,
              numpy_rounding: bool = True) -> None:
        """Assert that *actual* (output name -> array, e.g. what a target
        returned for :attr:`result`) matches :attr:`expected` in shape,
        dtype and value; the message shows the program. The outputs in
        :attr:`bitwise` must be equal, unless *numpy_rounding* is false (a
        target that does not promise NumPy's order of rounding, such as
        XLA's); the others match within :attr:`tolerances`."""
        if set(actual) != set(self.expected):
            raise AssertionError(f"outputs {sorted(actual)} != expected "
                                 f"{sorted(self.expected)}")
        for name, expected in self.expected.items():
            rtol, atol = ((0.0, 0.0) if numpy_rounding and name in self.bitwise
                          else self.tolerances[name])
            assert_results_close(
                actual[name], expected, rtol=rtol, atol=atol,
                err_msg=f"output {name!r} of the program\n"
                        f"{self.program_text()}\n")

    def check_raises(self, run: Callable[[], object]) -> None:
        """Assert that ``run()`` (running :attr:`result` on a target)
        raises :attr:`expected_error`, as NumPy raised on the same values."""
        assert self.expected_error is not None
        try:
            run()
        except self.expected_error:
            return
        except Exception as err:
            raise AssertionError(
                f"expected {self.expected_error.__name__}, got "
                f"{type(err).__name__}: {err}\nin the program\n"
                f"{self.program_text()}") from err
        raise AssertionError(f"expected {self.expected_error.__name__}, the "
                             f"program ran\n{self.program_text()}")

    def __repr__(self) -> str:
        return f"RandomDAG(\n{self.program_text()}\n)"


class _DAGBuilder:
    """Builds one random program, lazily and eagerly at once."""

    def __init__(self, choices: _Choices, dtypes: Sequence[str],
                 negative_indices: bool) -> None:
        self.c = choices
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.negative_indices = negative_indices
        # the operation NumPy raises on (see op_failing): label, lazy
        # array, typed error
        self.failing: tuple[str, Array, type[Exception]] | None = None
        self.data_rng = np.random.default_rng(choices.integer(0, 2**32 - 1))
        self.pool: list[_Value] = []
        self.inputs: dict[str, np.ndarray] = {}
        self.lines: list[str] = []

    # {{{ infrastructure

    def new_input(self, shape: tuple[int, ...], dtype: np.dtype,
                  data: np.ndarray | None = None, prefix: str = "x") -> _Value:
        name = f"{prefix}{len(self.inputs)}"
        if data is None:
            data = self.random_data(shape, dtype)
        self.inputs[name] = data
        value = _Value(name, pt.make_placeholder(name, shape, dtype), data,
                       exact=True, bitwise=True, eps=_eps_of(dtype),
                       scale=float(np.max(np.abs(data), initial=0.0)))
        self.pool.append(value)
        self.lines.append(f"{name} = placeholder(shape={shape}, dtype={dtype})")
        return value

    def random_data(self, shape, dtype: np.dtype) -> np.ndarray:
        rng = self.data_rng
        if dtype.kind == "b":
            return rng.integers(0, 2, shape).astype(bool)
        if dtype.kind == "u":
            return rng.integers(0, 8, shape).astype(dtype)
        if dtype.kind == "i":
            return rng.integers(-5, 6, shape).astype(dtype)
        data = rng.uniform(-2, 2, shape)
        if dtype.kind == "c":
            data = data + 1j * rng.uniform(-2, 2, shape)
        return data.astype(dtype)

    @overload
    def pick(self) -> _Value: ...

    @overload
    def pick(self, accept: Callable[[_Value], bool]) -> _Value | None: ...

    def pick(self, accept: Callable[[_Value], bool] | None = None) -> _Value | None:
        """A value from the pool, the more recent ones more likely (deep
        programs), any of them often (shared subexpressions)."""
        candidates = [v for v in self.pool if accept is None or accept(v)]
        if not candidates:
            return None
        if self.c.chance(50):
            return self.c.choice(candidates[-3:])
        return self.c.choice(candidates)

    def build(self, text: str, fn: Callable[..., Any], operands: Sequence[_Value],
              exact: bool, int_range: tuple[float, float] | None = None,
              rounded: bool = False) -> _Value | None:
        """Apply *fn* (``fn(xp, *arrays)``) to the eager and lazy operands.
        *exact*: the operation gives the same bits in any correct
        evaluation; *rounded*: it is a fixed sequence of correctly rounded
        real ``+ - * /`` (same bits when evaluated in NumPy's order).

        Returns None (the operation is dropped) if NumPy refuses it, if an
        integer result could leave *int_range*'s bounds for its dtype, or
        if a floating-point result is non-finite or too large."""
        try:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                eager = np.asarray(fn(np, *(v.eager for v in operands)))
        except (TypeError, ValueError, IndexError, FloatingPointError,
                ArithmeticError):
            return None
        if eager.dtype == np.float16 or eager.size > _MAX_SIZE:
            return None  # float16: from math on int8/bool; not worth a target's time
        if eager.dtype.kind in "iub":
            if int_range is None or not _fits(*int_range, eager.dtype):
                return None
        elif eager.dtype.kind in "fc":
            if eager.size and not (np.all(np.isfinite(eager))
                                   and np.max(np.abs(eager)) <= _FLOAT_LIMIT):
                return None
        else:
            return None

        label = f"v{len(self.lines)}"
        program = text.format(*(v.label for v in operands))
        try:
            lazy = fn(pt, *(v.lazy for v in operands))
        except PytatoLikeError as err:
            raise AssertionError(
                f"pytato_like refused an operation NumPy accepts: {program}\n"
                "in the program\n" + "\n".join(self.lines)) from err
        if not isinstance(lazy, pt.Array):
            return None  # e.g. all-scalar arithmetic folded by NumPy
        if tuple(lazy.shape) != eager.shape or lazy.dtype != eager.dtype:
            raise AssertionError(
                f"{program}: pytato_like gives shape {lazy.shape} dtype "
                f"{lazy.dtype}, NumPy gives {eager.shape} {eager.dtype}\n"
                "in the program\n" + "\n".join(self.lines))
        eps = max([v.eps for v in operands] + [_eps_of(eager.dtype)])
        scale = max([v.scale for v in operands]
                    + [float(np.max(np.abs(eager), initial=0.0))])
        value = _Value(label, lazy, eager, exact=exact and all(
            v.exact for v in operands), bitwise=(exact or rounded) and all(
            v.bitwise for v in operands), eps=eps, scale=scale)
        self.pool.append(value)
        self.lines.append(f"{label} = {program}")
        return value

    def broadcastable_with(self, a: _Value, b: _Value) -> bool:
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            return False
        return math.prod(shape) <= _MAX_SIZE

    def small_constant(self, dtype: np.dtype) -> bool | int | float | complex:
        """A Python scalar every array of *dtype* combines with (NEP 50)."""
        if dtype.kind == "b":
            return self.c.choice([True, False, 1, 2])
        if dtype.kind == "u":
            return self.c.choice([0, 1, 2, 3])
        if dtype.kind == "i":
            return self.c.choice([-2, -1, 1, 2, 3])
        if dtype.kind == "c":
            return self.c.choice([0.5, -1.5, 2, 0.5j, 1 - 1j])
        return self.c.choice([0.5, -1.5, 2.0, 3, np.float32(0.25)])

    # }}}

    # {{{ elementwise

    def op_binary(self) -> _Value | None:
        a = self.pick()
        b = self.pick(lambda v: self.broadcastable_with(a, v))
        assert b is not None  # the value it is matched with passes
        op = self.c.choice(["+", "-", "*", "/", "//", "%", "maximum", "minimum",
                            "arctan2", "<", "<=", ">", ">=", "equal",
                            "not_equal", "&", "|", "^", "logical_and",
                            "logical_or", "**"])
        ints = a.kind in "iub" and b.kind in "iub"
        ra = a.int_range() if ints else (0, 0)
        rb = b.int_range() if ints else (0, 0)
        fns = {
            "+": (lambda xp, x, y: x + y, (ra[0] + rb[0], ra[1] + rb[1])),
            "-": (lambda xp, x, y: x - y, (ra[0] - rb[1], ra[1] - rb[0])),
            "*": (lambda xp, x, y: x * y, _product_range(ra, rb)),
        }
        if op in fns:
            fn, rng = fns[op]
            return self.build(f"{{}} {op} {{}}", fn, (a, b), exact=ints,
                              int_range=rng, rounded="c" not in (a.kind, b.kind))
        if op in ("/", "//", "%"):
            # denominator 1 + |b| >= 1: no division by zero
            if b.kind == "c" or (b.kind in "iu" and not _fits(
                    0, max(abs(rb[0]), abs(rb[1])) + 1, b.dtype)):
                return None
            if op != "/" and not (a.exact and b.exact):
                return None  # floor is discontinuous: needs exact operands
            bound = max(abs(ra[0]), abs(ra[1]))
            denom_max = max(abs(rb[0]), abs(rb[1])) + 1
            rng = {"/": (0, 0), "//": (-bound, bound),
                   "%": (0, denom_max)}[op]
            fn = {"/": lambda xp, x, y: x / (1 + abs(y)),
                  "//": lambda xp, x, y: x // (1 + abs(y)),
                  "%": lambda xp, x, y: x % (1 + abs(y))}[op]
            return self.build(f"{{}} {op} (1 + abs({{}}))", fn, (a, b),
                              exact=op != "/", int_range=rng,
                              rounded=op == "/" and a.kind != "c")
        if op == "**":
            # integer exponents of at most 3 in magnitude; negative ones
            # only for inexact bases (integer bases raise: op_failing)
            if b.kind not in "iu" or a.kind == "b" or not b.exact:
                return None
            rb = b.int_range()
            if max(abs(rb[0]), abs(rb[1])) > 3 or (ints and rb[0] < 0):
                return None
            bound = max(abs(ra[0]), abs(ra[1]))
            rng = (-bound**rb[1], bound**rb[1]) if ints else (0, 0)
            return self.build("{} ** {}", _ARITH["**"], (a, b), exact=ints,
                              int_range=rng)
        if op in ("maximum", "minimum"):
            return self.build(f"{op}({{}}, {{}})",
                              lambda xp, x, y: getattr(xp, op)(x, y), (a, b),
                              exact=True, int_range=_hull(ra, rb))
        if op == "arctan2":
            if not a.exact or "c" in (a.kind, b.kind):
                return None  # jumps by 2 pi where a changes sign
            return self.build("arctan2({}, {})",
                              lambda xp, x, y: xp.arctan2(x, y), (a, b),
                              exact=False)
        if op in ("<", "<=", ">", ">="):
            if not (a.exact and b.exact) or "c" in (a.kind, b.kind):
                return None
            return self.build(f"{{}} {op} {{}}", _COMPARE[op], (a, b),
                              exact=True, int_range=(0, 1))
        if op in ("equal", "not_equal", "logical_and", "logical_or"):
            if not (a.exact and b.exact):
                return None
            return self.build(f"{op}({{}}, {{}})",
                              lambda xp, x, y: getattr(xp, op)(x, y), (a, b),
                              exact=True, int_range=(0, 1))
        # & | ^ on integers and booleans
        if not ints:
            return None
        bound = 2 * max(abs(ra[0]), abs(ra[1]), abs(rb[0]), abs(rb[1])) + 1
        lo = 0 if ra[0] >= 0 and rb[0] >= 0 else -bound
        return self.build(f"{{}} {op} {{}}", _BITWISE[op], (a, b), exact=True,
                          int_range=(lo, bound))

    def op_scalar(self) -> _Value | None:
        a = self.pick()
        c = self.small_constant(a.dtype)
        reflected = self.c.chance(40)
        op = self.c.choice(["+", "-", "*", "/", "//", "%", "**", "<<", ">>",
                            "&", "|", "<", ">=", "maximum", "minimum"])
        ints = a.kind in "iub"
        ra = a.int_range() if ints else (0, 0)
        rc = (int(c.real), int(c.real)) if not isinstance(c, complex) else (0, 0)
        if op in ("/", "//", "%", "**", "<<", ">>") or op in ("&", "|"):
            reflected = False
        bound = max(abs(ra[0]), abs(ra[1]))
        fn: Callable[..., Any]
        # (+ - * / of a real array and a real constant: one rounding each)
        rounded = (op in ("+", "-", "*", "/") and a.kind != "c"
                   and not isinstance(c, complex))
        if op in ("+", "-", "*"):
            rng = {"+": (ra[0] + rc[0], ra[1] + rc[1]),
                   "-": ((rc[0] - ra[1], rc[1] - ra[0]) if reflected
                         else (ra[0] - rc[1], ra[1] - rc[0])),
                   "*": _product_range(ra, rc)}[op]
            fn = _ARITH[op]
            exact = ints and not isinstance(c, float)
        elif op == "/":
            if c == 0:
                return None
            rng, fn, exact = (0, 0), _ARITH["/"], False
        elif op in ("//", "%"):
            if not a.exact or a.kind == "c" or isinstance(c, complex):
                return None
            c = self.c.choice([2, 3, -2]) if a.kind != "u" else self.c.choice([2, 3])
            rng = (-bound, bound) if op == "//" else (-abs(c), abs(c))
            fn, exact = _ARITH[op], True
        elif op == "**":
            if a.kind == "b":
                return None  # NumPy: bool_array ** 2 is int8, np.power gives int64
            # negative integer powers of integers raise: op_failing
            c = self.c.choice([0, 1, 2, 3] if ints else [0, 1, 2, 3, -1, -2])
            rng = (-bound**c, bound**c) if c >= 0 else (0, 0)
            fn, exact = _ARITH["**"], ints
        elif op in ("<<", ">>"):
            if a.kind not in "iu" or (op == "<<" and ra[0] < 0):
                return None  # left shift of negative numbers: undefined in C
            c = self.c.choice([0, 1, 2, 3])
            rng = (ra[0] * 2**c, ra[1] * 2**c) if op == "<<" else ra
            fn, exact = _ARITH[op], True
        elif op in ("&", "|"):
            if not ints:
                return None
            c = self.c.choice([0, 1, 3, 6])
            rng = (-2 * bound - 8, 2 * bound + 8)
            fn, exact = _BITWISE[op], True
        elif op in ("<", ">="):
            if not a.exact or a.kind == "c" or isinstance(c, complex):
                return None
            rng, fn, exact = (0, 1), _COMPARE[op], True
        else:
            if a.kind == "c" or isinstance(c, complex):
                return None
            rng = _hull(ra, rc)
            fn = (lambda xp, x, y, op=op: getattr(xp, op)(x, y))
            exact = True
        if reflected:
            return self.build(f"{c!r} {op} {{}}", lambda xp, x: fn(xp, c, x), (a,),
                              exact=exact, int_range=rng, rounded=rounded)
        if op in ("maximum", "minimum"):
            return self.build(f"{op}({{}}, {c!r})", lambda xp, x: fn(xp, x, c),
                              (a,), exact=exact, int_range=rng)
        return self.build(f"{{}} {op} {c!r}", lambda xp, x: fn(xp, x, c), (a,),
                          exact=exact, int_range=rng, rounded=rounded)

    def op_unary(self) -> _Value | None:
        a = self.pick()
        real = a.kind in "fiub"
        ints = a.kind in "iub"
        ra = a.int_range() if ints else (0, 0)
        bound = max(abs(ra[0]), abs(ra[1]))
        op = self.c.choice(["-", "abs", "~", "sin", "cos", "tanh", "arctan", "exp",
                            "sinh", "cosh", "sqrt", "log", "log10", "tan", "arcsin",
                            "arccos", "isnan", "real", "imag", "conj",
                            "logical_not"])
        if op == "-":
            return self.build("-{}", lambda xp, x: -x, (a,), exact=True,
                              int_range=(-ra[1], -ra[0]))
        if op == "abs":
            return self.build("abs({})", lambda xp, x: abs(x), (a,),
                              exact=a.kind != "c", int_range=(0, bound))
        if op == "~":
            if a.kind == "u":
                top = int(np.iinfo(a.dtype).max)
                rng = (top - ra[1], top - ra[0])
            else:
                rng = (0, 1) if a.kind == "b" else (-ra[1] - 1, -ra[0] - 1)
            return self.build("~{}", lambda xp, x: ~x, (a,), exact=True,
                              int_range=rng)
        if op in ("real", "imag", "conj"):
            return self.build(f"{op}({{}})", lambda xp, x: getattr(xp, op)(x), (a,),
                              exact=True, int_range=ra if op != "conj" or a.kind != "b"
                              else (0, 1))
        if op == "isnan":
            return self.build("isnan({})", lambda xp, x: xp.isnan(x), (a,),
                              exact=True, int_range=(0, 1))
        if op == "logical_not":
            if not a.exact:
                return None
            return self.build("logical_not({})", lambda xp, x: xp.logical_not(x),
                              (a,), exact=True, int_range=(0, 1))
        absmax = a.absmax()
        if not real:
            # complex math: functions with branch cuts only of values every
            # target holds bit for bit (the sign of a zero imaginary part
            # picks the side of the cut); the others away from overflow
            cut = op in ("sqrt", "log", "log10", "arcsin", "arccos", "arctan")
            if (cut and not a.exact) or (not cut and absmax > 4):
                return None
            if op in ("tan",) and absmax > 1.4:
                return None   # poles at pi/2
            if op == "arctan" and np.any(np.abs(np.abs(a.eager.imag) - 1) < .1):
                return None   # poles at +-1j
            return self.build(f"{op}({{}})", lambda xp, x: getattr(xp, op)(x),
                              (a,), exact=False)
        guarded = {
            "sqrt": ("sqrt(abs({}))", lambda xp, x: xp.sqrt(abs(x))),
            "log": ("log(1 + abs({}))", lambda xp, x: xp.log(1 + abs(x))),
            "log10": ("log10(1 + abs({}))", lambda xp, x: xp.log10(1 + abs(x))),
            "tan": ("tan(tanh({}))", lambda xp, x: xp.tan(xp.tanh(x))),
            "arcsin": ("arcsin(0.5 * tanh({}))",
                       lambda xp, x: xp.arcsin(0.5 * xp.tanh(x))),
            "arccos": ("arccos(0.5 * tanh({}))",
                       lambda xp, x: xp.arccos(0.5 * xp.tanh(x))),
        }
        if op in guarded:
            text, fn = guarded[op]
            return self.build(text, fn, (a,), exact=False)
        if op in ("exp", "sinh", "cosh") and absmax > 5:
            return None
        return self.build(f"{op}({{}})", lambda xp, x: getattr(xp, op)(x), (a,),
                          exact=False)

    def op_where(self) -> _Value | None:
        cond = self.pick(lambda v: v.kind == "b" and v.exact)
        if cond is None:
            base = self.pick(lambda v: v.exact and v.kind in "fiu")
            if base is None:
                return None
            cond = self.build("{} > 0", lambda xp, x: x > 0, (base,), exact=True,
                              int_range=(0, 1))
            if cond is None:
                return None
        a = self.pick(lambda v: self.broadcastable_with(cond, v))
        assert a is not None  # the value it is matched with passes
        b = self.pick(lambda v: self.broadcastable_with(cond, v)
                      and self.broadcastable_with(a, v)
                      and math.prod(np.broadcast_shapes(cond.shape, a.shape,
                                                        v.shape)) <= _MAX_SIZE)
        if b is None:
            return None
        ranges = [v.int_range() if v.kind in "iub" else (0, 0) for v in (a, b)]
        if self.c.chance(25):
            c = self.small_constant(a.dtype)
            return self.build(f"where({{}}, {{}}, {c!r})",
                              lambda xp, k, x: xp.where(k, x, c), (cond, a),
                              exact=True, int_range=_hull(ranges[0], (-3, 3)))
        return self.build("where({}, {}, {})", lambda xp, k, x, y: xp.where(k, x, y),
                          (cond, a, b), exact=True, int_range=_hull(*ranges))

    def op_cast(self) -> _Value | None:
        a = self.pick()
        to = self.c.choice(self.dtypes + [np.dtype(np.int16), np.dtype(np.float32)])
        rng = a.int_range() if a.kind in "iub" else (0, 0)
        note = ""
        if to.kind in "iub":
            if a.kind == "c" or not a.exact:
                return None  # truncation could round differently
            if a.kind == "f":
                if a.eager.size:
                    rng = (math.trunc(float(a.eager.min())),
                           math.trunc(float(a.eager.max())))
            if to.kind == "b":
                rng = (0, 1)
            elif not _fits(*rng, to):
                # NumPy's C cast wraps (floats through int32 or int64, see
                # doc/numerics.rst); values here stay below 2^31, where
                # that is well defined: the result's range is what it is
                with np.errstate(all="ignore"):
                    wrapped = a.eager.astype(to)
                rng = ((int(wrapped.min()), int(wrapped.max())) if wrapped.size
                       else (0, 0))
                note = "  # wraps"
        return self.build(f"{{}}.astype({to.name}){note}", lambda xp, x: x.astype(to),
                          (a,), exact=True, int_range=rng)

    def op_creation(self) -> _Value | None:
        a = self.pick(lambda v: v.kind != "b")
        if a is None:
            return None
        ra = a.int_range() if a.kind in "iu" else (0, 0)
        shape = a.shape
        which = self.c.choice(["arange", "ones", "full", "eye", "zeros_like",
                               "full_like"])
        if which == "arange":
            if not shape:
                return None
            n = shape[-1]
            return self.build(f"{{}} + arange({n})", lambda xp, x: x + xp.arange(n),
                              (a,), exact=a.kind in "iu",
                              int_range=(ra[0], ra[1] + n), rounded=a.kind == "f")
        if which == "ones":
            extra = (self.c.integer(1, 3), *shape)
            return self.build(f"{{}} * ones({extra})",
                              lambda xp, x: x * xp.ones(extra, x.dtype), (a,),
                              exact=True, int_range=ra)
        if which == "full":
            c = self.small_constant(a.dtype)
            return self.build(f"{{}} - full({shape}, {c!r})",
                              lambda xp, x: x - xp.full(shape, c), (a,),
                              exact=a.kind in "iu", int_range=(ra[0] - 3, ra[1] + 3),
                              rounded=a.kind == "f")
        if which == "eye":
            if len(shape) < 2:
                return None
            n, m = shape[-2:]
            k = self.c.integer(-1, 1)
            return self.build(f"{{}} + eye({n}, {m}, {k})",
                              lambda xp, x: x + xp.eye(n, m, k, dtype=x.dtype), (a,),
                              exact=a.kind in "iu", int_range=(ra[0], ra[1] + 1),
                              rounded=a.kind == "f")
        if which == "zeros_like":
            return self.build("zeros_like({}) + 1", lambda xp, x: xp.zeros_like(x) + 1,
                              (a,), exact=True, int_range=(1, 1))
        c = self.small_constant(a.dtype)
        return self.build(f"full_like({{}}, {c!r})",
                          lambda xp, x: xp.full_like(x, c), (a,), exact=True,
                          int_range=(-3, 3))

    # }}}

    # {{{ reductions and products

    def op_reduction(self) -> _Value | None:
        a = self.pick()
        op = self.c.choice(["sum", "prod", "amax", "amin", "any", "all", "mean"])
        ndim = len(a.shape)
        form = self.c.integer(0, 3)
        if form == 0 or ndim == 0:
            axis: int | tuple[int, ...] | None = None
        elif form == 1:
            axis = self.c.integer(-ndim, ndim - 1)
        else:
            axes = [ax for ax in range(ndim) if self.c.chance(50)]
            axis = tuple(ax - ndim if self.c.chance(30) else ax for ax in axes)
        keepdims = self.c.chance(30)
        reduced = (range(ndim) if axis is None
                   else [axis] if isinstance(axis, int) else axis)
        n = math.prod(a.shape[ax] for ax in reduced)
        ra = a.int_range() if a.kind in "iub" else (0, 0)
        bound = max(abs(ra[0]), abs(ra[1]))
        rng = {"sum": (min(0, n * ra[0]), max(0, n * ra[1])),
               "prod": (-bound**n, bound**n) if bound > 1 else (-1, 1),
               "amax": ra, "amin": ra, "any": (0, 1), "all": (0, 1),
               "mean": (0, 0)}[op]
        if op in ("any", "all") and not a.exact:
            return None
        exact = op in ("amax", "amin", "any", "all") or a.kind in "iub" and op != "mean"
        return self.build(f"{op}({{}}, axis={axis!r}, keepdims={keepdims})",
                          lambda xp, x: getattr(xp, op)(x, axis=axis,
                                                       keepdims=keepdims),
                          (a,), exact=exact, int_range=rng)

    def op_einsum(self) -> _Value | None:
        n_operands = self.c.integer(1, 3)
        operands = []
        letters: dict[str, int] = {}   # letter -> extent (not 1 if possible)
        specs = []
        alphabet = "abcdefgh"
        for _ in range(n_operands):
            v = self.pick(lambda v: v.kind != "b" and len(v.shape) <= 3)
            if v is None:
                return None
            spec = ""
            for dim in v.shape:
                reusable = [c for c, ext in letters.items()
                            if (ext == dim or dim == 1 or ext == 1)
                            and c not in spec]
                if reusable and self.c.chance(60):
                    c = self.c.choice(reusable)
                elif len(letters) < len(alphabet) and (not spec or self.c.chance(85)):
                    c = alphabet[len(letters)]
                else:
                    same = [c for c in spec if letters[c] == dim and dim != 1]
                    if not same:
                        return None
                    c = self.c.choice(same)  # repeated index: a diagonal
                if letters.get(c, 1) == 1:
                    letters[c] = dim
                spec += c
            operands.append(v)
            specs.append(spec)
        used = sorted(set("".join(specs)))
        out = [c for c in used if self.c.chance(50)]
        order = list(out)
        for i in range(len(order) - 1, 0, -1):  # shuffle with our choices
            j = self.c.integer(0, i)
            order[i], order[j] = order[j], order[i]
        if math.prod(letters[c] for c in used) > _MAX_EINSUM_SPACE:
            return None
        subscripts = ",".join(specs) + "->" + "".join(order)
        if self.c.chance(15):
            subscripts = ",".join(specs)  # implicit output
        bound = math.prod(max(1, v.absmax()) for v in operands) * math.prod(
            letters[c] for c in used if c not in order)
        ints = all(v.kind in "iu" for v in operands)
        return self.build(
            f"einsum({subscripts!r}, " + ", ".join("{}" for _ in operands) + ")",
            lambda xp, *xs: xp.einsum(subscripts, *xs), operands,
            exact=ints, int_range=(-bound, bound))

    def op_matmul(self) -> _Value | None:
        a = self.pick(lambda v: v.kind != "b" and len(v.shape) >= 1)
        if a is None:
            return None

        def compatible(v: _Value) -> bool:
            if v.kind == "b" or not v.shape:
                return False
            try:
                shape = np.matmul(np.empty(a.shape, np.int8),
                                  np.empty(v.shape, np.int8)).shape
            except ValueError:
                return False
            return math.prod(shape) <= _MAX_SIZE
        b = self.pick(compatible)
        k = a.shape[-1]
        bound_a = max(1.0, a.absmax())
        ints = a.kind in "iu"
        if b is None or self.c.chance(30):
            if len(a.shape) < 2:
                return self.build("{0} @ {0}", lambda xp, x: x @ x, (a,),
                                  exact=ints, int_range=(-k * bound_a**2,
                                                         k * bound_a**2))
            perm = (*range(len(a.shape) - 2), len(a.shape) - 1, len(a.shape) - 2)
            return self.build(f"{{0}} @ transpose({{0}}, {perm})",
                              lambda xp, x: x @ xp.transpose(x, perm), (a,),
                              exact=ints, int_range=(-k * bound_a**2,
                                                     k * bound_a**2))
        bound = k * bound_a * max(1.0, b.absmax())
        return self.build("{} @ {}", lambda xp, x, y: x @ y, (a, b),
                          exact=ints and b.kind in "iu", int_range=(-bound, bound))

    # }}}

    # {{{ data movement

    def _keep(self, a: _Value) -> tuple[float, float]:
        return a.int_range() if a.kind in "iub" else (0, 0)

    def op_reshape(self) -> _Value | None:
        a = self.pick()
        factors = _prime_factors(a.eager.size)
        ndim = self.c.integer(1, 4)
        shape = [1] * ndim
        for f in factors:
            shape[self.c.integer(0, ndim - 1)] *= f
        if a.eager.size and self.c.chance(40):
            shape[self.c.integer(0, ndim - 1)] = -1
        newshape = tuple(shape)
        order = self.c.choice(["C", "F"])
        if self.c.chance(30):
            return self.build(f"{{}}.reshape({newshape}, order={order!r})",
                              lambda xp, x: x.reshape(newshape, order=order), (a,),
                              exact=True, int_range=self._keep(a))
        return self.build(f"reshape({{}}, {newshape}, order={order!r})",
                          lambda xp, x: xp.reshape(x, newshape, order=order), (a,),
                          exact=True, int_range=self._keep(a))

    def op_transpose(self) -> _Value | None:
        a = self.pick(lambda v: len(v.shape) >= 2)
        if a is None:
            return None
        if self.c.chance(30):
            return self.build("{}.T", lambda xp, x: x.T, (a,), exact=True,
                              int_range=self._keep(a))
        perm = list(range(len(a.shape)))
        for i in range(len(perm) - 1, 0, -1):
            j = self.c.integer(0, i)
            perm[i], perm[j] = perm[j], perm[i]
        perm_t = tuple(perm)
        return self.build(f"transpose({{}}, {perm_t})",
                          lambda xp, x: xp.transpose(x, perm_t), (a,), exact=True,
                          int_range=self._keep(a))

    def op_roll(self) -> _Value | None:
        a = self.pick()
        ndim = len(a.shape)
        first_shift = self.c.integer(-6, 6)
        shift: int | tuple[int, int] = first_shift
        if ndim == 0 or self.c.chance(25):
            axis: int | tuple[int, int] | None = None
        elif ndim >= 2 and self.c.chance(25):
            axis = (0, -1)
            shift = (first_shift, self.c.integer(-3, 3))
        else:
            axis = self.c.integer(-ndim, ndim - 1)
        return self.build(f"roll({{}}, {shift!r}, axis={axis!r})",
                          lambda xp, x: xp.roll(x, shift, axis=axis), (a,),
                          exact=True, int_range=self._keep(a))

    def op_concatenate(self) -> _Value | None:
        a = self.pick(lambda v: len(v.shape) >= 1)
        if a is None:
            return None
        ndim = len(a.shape)
        axis = self.c.integer(-ndim, ndim - 1)
        ax = axis % ndim

        def joinable(v: _Value) -> bool:
            return (len(v.shape) == ndim
                    and all(d1 == d2 for i, (d1, d2) in enumerate(zip(a.shape, v.shape))
                            if i != ax))
        b = self.pick(joinable)
        assert b is not None  # the value it is matched with passes
        operands = [a, b] if self.c.chance(70) else [a, b, a]
        rng = _hull(*(self._keep(v) for v in operands))
        return self.build(
            "concatenate([" + ", ".join("{}" for _ in operands) + f"], axis={axis})",
            lambda xp, *xs: xp.concatenate(xs, axis=axis), operands, exact=True,
            int_range=rng)

    def op_stack(self) -> _Value | None:
        a = self.pick()
        b = self.pick(lambda v: v.shape == a.shape)
        assert b is not None  # the value it is matched with passes
        ndim = len(a.shape) + 1
        axis = self.c.integer(-ndim, ndim - 1)
        operands = [a, b] if self.c.chance(70) else [b, a, a]
        rng = _hull(*(self._keep(v) for v in operands))
        return self.build(
            "stack([" + ", ".join("{}" for _ in operands) + f"], axis={axis})",
            lambda xp, *xs: xp.stack(xs, axis=axis), operands, exact=True,
            int_range=rng)

    def op_unit_axes(self) -> _Value | None:
        a = self.pick()
        ndim = len(a.shape)
        units = [i for i, d in enumerate(a.shape) if d == 1]
        if units and self.c.chance(50):
            axis = self.c.choice([None, self.c.choice(units)])
            return self.build(f"squeeze({{}}, axis={axis!r})",
                              lambda xp, x: xp.squeeze(x, axis=axis), (a,),
                              exact=True, int_range=self._keep(a))
        axis = self.c.integer(-ndim - 1, ndim)
        return self.build(f"expand_dims({{}}, {axis})",
                          lambda xp, x: xp.expand_dims(x, axis), (a,), exact=True,
                          int_range=self._keep(a))

    def op_broadcast_to(self) -> _Value | None:
        a = self.pick(lambda v: v.eager.size <= _MAX_SIZE // 4)
        if a is None:
            return None
        shape = tuple(self.c.integer(2, 3) if d == 1 and self.c.chance(60) else d
                      for d in a.shape)
        if self.c.chance(50):
            shape = (self.c.integer(1, 3), *shape)
        return self.build(f"broadcast_to({{}}, {shape})",
                          lambda xp, x: xp.broadcast_to(x, shape), (a,), exact=True,
                          int_range=self._keep(a))

    def op_pad(self) -> _Value | None:
        a = self.pick(lambda v: len(v.shape) >= 1)
        if a is None:
            return None
        widths = tuple((self.c.integer(0, 2), self.c.integer(0, 2)) for _ in a.shape)
        c = self.c.choice([0, 1])
        rng = _hull(self._keep(a), (c, c))
        return self.build(f"pad({{}}, {widths}, constant_values={c})",
                          lambda xp, x: xp.pad(x, widths, mode="constant",
                                               constant_values=c),
                          (a,), exact=True, int_range=rng)

    # }}}

    # {{{ indexing

    def random_slice(self, dim: int) -> slice:
        step = self.c.choice([None, 1, 2, -1, -2, 3])
        start = self.c.choice([None, self.c.integer(-dim - 1, dim + 1)])
        stop = self.c.choice([None, self.c.integer(-dim - 1, dim + 1)])
        return slice(start, stop, step)

    def op_basic_index(self) -> _Value | None:
        a = self.pick()
        key: list[int | slice | EllipsisType | None] = []
        for dim in a.shape:
            r = self.c.integer(0, 99)
            if r < 25 and dim > 0:
                key.append(self.c.integer(-dim, dim - 1))
            elif r < 75:
                key.append(self.random_slice(dim))
            else:
                key.append(slice(None))
            if self.c.chance(10):
                key.append(None)
        if self.c.chance(20):
            key.insert(self.c.integer(0, len(key)), None)
        if key and self.c.chance(20):
            # replace a run of trailing full slices by an ellipsis
            cut = self.c.integer(0, len(key))
            key = key[:cut] + [Ellipsis]
        key_t = tuple(key)
        return self.build(f"{{}}[{_key_text(key_t)}]", lambda xp, x: x[key_t], (a,),
                          exact=True, int_range=self._keep(a))

    def index_array(self, dim: int, shape: tuple[int, ...]
                    ) -> np.ndarray | _Value | None:
        """An integer index array valid for an axis of length *dim*: a NumPy
        constant, a lazy input, or computed from an integer value."""
        lo = -dim if self.negative_indices else 0
        kind = self.c.integer(0, 2)
        if kind == 0:
            return np.asarray(self.data_rng.integers(lo, dim, shape))
        if kind == 1:
            dtype = np.dtype(self.c.choice(["int64", "int32", "uint8", "int8"]))
            if dim > 127:
                dtype = np.dtype(np.int64)
            if dtype.kind == "u":
                lo = 0
            data = np.asarray(self.data_rng.integers(lo, dim, shape)).astype(dtype)
            return self.new_input(shape, dtype, data, prefix="idx")
        base = self.pick(lambda v: v.kind in "iu" and 0 < len(v.shape) <= 2
                         and v.eager.size <= 12)
        if base is None:
            return np.asarray(self.data_rng.integers(lo, dim, shape))
        return self.build(f"{{}} % {dim}", lambda xp, x: x % dim, (base,),
                          exact=True, int_range=(0, dim - 1))

    def op_advanced_index(self) -> _Value | None:
        a = None
        if self.c.chance(40):
            a = self.pick(lambda v: len(v.shape) >= 3 and 0 not in v.shape)
        if a is None:
            a = self.pick(lambda v: len(v.shape) >= 1 and 0 not in v.shape)
        if a is None:
            return None
        ndim = len(a.shape)
        if self.c.chance(15):
            # a boolean NumPy mask over one axis
            ax = self.c.integer(0, ndim - 1)
            mask = self.data_rng.integers(0, 2, a.shape[ax]).astype(bool)
            key_t = (*([slice(None)] * ax), mask)
            return self.build(f"{{}}[{_key_text(key_t)}]",
                              lambda xp, x: x[key_t], (a,), exact=True,
                              int_range=self._keep(a))
        index_shape = self.c.choice([(2,), (3,), (1,), (2, 1), (2, 3), ()])
        key: list[int | slice | np.ndarray | _ArraySlot] = []
        arrays: list[_Value] = []
        n_adv = 0
        forced = self.c.integer(0, ndim - 1)  # at least this axis is advanced
        # first and last axes advanced, a slice between: NumPy moves the
        # index dimensions to the front (AdvancedIndexInNoncontiguousAxes)
        separated = ndim >= 3 and self.c.chance(40)
        for axis, dim in enumerate(a.shape):
            r = self.c.integer(0, 99)
            if separated:
                r = 0 if axis in (0, ndim - 1) else 99
                if axis == 0 and dim > 0 and self.c.chance(30):
                    r = 50  # an int counts as an advanced index here
            if r < 40 or (axis == forced and not separated):
                shape = index_shape
                if len(shape) == 2 and self.c.chance(50):
                    shape = (shape[1],)  # broadcasts against the others
                idx = self.index_array(dim, shape)
                if idx is None:
                    return None
                if isinstance(idx, _Value):
                    key.append(_ArraySlot(len(arrays)))
                    arrays.append(idx)
                else:
                    key.append(idx)
                n_adv += 1
            elif r < 60 and dim > 0:
                key.append(self.c.integer(-dim, dim - 1))
            elif r < 80:
                key.append(self.random_slice(dim))
            else:
                key.append(slice(None))
        if n_adv == 0:
            return None

        def fn(xp, x, *idx):
            return x[tuple(idx[k.i] if isinstance(k, _ArraySlot) else k
                           for k in key)]
        text = "{}[" + ", ".join("{}" if isinstance(k, _ArraySlot)
                                 else _key_text((k,)) for k in key) + "]"
        return self.build(text, fn, (a, *arrays), exact=True,
                          int_range=_hull(self._keep(a), *(
                              self._keep(v) for v in arrays)))

    # }}}

    # {{{ operations NumPy raises on

    def op_failing(self) -> bool:
        """Build an operation NumPy raises on for the values at hand (an
        integer to a negative integer power, a gather index out of range),
        sometimes reduced or combined further; the program must then raise
        the typed error. Returns whether one was built."""
        if self.c.chance(50):
            built = self._failing_power() or self._failing_gather()
        else:
            built = self._failing_gather() or self._failing_power()
        if not built or not self.c.chance(50):
            return built
        label, lazy, error = self.failing  # type: ignore[misc]
        # the error must survive what is done with the value next
        if self.c.chance(50):
            text, lazy = f"sum({label})", pt.sum(lazy)
        else:
            def joins(v: _Value) -> bool:
                try:
                    shape = np.broadcast_shapes(tuple(lazy.shape), v.shape)
                except ValueError:
                    return False
                return v.kind in "iuf" and math.prod(shape) <= _MAX_SIZE
            other = self.pick(joins)
            if other is None:
                return True
            text, lazy = f"{label} + {other.label}", lazy + other.lazy
        new_label = f"v{len(self.lines)}"
        self.lines.append(f"{new_label} = {text}")
        self.failing = (new_label, lazy, error)
        return True

    def _record_failure(self, text: str, fn: Callable[..., Any],
                        operands: Sequence[_Value], numpy_error: type[Exception],
                        error: type[Exception]) -> bool:
        """Record ``fn(xp, *operands)`` as the failing value if NumPy raises
        *numpy_error* on it. A lazy front end may find the problem while
        building (constant indices): then it must raise *error* there."""
        try:
            with np.errstate(all="ignore"):
                fn(np, *(v.eager for v in operands))
        except numpy_error:
            pass
        else:
            return False
        program = text.format(*(v.label for v in operands))
        try:
            lazy = fn(pt, *(v.lazy for v in operands))
        except error:
            self.lines.append(f"# {program}: raises {error.__name__} when built")
            return False
        label = f"v{len(self.lines)}"
        self.lines.append(f"{label} = {program}  # NumPy raises")
        self.failing = (label, lazy, error)
        return True

    def _failing_power(self) -> bool:
        a = self.pick(lambda v: v.kind in "iu" and v.eager.size > 0)
        if a is None:
            return False
        exp_t = np.dtype(self.c.choice(["int8", "int16", "int32", "int64"]))
        form = self.c.integer(0, 2)
        if form == 0 and a.kind == "i":
            c = self.c.choice([-1, -2, -5])   # a Python scalar exponent
            return self._record_failure(
                f"{{}} ** {c}", lambda xp, x: x ** c, (a,), ValueError,
                NegativeIntegerPowerError)
        if form == 1:
            b = self.pick(lambda v: v.kind == "i" and v.eager.size > 0
                          and v.int_range()[0] < 0
                          and self.broadcastable_with(a, v))
            if b is not None:
                return self._record_failure(
                    "{} ** {}", lambda xp, x, y: x ** y, (a, b), ValueError,
                    NegativeIntegerPowerError)
        # an exponent input with one negative entry among small ones
        shape = a.shape[len(a.shape) - self.c.integer(0, len(a.shape)):]
        data = self.data_rng.integers(0, 3, shape).astype(exp_t)
        data.flat[self.c.integer(0, max(data.size - 1, 0))] = -self.c.integer(1, 3)
        e = self.new_input(shape, exp_t, data, prefix="idx")
        self.pool.remove(e)   # only for this power
        return self._record_failure("{} ** {}", lambda xp, x, y: x ** y, (a, e),
                                    ValueError, NegativeIntegerPowerError)

    def _failing_gather(self) -> bool:
        a = self.pick(lambda v: len(v.shape) >= 1 and 0 not in v.shape)
        if a is None:
            return False
        ndim = len(a.shape)
        axis = self.c.integer(0, ndim - 1)
        dim = a.shape[axis]
        idx_t = np.dtype(self.c.choice(["int64", "int32", "int8", "uint8",
                                        "uint32", "uint64", "int16"]))
        shape = self.c.choice([(1,), (3,), (2, 2)])
        if idx_t.kind == "u":
            bad = dim + self.c.integer(0, 3)
        else:
            bad = self.c.choice([dim + self.c.integer(0, 3),
                                 -dim - 1 - self.c.integer(0, 3)])
        lo = -dim if idx_t.kind == "i" and self.negative_indices else 0
        data = self.data_rng.integers(lo, dim, shape)
        data.flat[self.c.integer(0, data.size - 1)] = bad
        key_pre = (slice(None),) * axis
        if self.c.chance(30):
            # computed in the program: (input % (dim + 4)) - offset
            base = self.new_input(shape, np.dtype(np.int64),
                                  self.data_rng.integers(0, 50, shape), prefix="idx")
            self.pool.remove(base)
            shift = self.c.integer(0, 4)
            mod = dim + 4
            return self._record_failure(
                f"{{}}[{'' if not axis else ':, ' * axis}({{}} % {mod}) - {shift}]",
                lambda xp, x, i: x[key_pre + ((i % mod) - shift,)], (a, base),
                IndexError, IndexOutOfBoundsError)
        idx = self.new_input(shape, idx_t, data.astype(idx_t), prefix="idx")
        self.pool.remove(idx)
        return self._record_failure(
            f"{{}}[{'' if not axis else ':, ' * axis}{{}}]",
            lambda xp, x, i: x[key_pre + (i,)], (a, idx), IndexError,
            IndexOutOfBoundsError)

    # }}}


@dataclasses.dataclass(frozen=True)
class _ArraySlot:
    i: int


_ARITH = {
    "+": lambda xp, x, y: x + y, "-": lambda xp, x, y: x - y,
    "*": lambda xp, x, y: x * y, "/": lambda xp, x, y: x / y,
    "//": lambda xp, x, y: x // y, "%": lambda xp, x, y: x % y,
    "**": lambda xp, x, y: x ** y, "<<": lambda xp, x, y: x << y,
    ">>": lambda xp, x, y: x >> y,
}
_COMPARE = {
    "<": lambda xp, x, y: x < y, "<=": lambda xp, x, y: x <= y,
    ">": lambda xp, x, y: x > y, ">=": lambda xp, x, y: x >= y,
}
_BITWISE = {
    "&": lambda xp, x, y: x & y, "|": lambda xp, x, y: x | y,
    "^": lambda xp, x, y: x ^ y,
}

_OPERATIONS = [  # (builder method, weight)
    ("op_binary", 24), ("op_scalar", 12), ("op_unary", 12), ("op_where", 4),
    ("op_cast", 5), ("op_creation", 2), ("op_reduction", 8), ("op_einsum", 5),
    ("op_matmul", 3), ("op_reshape", 4), ("op_transpose", 3), ("op_roll", 3),
    ("op_concatenate", 3), ("op_stack", 2), ("op_unit_axes", 2),
    ("op_broadcast_to", 2), ("op_pad", 2), ("op_basic_index", 5),
    ("op_advanced_index", 5),
]
_WEIGHTED_OPERATIONS = [name for name, weight in _OPERATIONS for _ in range(weight)]


def _prime_factors(n: int) -> list[int]:
    factors = []
    p = 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def _key_text(key: tuple) -> str:
    def one(k: object) -> str:
        if isinstance(k, slice):
            return ":".join("" if v is None else str(v)
                            for v in (k.start, k.stop, k.step))
        if k is Ellipsis:
            return "..."
        if isinstance(k, np.ndarray):
            return f"np.array({k.tolist()})"
        return repr(k)
    return ", ".join(one(k) for k in key) if key else "()"


def _random_shape(c: _Choices, base: tuple[int, ...]) -> tuple[int, ...]:
    """A suffix of *base*, some axes set to 1: shapes that broadcast."""
    ndim = c.integer(0, len(base))
    shape = base[len(base) - ndim:]
    return tuple(1 if c.chance(20) else d for d in shape)


def _build_random_dag(c: _Choices, n_ops: int, n_inputs: int, max_outputs: int,
                      dtypes: Sequence[str], negative_indices: bool,
                      error_percent: int = 0) -> RandomDAG:
    builder = _DAGBuilder(c, dtypes, negative_indices)
    base = tuple(c.integer(2, 5) for _ in range(c.integer(1, 3)))
    for _ in range(n_inputs):
        builder.new_input(_random_shape(c, base), c.choice(builder.dtypes))

    n_built = 0
    attempts = 0
    while n_built < n_ops and attempts < 20 * n_ops:
        attempts += 1
        method = getattr(builder, c.choice(_WEIGHTED_OPERATIONS))
        if method() is not None:
            n_built += 1

    if error_percent and c.chance(error_percent):
        builder.op_failing()

    computed = [v for v in builder.pool if not v.label.startswith(("x", "idx"))]
    chosen: list[_Value] = [builder.pool[-1]]
    for _ in range(c.integer(1, max_outputs) - 1):
        chosen.append(c.choice(computed or builder.pool))
    outputs = {f"out{i}": v.lazy for i, v in enumerate(chosen)}
    expected_error = None
    if builder.failing is not None:
        label, lazy, expected_error = builder.failing
        outputs["fails"] = lazy
    expected = {f"out{i}": v.eager for i, v in enumerate(chosen)}
    tolerances = {}
    for i, v in enumerate(chosen):
        # a few ulps for values every target computes bit for bit; for the
        # rest, the slack of default_tolerance at the coarsest precision the
        # value went through, relative to the largest magnitude involved
        rtol = 4 * v.eps if v.exact else 1e3 * v.eps
        if v.kind in "fc" and not v.exact:
            rtol = min(max(rtol, 1e-10), 1e-1)
        tolerances[f"out{i}"] = (rtol, rtol * max(1.0, v.scale))

    read = {node.name for node in topological_order(list(outputs.values()))
            if isinstance(node, Placeholder)}
    inputs = {name: data for name, data in builder.inputs.items() if name in read}
    returned = [f"'out{i}': {v.label}" for i, v in enumerate(chosen)]
    if builder.failing is not None:
        returned.append(f"'fails': {builder.failing[0]}")
    lines = [*builder.lines, "return {" + ", ".join(returned) + "}"]
    bitwise = frozenset(f"out{i}" for i, v in enumerate(chosen) if v.bitwise)
    return RandomDAG(outputs, inputs, expected, tolerances, lines, expected_error,
                     bitwise)


def make_random_dag(seed: int, n_ops: int = 12, n_inputs: int = 3,
                    max_outputs: int = 3, dtypes: Sequence[str] = DEFAULT_DTYPES,
                    negative_indices: bool = True,
                    error_percent: int = 0) -> RandomDAG:
    """A random program of about *n_ops* operations on *n_inputs* inputs
    (plus index-array inputs), with 1 to *max_outputs* outputs, fully
    determined by *seed*.

    *dtypes* are the input dtypes (results may have others through NumPy's
    promotion, e.g. int16 or uint64). With *negative_indices* false, index
    arrays only hold non-negative entries. In *error_percent* percent of
    the programs an output (``"fails"``) holds an operation NumPy raises
    on (a negative integer power, an out-of-range gather, perhaps reduced
    or combined further): :attr:`RandomDAG.expected_error` is then the
    typed error a target must raise.
    """
    return _build_random_dag(_SeededChoices(seed), n_ops, n_inputs, max_outputs,
                             dtypes, negative_indices, error_percent)


def random_dags(max_ops: int = 12, max_inputs: int = 3, max_outputs: int = 3,
                dtypes: Sequence[str] = DEFAULT_DTYPES,
                negative_indices: bool = True, error_percent: int = 0):
    """A :mod:`hypothesis` strategy producing :class:`RandomDAG`\\ s. Every
    choice is drawn from hypothesis, so a failing program shrinks to a
    short one. *error_percent* as for :func:`make_random_dag`."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        c = _DrawnChoices(draw)
        n_ops = c.integer(1, max_ops)
        n_inputs = c.integer(1, max_inputs)
        return _build_random_dag(c, n_ops, n_inputs, max_outputs, dtypes,
                                 negative_indices, error_percent)
    return strategy()

# }}}

# vim: foldmethod=marker
