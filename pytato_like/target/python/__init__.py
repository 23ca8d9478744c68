"""Python targets: a DAG turned into the source of a Python function.

A Python target writes one function whose statements call a NumPy-like
module (:mod:`jax.numpy` for :class:`JAXPythonTarget`), one statement per
node, in topological order. The source stays inspectable as
:attr:`BoundPythonProgram.program`; calling the bound program runs it.

Calling convention (pytato's): inputs by keyword only, one per placeholder
(size parameters may be passed or are inferred from the placeholders'
shapes); an :class:`~pytato_like.Array` result comes back as one array, a
:class:`~pytato_like.DictOfNamedArrays` result as a :class:`dict` from
output name to array.

.. currentmodule:: pytato_like

.. autofunction:: generate_jax

(defined in :mod:`pytato_like.target.python.jax`, which builds on this
module, as in pytato)

.. currentmodule:: pytato_like.target.python

.. autoclass:: PythonTarget
    :members: bind_program
.. autoclass:: NumpyLikePythonTarget
    :members: numpy_like_module_name, numpy_like_module_name_shorthand
.. autoclass:: BoundPythonProgram
    :members: __call__, copy, with_transformed_program
.. autoclass:: JAXPythonTarget
.. autoclass:: BoundJAXPythonProgram
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from pytato_like.diagnostic import ConfigurationError, UnexpectedInputError
from pytato_like.target import (
    ProgramInputs,
    ShapedValue,
    Target,
    as_host_array,
    check_input_value,
    scalar_input_as_placeholder_dtype,
)
from pytato_like.target.program import HostBoundProgram

if TYPE_CHECKING:
    import jax

    from pytato_like.array import Placeholder

__all__ = [
    "BoundJAXPythonProgram",
    "BoundPythonProgram",
    "JAXPythonTarget",
    "NumpyLikePythonTarget",
    "PythonTarget",
]


class PythonTarget(Target):
    """A target whose programs are Python source code."""

    def bind_program(self, program: str, entrypoint: str,
                     expected_arguments: frozenset[str],
                     bound_arguments: Mapping[str, object],
                     inputs: ProgramInputs | None = None) -> BoundPythonProgram:
        """A bound program running the function *entrypoint* defined in the
        source *program*, with *bound_arguments* (the data of the data
        wrappers) passed along with the caller's inputs. *inputs*, when
        given, describes the placeholders the caller's values are checked
        against."""
        raise NotImplementedError


class NumpyLikePythonTarget(PythonTarget):
    """A Python target whose array operations come from a module with
    NumPy's interface."""

    @property
    def numpy_like_module_name(self) -> str:
        """The module the generated code imports, e.g. ``"jax.numpy"``."""
        raise NotImplementedError

    @property
    def numpy_like_module_name_shorthand(self) -> str:
        """The name the generated code imports that module as."""
        raise NotImplementedError


@dataclasses.dataclass(repr=False, eq=False)
class BoundPythonProgram(HostBoundProgram):
    """Generated Python source with the arguments bound at generation time.

    .. attribute:: target
    .. attribute:: program

        The generated Python source (a module defining :attr:`entrypoint`).

    .. attribute:: entrypoint

        Name of the generated function.

    .. attribute:: expected_arguments

        Names of the generated function's (keyword-only) parameters.

    .. attribute:: bound_arguments

        Parameter name -> value fixed at generation time (data wrappers).
    """

    target: PythonTarget
    program: str
    entrypoint: str
    expected_arguments: frozenset[str]
    bound_arguments: Mapping[str, object]
    inputs: ProgramInputs | None = None

    @cached_property
    def _compiled_function(self) -> Callable[..., object]:
        # a distinct pseudo-file per program, registered with linecache, so
        # tracebacks and debuggers show the generated lines
        filename = f"<pytato_like generated {self.entrypoint} {id(self):x}>"
        linecache.cache[filename] = (len(self.program), None,
                                     self.program.splitlines(keepends=True),
                                     filename)
        namespace: dict[str, object] = {"_MODULE_SOURCE_CODE": self.program}
        exec(compile(self.program, filename, "exec"), namespace)
        return cast("Callable[..., object]", namespace[self.entrypoint])

    def _convert_input(self, value: object, ph: Placeholder) -> ShapedValue:
        """A caller's value for placeholder *ph*, as the generated code
        wants it (overridden per target)."""
        return scalar_input_as_placeholder_dtype(np.asarray(value), ph)

    def _check_inputs(self, kwargs: Mapping[str, object]) -> dict[str, object]:
        if self.inputs is None:
            return {k: v for k, v in kwargs.items() if k in self.expected_arguments}
        values = self.inputs.check_and_convert(kwargs, self._convert_input)
        # (size parameters come back as np.int64)
        sizes = {name: int(cast("np.int64", values[name]))
                 for name in self.inputs.size_params}
        for name, ph in self.inputs.placeholders.items():
            shape = tuple(
                d if isinstance(d, int) else sizes.get(getattr(d, "name", ""))
                for d in ph.shape)
            if all(isinstance(d, int) for d in shape):
                check_input_value(values[name], ph,
                                  cast("tuple[int, ...]", shape))
            elif values[name].dtype != ph.dtype:
                check_input_value(values[name], ph, values[name].shape)
        # size parameters travel as Python ints (static under jax.jit)
        merged: dict[str, object] = {**values, **sizes}
        return {k: v for k, v in merged.items() if k in self.expected_arguments}

    def input_names(self) -> frozenset[str]:
        return self.expected_arguments

    def evaluate(self, /, **kwargs: object) -> object:
        """Run the program on the inputs given by name; returns one array
        for an array result, a dict of arrays for named results (the
        program contract's form, ``prg(queue, **inputs)``, is inherited
        from :class:`~pytato_like.target.program.HostBoundProgram`)."""
        clash = set(kwargs) & set(self.bound_arguments)
        if clash:
            raise UnexpectedInputError(
                f"input(s) {sorted(clash)} are data wrappers bound when the "
                "program was generated and cannot be passed again")
        arguments = dict(self.bound_arguments)
        arguments.update(self._check_inputs(kwargs))
        return self._compiled_function(**arguments)

    def copy(self, **kwargs: Any) -> BoundPythonProgram:  # (dataclasses.replace's)
        """A copy with the given attributes replaced."""
        return dataclasses.replace(self, **kwargs)

    def with_transformed_program(self, *args: object, **kwargs: object
                                 ) -> BoundPythonProgram:
        """Not available: generated Python is not transformed further."""
        raise NotImplementedError(
            f"{type(self).__name__} holds Python source, which has no "
            "transformations to apply")


