"""The JAX target: :func:`generate_jax`.

The generated function calls :mod:`jax.numpy` (imported as ``_pt_jnp``);
with ``jit=True`` it is decorated with :func:`jax.jit` (size parameters as
static arguments, so shapes stay concrete). JAX is an optional dependency
(``pip install 'pytato_like[jax]'``). A program computes in NumPy's
dtypes (float64, int64) also when JAX's 64-bit mode is off, JAX's
default: each call turns ``jax_enable_x64`` on for its own duration and
thread only, leaving the user's setting as it is.

.. autofunction:: generate_jax
"""

from __future__ import annotations

from collections.abc import Mapping

from pytato_like._traversal import topological_order
from pytato_like.array import Array, DictOfNamedArrays, SizeParam
from pytato_like.target import normalize_outputs
from pytato_like.target.python import BoundJAXPythonProgram, JAXPythonTarget
from pytato_like.target.python.numpy_like import generate_numpy_like


def generate_jax(expr: Array | Mapping[str, Array] | DictOfNamedArrays, *,
                 target: JAXPythonTarget | None = None,
                 jit: bool = False,
                 function_name: str = "_pt_kernel",
                 show_code: bool = False,
                 colorize_show_code: bool | None = None,
                 ) -> BoundJAXPythonProgram:
    """A :class:`~pytato_like.target.python.BoundJAXPythonProgram` computing
    *expr* with :mod:`jax.numpy`.

    :arg jit: decorate the generated function with :func:`jax.jit`.
    :arg function_name: name of the generated function.
    :arg show_code: print the generated source (colored with :mod:`pygments`
        when *colorize_show_code* is true, or when it is None and standard
        output is a terminal).

    Call the result with the inputs by name: ``prg(x=..., y=...)`` returns a
    JAX array for an array *expr*, a dict of them for named results. The
    source is :attr:`~pytato_like.target.python.BoundPythonProgram.program`.
    """
    try:
        import jax  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "generate_jax needs the optional dependency 'jax' "
            "(pip install 'pytato_like[jax]')") from err

    if target is None:
        target = JAXPythonTarget()

    preambles: list[str] = []
    decorators: list[str] = []
    if jit:
        preambles.append("from jax import jit as _pt_jax_jit")
        outputs, _ = normalize_outputs(expr)
        size_params = sorted({node.name
                              for node in topological_order(list(outputs.values()))
                              if isinstance(node, SizeParam)})
        if size_params:
            preambles.append("from functools import partial as _pt_partial")
            names = ", ".join(repr(n) for n in size_params)
            decorators.append(
                f"_pt_partial(_pt_jax_jit, static_argnames=({names},))")
        else:
            decorators.append("_pt_jax_jit")

    return generate_numpy_like(expr, target, function_name,
                               entrypoint_decorators=tuple(decorators),
                               extra_preambles=tuple(preambles),
                               show_code=show_code,
                               colorize_show_code=colorize_show_code)
