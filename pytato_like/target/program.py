"""The program contract: how every target's compiled program is called.

A *bound program* is what a target makes of a DAG (:func:`~pytato_like.generate_loopy`,
:func:`~pytato_like.generate_numpy`, :func:`~pytato_like.generate_jax`, the
part programs of :func:`~pytato_like.generate_code_for_partition`). Every
one of them can be called the same way, with loopy's calling convention::

    event, outputs = prg(queue, *, allocator=None, wait_for=None,
                         out_host=None, **inputs)

* *queue* (positional only) is the :class:`pyopencl.CommandQueue` the
  program runs on; host targets accept any value, ``None`` included.
* *allocator* provides device memory for outputs and temporaries,
  *wait_for* lists events the program's first launch waits for, and
  *out_host* says whether outputs are copied to the host (``None``: the
  target's rule). Host targets accept and ignore all three.
* *inputs* are the values of the placeholders and size parameters, by
  name. An input may be named like an option (``allocator``, ``wait_for``,
  ``out_host``) or ``queue``: the keyword is then the input.
* *event* has a ``wait()`` method (:data:`HOST_EVENT`, already complete,
  for host targets); *outputs* is the 1-tuple ``(out,)`` for an
  :class:`~pytato_like.Array` result and a dict name -> array for a
  :class:`~pytato_like.DictOfNamedArrays` (or dict) result.

Executors (:mod:`pytato_like.scheduler`) rely on this contract and nothing
else: they never ask which target made a program.

Host programs (:class:`HostBoundProgram`: the NumPy and JAX targets)
also keep the NumPy target's own short form, ``prg(**inputs)``, which
returns the outputs alone (one array, or a dict of arrays): called without
a queue, a host program answers in that form.

.. autoclass:: BoundProgram
    :special-members: __call__
.. autoclass:: HostBoundProgram
.. autoclass:: HostEvent
.. autodata:: HOST_EVENT
.. autodata:: CALL_OPTIONS
.. autofunction:: split_call_options
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pytato_like.diagnostic import UnexpectedInputError

if TYPE_CHECKING:
    import pyopencl as cl
    from pyopencl.typing import Allocator, WaitList

__all__ = [
    "CALL_OPTIONS",
    "HOST_EVENT",
    "BoundProgram",
    "HostBoundProgram",
    "HostEvent",
    "split_call_options",
]

#: The keyword options of the contract (besides the positional queue).
CALL_OPTIONS = ("allocator", "wait_for", "out_host")


@runtime_checkable
class BoundProgram(Protocol):
    """What every target's compiled program is: callable as
    ``prg(queue, *, allocator=None, wait_for=None, out_host=None,
    **inputs) -> (event, outputs)`` (see the module docs).

    Targets' program classes derive from it to declare that they implement
    it; ``isinstance(prg, BoundProgram)`` holds for any object with a
    ``__call__`` (a :func:`typing.runtime_checkable` protocol checks no
    more than that).
    """

    def __call__(self, queue: cl.CommandQueue | None, /, *,
                 allocator: Allocator | None = None,
                 wait_for: WaitList = None, out_host: bool | None = None,
                 **inputs: Any) -> tuple[Any, Any]:
        """Run the program on *queue*; ``(event, outputs)``."""
        # (Any: the inputs are the caller's values, and what comes back
        # depends on the target: a pyopencl event or HOST_EVENT, a 1-tuple
        # or a dict of the target's arrays)
        ...


class HostEvent:
    """The event of a program that ran on the host: complete when the
    call returns, so :meth:`wait` returns at once."""

    __slots__ = ()

    def wait(self) -> None:
        """Nothing to wait for."""

    def __repr__(self) -> str:
        return "HOST_EVENT"


#: The (complete) event host programs return.
HOST_EVENT = HostEvent()

# a host program called without a queue answers in the short form
_NO_QUEUE = object()

_ValueT = TypeVar("_ValueT")


def split_call_options(input_names: Collection[str], kwargs: dict[str, _ValueT]
                       ) -> tuple[dict[str, _ValueT], dict[str, _ValueT]]:
    """``(inputs, options)``: the keyword arguments of a call split into
    program inputs and the contract's :data:`CALL_OPTIONS`. A keyword
    naming an input of the program (*input_names*) is that input even if
    it is spelled like an option."""
    # once per program call (every part of every execution): no generator,
    # no copy unless an option is present
    inputs, options = kwargs, {}
    for name in CALL_OPTIONS:
        if name in kwargs and name not in input_names:
            if inputs is kwargs:
                inputs = dict(kwargs)
            options[name] = inputs.pop(name)
    return inputs, options


class HostBoundProgram(BoundProgram):
    """Base of programs that compute on the host (the NumPy and JAX
    targets). Subclasses define :meth:`evaluate` and :meth:`input_names`.

    ``prg(queue, *, allocator=None, wait_for=None, out_host=None,
    **inputs)`` returns ``(HOST_EVENT, outputs)`` with *outputs* as the
    contract says (the options and *queue* are accepted and ignored);
    ``prg(**inputs)`` returns what :meth:`evaluate` returns (one array or a
    dict of arrays).
    """

    def evaluate(self, /, **inputs: object) -> object:
        """The outputs for *inputs*: one array, or a dict name -> array."""
        raise NotImplementedError

    def input_names(self) -> Collection[str]:
        """Names of the program's inputs (placeholders, size parameters)."""
        raise NotImplementedError

    def __call__(self, queue: object = _NO_QUEUE, /, **kwargs: object) -> Any:
        # (Any: the short form's outputs, or the contract's pair)
        if queue is _NO_QUEUE:
            return self.evaluate(**kwargs)
        if isinstance(queue, (int, float, complex)) or hasattr(queue, "__array__"):
            # a value where the queue goes: an input passed by position
            raise UnexpectedInputError(
                f"{type(self).__name__} takes its inputs by name; got a "
                f"{type(queue).__name__} where the queue goes (the first "
                "positional argument)")
        inputs, _options = split_call_options(self.input_names(), kwargs)
        outputs = self.evaluate(**inputs)
        if not isinstance(outputs, dict):
            outputs = (outputs,)
        return HOST_EVENT, outputs


# vim: foldmethod=marker