# {{{ JAX

def _numpy_dtypes_in_jax() -> contextlib.AbstractContextManager[object]:
    """A scope in which JAX keeps NumPy's 64-bit dtypes: JAX's 64-bit mode
    (``jax_enable_x64``) turned on for the current thread only, when it is
    off; the user's global setting is left as it is."""
    import jax
    if jax.config.read("jax_enable_x64"):
        return contextlib.nullcontext()
    scope = getattr(jax, "enable_x64", None)  # a context manager since 0.7
    if scope is not None:
        return scope(True)
    try:
        from jax.experimental import (  # type: ignore[attr-defined]
            enable_x64,
        )
    except ImportError as err:
        raise ConfigurationError(
            "the JAX target computes NumPy's dtypes (float64, int64) and "
            "needs JAX's 64-bit mode, which this JAX cannot enable for one "
            "call: turn it on with jax.config.update('jax_enable_x64', True) "
            "or the environment variable JAX_ENABLE_X64=1") from err
    return enable_x64()


class BoundJAXPythonProgram(BoundPythonProgram):
    """A program generated on :mod:`jax.numpy`; returns JAX arrays.

    A call runs with JAX's 64-bit mode on, also when it is off globally
    (JAX's default): the program computes in the dtypes the NumPy target
    computes in, and float64 inputs stay float64. The results are JAX
    arrays of those dtypes."""

    def _convert_input(self, value: object, ph: Placeholder) -> jax.Array:
        import jax
        if isinstance(value, jax.Array):
            return value
        return jax.device_put(
            scalar_input_as_placeholder_dtype(as_host_array(value), ph))

    def evaluate(self, /, **kwargs: object) -> object:
        with _numpy_dtypes_in_jax():
            return super().evaluate(**kwargs)


def _jax_bound_argument(value: object) -> jax.Array:
    import jax
    if isinstance(value, jax.Array):
        return value
    with _numpy_dtypes_in_jax():
        return jax.device_put(as_host_array(value))


class JAXPythonTarget(NumpyLikePythonTarget):
    """Python source calling :mod:`jax.numpy` (see
    :func:`~pytato_like.generate_jax`)."""

    @property
    def numpy_like_module_name(self) -> str:
        return "jax.numpy"

    @property
    def numpy_like_module_name_shorthand(self) -> str:
        return "_pt_jnp"

    def bind_program(self, program: str, entrypoint: str,
                     expected_arguments: frozenset[str],
                     bound_arguments: Mapping[str, object],
                     inputs: ProgramInputs | None = None
                     ) -> BoundJAXPythonProgram:
        return BoundJAXPythonProgram(
            target=self, program=program, entrypoint=entrypoint,
            expected_arguments=frozenset(expected_arguments),
            bound_arguments={name: _jax_bound_argument(value)
                             for name, value in bound_arguments.items()},
            inputs=inputs)

# }}}

