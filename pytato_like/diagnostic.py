"""Typed exceptions raised by pytato_like.

Every error that bad user input can provoke is one of the classes below, and
its message names the node, shape, dtype, name or rank involved. All of them
derive from :class:`PytatoLikeError`, so ``except PytatoLikeError`` catches
anything the library raises on purpose.

.. autoexception:: PytatoLikeError
.. autoexception:: PytatoLikeWarning
.. autoexception:: ShapeMismatchError
.. autoexception:: CannotBroadcastError
.. autoexception:: AxisError
.. autoexception:: NotAReductionAxis
.. autoexception:: IndexOutOfBoundsError
.. autoexception:: IndexTypeError
.. autoexception:: EinsumSpecError
.. autoexception:: InvalidEinsumIndex
.. autoexception:: DTypeError
.. autoexception:: BooleanSubtractError
.. autoexception:: InvalidOrderError
.. autoexception:: EmptyReductionError
.. autoexception:: InvalidNameError
.. autoexception:: NotAnArrayError
.. autoexception:: NameClashError
.. autoexception:: UnknownIndexLambdaExpr
.. autoexception:: CannotBeLoweredToIndexLambda
.. autoexception:: MissingInputError
.. autoexception:: QueueError
.. autoexception:: UnexpectedInputError
.. autoexception:: InputShapeMismatchError
.. autoexception:: InputDTypeMismatchError
.. autoexception:: VisualizationError
.. autoexception:: GraphvizNotFoundError
.. autoexception:: HaloSpecError
.. autoexception:: QuantityMismatchError
.. autoexception:: BufferFullError
.. autoexception:: BufferRegistrationError
.. autoexception:: UnknownDeviceError
.. autoexception:: PartitionInducedCycleError
.. autoexception:: DistributedPartitionError
.. autoexception:: CycleAcrossRanksError
.. autoexception:: DuplicateSendError
.. autoexception:: DuplicateRecvError
.. autoexception:: UnmatchedSendError
.. autoexception:: UnmatchedRecvError
.. autoexception:: SendRecvMismatchError
.. autoexception:: RemoteRankError
.. autoexception:: ConfigurationError
.. autoexception:: UnsafeCacheFolderError
.. autoexception:: RankDepartedError
.. autoexception:: CommunicationTagError
.. autoexception:: UnsupportedArrayError
.. autoexception:: DistributedExecutionError
.. autoexception:: DevicePlacementError
.. autoexception:: NonUniqueTagError
.. autoexception:: TagNotPresentError
.. autoexception:: PadModeError
.. autoexception:: UnsupportedPadModeError
.. autoexception:: InvalidIndexError
.. autoexception:: ScalarOverflowError
.. autoexception:: InvalidOperandError
.. autoexception:: InvalidSizeError
.. autoexception:: LazyArrayConversionError
"""

from __future__ import annotations

import pytools.tag as _pytools_tag


class PytatoLikeError(Exception):
    """Base class of every exception pytato_like raises deliberately."""


class PytatoLikeWarning(UserWarning):
    """Base class of every warning pytato_like issues (the test suite turns
    them into errors: setup.cfg)."""


class ShapeMismatchError(PytatoLikeError, ValueError):
    """Shapes that cannot be combined (broadcasting, concatenation, reshape,
    einsum operand extents)."""


class ArrayTooLargeError(PytatoLikeError, ValueError):
    """A shape whose element count exceeds what a 64-bit index addresses."""


class CannotBroadcastError(ShapeMismatchError):
    """Operand shapes that do not broadcast together (pytato's name for a
    broadcasting :class:`ShapeMismatchError`)."""


class AxisError(PytatoLikeError, ValueError):
    """An axis argument out of range or repeated."""


class NotAReductionAxis(AxisError):
    """A reduction variable (or axis) named where the array does not reduce
    over it, e.g. in :meth:`~pytato_like.array.IndexLambda.with_tagged_reduction`."""


class IndexOutOfBoundsError(PytatoLikeError, IndexError):
    """A static integer index outside the extent of the indexed axis, too
    many indices for an array, or (at run time, on the device) a gather
    index out of range."""


class NegativeIntegerPowerError(PytatoLikeError, ValueError):
    """An integer raised to a negative integer power at run time (NumPy
    raises ``ValueError`` there)."""


class IndexTypeError(PytatoLikeError, TypeError):
    """An index of a kind that cannot index an array (float or bool index
    arrays of the wrong shape, unsupported objects)."""


class EinsumSpecError(PytatoLikeError, ValueError):
    """A malformed einsum subscript string or one that does not fit its
    operands."""


class InvalidEinsumIndex(EinsumSpecError):
    """An einsum subscript that is not a letter, or an output index that no
    operand has, or an index repeated in the output."""


class DTypeError(PytatoLikeError, TypeError):
    """An operation that is not defined for the given dtype(s)."""


class BooleanSubtractError(DTypeError, ValueError):
    """``-`` between two boolean operands, which NumPy refuses (``^`` or
    :func:`~pytato_like.logical_xor` is what is meant). A :class:`TypeError`
    as NumPy's error is, and also a :class:`ValueError`, the class pytato's
    users catch for a refused operation."""


class InvalidOrderError(PytatoLikeError, ValueError):
    """A memory order argument (``order=``) other than ``"C"`` or ``"F"``."""


class InvalidNameError(PytatoLikeError, ValueError):
    """An input or result name that is not a valid identifier."""


class NotAnArrayError(PytatoLikeError, TypeError):
    """An object that is not an :class:`~pytato_like.array.Array` where one
    is required."""


class NameClashError(PytatoLikeError, ValueError):
    """Two different input arguments reachable from the same result share a
    name, or a name asked for (a :class:`~pytato_like.tags.Named` tag) is
    already taken."""


class UnknownIndexLambdaExpr(PytatoLikeError, ValueError):
    """The structure of an :class:`~pytato_like.array.IndexLambda` could not be
    inferred."""


class CannotBeLoweredToIndexLambda(PytatoLikeError, NotImplementedError):
    """An array expression cannot be written as an
    :class:`~pytato_like.array.IndexLambda`."""


class MissingInputError(PytatoLikeError, KeyError):
    """A program was called without a value for one of its placeholders or
    size parameters."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want prose
        return str(self.args[0]) if self.args else ""


class QueueError(PytatoLikeError, ValueError):
    """A program was called without a command queue, or with a queue of
    another context than the one its executable is bound to."""


class UnexpectedInputError(PytatoLikeError, TypeError):
    """A program was called with an argument that is not one of its inputs."""


class InputShapeMismatchError(PytatoLikeError, ValueError):
    """An input value's shape differs from the shape of its placeholder."""


class InputDTypeMismatchError(PytatoLikeError, TypeError):
    """An input value's dtype differs from the dtype of its placeholder."""


class EmptyReductionError(PytatoLikeError, ValueError):
    """A reduction without identity (max, min) over an empty axis."""


class VisualizationError(PytatoLikeError, RuntimeError):
    """A graph could not be drawn or shown (e.g. graphviz rejected the dot
    source, or an object that is not a DAG, dot source or partition was
    given)."""


class GraphvizNotFoundError(VisualizationError):
    """Graphviz's ``dot`` program, needed to render SVG, is not installed or
    not on ``PATH``."""


class HaloSpecError(PytatoLikeError, ValueError):
    """A :class:`~pytato_like.runtime.HaloExchangeSpec` that does not fit the
    quantity it describes (slices out of bounds, wrong count of slices, a
    rotation the quantity's dimensions do not allow)."""


class QuantityMismatchError(PytatoLikeError, ValueError):
    """An array handed to a runtime component (halo pack/unpack, Bufferizer
    append, device transfer) whose shape, dtype, kind or count differs from
    what the component was built for."""


class BufferFullError(PytatoLikeError, RuntimeError):
    """An append to a full :class:`~pytato_like.runtime.Bufferizer` that has
    no ``buffer_full_hook`` to consume its contents."""


class BufferRegistrationError(PytatoLikeError, ValueError):
    """A receive buffer registered twice for the same (peer, tag, shape,
    dtype), or one that does not match its key."""


class UnknownDeviceError(PytatoLikeError, LookupError):
    """A device transfer to (or from) a device that is not part of the device
    group in use."""


class PartitionInducedCycleError(PytatoLikeError, ValueError):
    """A partition of a DAG whose parts depend on each other in a cycle (no
    part order can run them); the message names the parts on the cycle."""


class DistributedPartitionError(PytatoLikeError, ValueError):
    """Base class of errors in a distributed partition: sends and receives
    that cannot run as given. Messages name the ranks and tags involved."""


class CycleAcrossRanksError(DistributedPartitionError,
                            PartitionInducedCycleError):
    """The parts of all ranks, joined by their sends and receives, depend on
    each other in a cycle: running them would deadlock (a
    :class:`PartitionInducedCycleError`, as pytato calls it)."""


class DuplicateSendError(DistributedPartitionError):
    """Two different sends with the same (source rank, destination rank,
    tag)."""


class DuplicateRecvError(DistributedPartitionError):
    """Two different receives with the same (source rank, destination rank,
    tag)."""


class UnmatchedSendError(DistributedPartitionError):
    """A send that no rank receives."""


class UnmatchedRecvError(DistributedPartitionError):
    """A receive that no rank sends."""


class SendRecvMismatchError(DistributedPartitionError):
    """A send and its receive disagree on shape or dtype."""


class RemoteRankError(DistributedPartitionError):
    """Raised on every other rank when one rank failed in a collective step
    (partitioning, verification, tag numbering) or during distributed
    execution; the message names the failed rank and its error."""


class RankDepartedError(RemoteRankError):
    """Another rank left the program (normal exit, ``sys.exit``, an
    uncaught exception) while this rank still waited to communicate with
    it; the message names the rank that left."""


class CommunicationTagError(DistributedPartitionError):
    """A communication tag that MPI cannot carry: negative, above the
    communicator's ``MPI.TAG_UB`` (minus the tags reserved by the
    executor), or not an integer after numbering."""


class UnsupportedArrayError(PytatoLikeError, ValueError):
    """A mapper or analysis got an array of a class it has no method for
    (or an array of the wrong kind, e.g. not an einsum)."""


class DistributedExecutionError(DistributedPartitionError):
    """A distributed execution was asked for something it cannot do (an
    unknown message mode, a result fetched from a failed execution)."""


class DevicePlacementError(PytatoLikeError, ValueError):
    """An array reads arrays placed on different devices without a
    ``to_device`` transfer between them."""


class ConfigurationError(PytatoLikeError, ValueError):
    """A malformed setting (environment variable or option); the message
    names the setting and the value."""


class NonUniqueTagError(PytatoLikeError, _pytools_tag.NonUniqueTagError):
    """Two tags of one :class:`pytools.tag.UniqueTag` subclass on one
    array or axis; a :class:`pytools.tag.NonUniqueTagError`, as pytools
    raises. The message names the array (or axis) and the tags' class."""


class TagNotPresentError(PytatoLikeError, ValueError):
    """``without_tags`` (with *verify_existence*) asked to remove a tag the
    array does not carry; a :class:`ValueError`, as pytools raises. The
    message names the tag and the array."""


class PadModeError(PytatoLikeError, ValueError):
    """A :func:`~pytato_like.pad` mode NumPy does not know, or a keyword
    argument the mode does not take (a :class:`ValueError`, as
    :func:`numpy.pad` raises)."""


class UnsupportedPadModeError(PadModeError, NotImplementedError):
    """A :func:`numpy.pad` mode that :func:`~pytato_like.pad` does not
    implement (``linear_ramp``, ``maximum``, ``mean``, ``median``,
    ``minimum``, ``empty``, a callable)."""


class InvalidIndexError(IndexTypeError, IndexError):
    """An index NumPy refuses with :class:`IndexError`: a float or other
    non-integer scalar, an array of floats, an object that is no index.
    Also an :class:`IndexTypeError` (a :class:`TypeError`), the class these
    indices raised before."""


class ScalarOverflowError(DTypeError, OverflowError):
    """A Python integer that the array's dtype cannot hold, combined with
    the array (``int8_array + 300``): an :class:`OverflowError`, as NumPy 2
    raises, and a :class:`DTypeError`."""


class InvalidOperandError(DTypeError):
    """An operand of an arithmetic operator or elementwise function that is
    neither an array, a number nor a list of numbers (``x + "a"``,
    ``x * None``); the message names the operand and the operation."""


class InvalidSizeError(PytatoLikeError, ValueError):
    """A size parameter given a value that is no size (negative, or not an
    integer) when a program is called; the message names the parameter."""


class LazyArrayConversionError(PytatoLikeError, TypeError):
    """A lazy array handed to NumPy (``np.asarray(x)``, a ufunc such as
    ``np.sin(x)``, an array function such as ``np.sum(x)``): it has no
    values until a program computes them. The message says which
    :mod:`pytato_like` function to call instead, or how to evaluate
    (:func:`~pytato_like.generate_numpy`, :func:`~pytato_like.generate_loopy`)."""


class UnsafeCacheFolderError(ConfigurationError):
    """The compile cache's folder (``PYTATO_LIKE_CACHE_DIR`` or the
    default) or one of the package's folders inside it is not a private
    directory of the user: writable by group or others, owned by another
    user, or not a directory. Entries read from it could have been planted
    by someone else, so the disk cache refuses it; the message names the
    folder, its owner and mode, and the ways out (``chmod go-w``, another
    ``PYTATO_LIKE_CACHE_DIR``, or ``PYTATO_LIKE_CACHE=0``)."""
