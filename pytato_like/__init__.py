"""pytato_like: lazy array expressions, compiled and run where you ask.

Build a program with the NumPy-style functions below on placeholders; the
result is an immutable DAG of :class:`Array` nodes. Nothing is computed
until a target runs it: :func:`generate_numpy` (the reference executor) or,
where available, the loopy/OpenCL and distributed targets.

The public names follow pytato's, so ``import pytato_like as pt`` runs
pytato programs.
"""

from __future__ import annotations

import logging as _logging
from typing import TYPE_CHECKING

# a library leaves output to the application: nothing reaches stderr
# unless it configures logging or sets PYTATO_LIKE_REPORT
_logging.getLogger("pytato_like").addHandler(_logging.NullHandler())

from pytato_like import dataclass_code as _dataclass_code  # noqa: I001
from pytato_like._pocl_cache import use_private_pocl_cache as _pocl


def _set_up_disk_caches() -> None:
    """The import's only reads of the environment (the disk cache's
    settings), first: the functions dataclasses compiles come compiled from
    the disk cache, before the package declares any class; PoCL reads
    POCL_CACHE_DIR when the first OpenCL context is made, before the user
    makes one (the OpenCL target itself is imported lazily)."""
    _dataclass_code.install()
    _pocl()


_set_up_disk_caches()

# The IR module goes first, then the modules that complete its Array:
# Python's operators (_frontend), NumPy's protocols (_numpy_interop) and the
# dataclass protocol (_dataclass_nodes), installed when they are imported.
import pytato_like.array  # noqa: I001
import pytato_like._frontend
import pytato_like._numpy_interop
import pytato_like._dataclass_nodes  # noqa: F401
from pytato_like import diagnostic, scalar_expr, tags, utils
from pytato_like._creation import (
    arange,
    eye,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from pytato_like._einsum import dot, einsum, matmul, vdot
from pytato_like._shape_ops import (
    broadcast_to,
    concatenate,
    expand_dims,
    reshape,
    roll,
    squeeze,
    stack,
    transpose,
)
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    Axis,
    AxisPermutation,
    BasicIndex,
    Concatenate,
    DataWrapper,
    DictOfNamedArrays,
    Einsum,
    EinsumAxisDescriptor,
    EinsumElementwiseAxis,
    EinsumReductionAxis,
    IndexBase,
    IndexLambda,
    IndexRemappingBase,
    InputArgumentBase,
    NamedArray,
    NormalizedSlice,
    Placeholder,
    ReductionDescriptor,
    Reshape,
    Roll,
    SizeParam,
    Stack,
    make_data_wrapper,
    make_dict_of_named_arrays,
    make_placeholder,
    make_size_param,
    set_traceback_tag_enabled,
)
from pytato_like.cmath import (
    abs,  # noqa: A004
    arccos,
    arcsin,
    arctan,
    arctan2,
    conj,
    cos,
    cosh,
    equal,
    exp,
    greater,
    greater_equal,
    imag,
    isnan,
    less,
    less_equal,
    log,
    log10,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    not_equal,
    real,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    where,
)
from pytato_like.pad import pad
from pytato_like.reductions import all, amax, amin, any, mean, prod, sum  # noqa: A004
from pytato_like._argreduce import argmax, argmin

# Array's NumPy-style methods (.T, reshape, sum, indexing, ...), its
# equality, pickling and printing call these functions. They build on
# pytato_like.array, which therefore cannot import them: the table they go
# in is filled here, before any user code runs (FrontEndOperations).
from pytato_like import _frontend, _indexing, _shapes, _traversal
from pytato_like.array import FRONT_END as _FRONT_END


# (printing and drawing code loads on first use, as the lazy names below do)
def _dag_repr(result: Array | AbstractResultWithNamedArrays) -> str:
    from pytato_like.stringifier import dag_repr
    return dag_repr(result)


def _dag_html(result: Array | AbstractResultWithNamedArrays) -> str:
    from pytato_like.visualization.notebook import dag_html
    return dag_html(result)


_FRONT_END.transpose = transpose
_FRONT_END.reshape = reshape
_FRONT_END.squeeze = squeeze
_FRONT_END.real = real
_FRONT_END.imag = imag
_FRONT_END.conj = conj
_FRONT_END.abs = abs
_FRONT_END.getitem = _indexing.getitem
_FRONT_END.astype = _frontend.astype
_FRONT_END.sum = sum
_FRONT_END.prod = prod
_FRONT_END.amax = amax
_FRONT_END.amin = amin
_FRONT_END.any = any
_FRONT_END.all = all
_FRONT_END.mean = mean
_FRONT_END.argmax = argmax
_FRONT_END.argmin = argmin
_FRONT_END.dot = dot
_FRONT_END.matmul = matmul
_FRONT_END.structurally_equal = _traversal.structurally_equal
_FRONT_END.structurally_equal_many = _traversal.structurally_equal_many
_FRONT_END.pickle_dag = _traversal.pickle_dag
_FRONT_END.flatten_dags = _traversal.flatten_dags
_FRONT_END.unflatten_dags = _traversal.unflatten_dags
_FRONT_END.dag_repr = _dag_repr
_FRONT_END.dag_html = _dag_html
_FRONT_END.get_shape_after_broadcasting = _shapes.get_shape_after_broadcasting
from pytato_like.version import __version__  # noqa: E402


if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from pytato_like import (
        analysis,
        codegen,
        distributed,
        dtype,
        equality,
        function,
        loopy,
        partition,
        raising,
        runtime,
        sparse,
        target,
        transform,
        visualization,
    )
    from pytato_like.distributed import (
        DistributedExecution,
        DistributedGraphPart,
        DistributedGraphPartition,
        DistributedRecv,
        DistributedSend,
        DistributedSendRefHolder,
        execute_distributed_partition,
        execute_distributed_partition_async,
        find_distributed_partition,
        make_distributed_recv,
        make_distributed_send,
        make_distributed_send_ref_holder,
        number_distributed_tags,
        staple_distributed_send,
        verify_distributed_partition,
    )
    from pytato_like.function import trace_call
    from pytato_like.loopy import call_loopy
    from pytato_like.partition import generate_code_for_partition
    from pytato_like.runtime import (
        Bufferizer,
        DeviceGroup,
        DeviceSpec,
        HaloDataTransformer,
        HaloExchangeSpec,
        Handle,
        QuantityHaloSpec,
        ReceiveBufferRegistry,
        ToDevice,
        TraceRecorder,
        Transfer,
        execute_partition_on_devices,
        find_device_partition,
        to_device,
    )
    from pytato_like.sparse import (
        CSRMatmul,
        CSRMatrix,
        SparseMatmul,
        SparseMatrix,
        make_csr_matrix,
        sparse_matmul,
    )
    from pytato_like.stringifier import stringify
    from pytato_like.target import BoundProgram, Target
    from pytato_like.target.loopy import LoopyPyOpenCLTarget, generate_loopy
    from pytato_like.target.numpy import (
        NumpyTarget,
        generate_numpy,
        generate_numpy_like,
    )
    from pytato_like.target.python.jax import generate_jax
    from pytato_like.transform import einsum_distributive_law  # noqa: F401
    from pytato_like.transform.calls import (
        inline_calls,
        tag_all_calls_to_be_inlined,
    )
    from pytato_like.transform.dead_code_elimination import eliminate_dead_code
    from pytato_like.transform.lower_to_index_lambda import to_index_lambda
    from pytato_like.transform.materialize import materialize_with_mpms
    from pytato_like.transform.metadata import unify_axes_tags
    from pytato_like.transform.remove_broadcasts_einsum import (
        rewrite_einsums_with_no_broadcasts,
    )
    from pytato_like.visualization import (
        get_ascii_graph,
        get_dot_graph,
        get_dot_graph_from_partition,
        show_ascii_graph,
        show_dot_graph,
        show_fancy_placeholder_data_flow,
    )

# {{{ lazy names

# Everything past the front end (targets, transforms, analyses, partitioning,
# the runtime, visualisation) is imported on first use (PEP 562), so that
# ``import pytato_like`` stays cheap and loads none of loopy, pyopencl,
# islpy, mpi4py or graphviz. The TYPE_CHECKING imports above list the same
# names (tests/test_lazy_import.py checks that the two agree).

#: module -> the public names it defines that the package re-exports lazily
_LAZY_NAMES: dict[str, tuple[str, ...]] = {
    "pytato_like.target": ("BoundProgram", "Target"),
    "pytato_like.target.numpy": (
        "NumpyTarget", "generate_numpy", "generate_numpy_like"),
    "pytato_like.target.loopy": ("LoopyPyOpenCLTarget", "generate_loopy"),
    "pytato_like.target.python.jax": ("generate_jax",),
    "pytato_like.visualization": (
        "get_ascii_graph", "get_dot_graph", "get_dot_graph_from_partition",
        "show_ascii_graph", "show_dot_graph",
        "show_fancy_placeholder_data_flow"),
    "pytato_like.runtime": (
        "Bufferizer", "DeviceGroup", "DeviceSpec", "HaloDataTransformer",
        "HaloExchangeSpec", "Handle", "QuantityHaloSpec",
        "ReceiveBufferRegistry", "ToDevice", "TraceRecorder", "Transfer",
        "execute_partition_on_devices", "find_device_partition", "to_device"),
    "pytato_like.distributed": (
        "DistributedExecution", "DistributedGraphPart",
        "DistributedGraphPartition", "DistributedRecv", "DistributedSend",
        "DistributedSendRefHolder", "execute_distributed_partition",
        "execute_distributed_partition_async", "find_distributed_partition",
        "make_distributed_recv", "make_distributed_send",
        "make_distributed_send_ref_holder", "number_distributed_tags",
        "staple_distributed_send", "verify_distributed_partition"),
    "pytato_like.partition": ("generate_code_for_partition",),
    "pytato_like.transform": ("einsum_distributive_law",),
    "pytato_like.transform.dead_code_elimination": ("eliminate_dead_code",),
    "pytato_like.transform.lower_to_index_lambda": ("to_index_lambda",),
    "pytato_like.transform.materialize": ("materialize_with_mpms",),
    "pytato_like.transform.metadata": ("unify_axes_tags",),
    "pytato_like.transform.remove_broadcasts_einsum": (
        "rewrite_einsums_with_no_broadcasts",),
    "pytato_like.function": ("trace_call",),
    "pytato_like.transform.calls": (
        "inline_calls", "tag_all_calls_to_be_inlined"),
    "pytato_like.sparse": (
        "CSRMatmul", "CSRMatrix", "SparseMatmul", "SparseMatrix",
        "make_csr_matrix", "sparse_matmul"),
    "pytato_like.loopy": ("call_loopy",),
    "pytato_like.stringifier": ("stringify",),
}

#: subpackages reachable as attributes of the package (``pt.transform``),
#: with the submodules pytato's users reach through them without importing
#: them (``pt.target.loopy``), which are loaded together with them
_LAZY_SUBMODULES: dict[str, tuple[str, ...]] = {
    "analysis": (),
    "codegen": (),
    "distributed": (),
    "dtype": (),
    "equality": (),
    "function": (),
    "loopy": (),
    "partition": (),
    "raising": (),
    "runtime": (),
    "sparse": (),
    "target": ("numpy", "loopy", "python", "python.jax"),
    "transform": (
        "calls", "dead_code_elimination", "einsum_distributive_law",
        "lower_to_index_lambda", "materialize", "metadata",
        "remove_broadcasts_einsum"),
    "visualization": (),
}

_NAME_TO_MODULE = {name: module for module, names in _LAZY_NAMES.items()
                   for name in names}


def __getattr__(name: str) -> object:
    import importlib

    module_name = _NAME_TO_MODULE.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
    elif name in _LAZY_SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
        for submodule in _LAZY_SUBMODULES[name]:
            importlib.import_module(f"{__name__}.{name}.{submodule}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAME_TO_MODULE) | set(_LAZY_SUBMODULES))

# }}}


__all__ = [
    "AbstractResultWithNamedArrays", "AdvancedIndexInContiguousAxes",
    "AdvancedIndexInNoncontiguousAxes", "Array", "Axis", "AxisPermutation",
    "BasicIndex", "BoundProgram", "Concatenate", "DataWrapper",
    "DictOfNamedArrays", "Einsum", "EinsumAxisDescriptor",
    "EinsumElementwiseAxis", "EinsumReductionAxis", "IndexBase", "IndexLambda",
    "IndexRemappingBase", "InputArgumentBase", "NamedArray", "NormalizedSlice",
    "LoopyPyOpenCLTarget", "NumpyTarget", "Placeholder", "ReductionDescriptor", "Reshape", "Roll",
    "SizeParam", "Stack", "Target",
    "abs", "all", "amax", "amin", "any", "arange", "argmax", "argmin", "arccos", "arcsin", "arctan",
    "arctan2", "broadcast_to", "concatenate", "conj", "cos", "cosh",
    "diagnostic", "dot", "einsum", "equal", "exp", "expand_dims", "eye", "full",
    "full_like", "generate_loopy", "generate_numpy", "generate_numpy_like", "greater",
    "greater_equal", "imag", "isnan", "less", "less_equal", "log", "log10",
    "logical_and", "logical_not", "logical_or", "make_data_wrapper",
    "make_dict_of_named_arrays", "make_placeholder", "make_size_param",
    "set_traceback_tag_enabled", "dtype", "raising",
    "matmul", "maximum", "mean", "minimum", "not_equal", "ones", "ones_like",
    "pad", "prod", "real", "reshape", "roll", "scalar_expr", "sin", "sinh",
    "sqrt", "squeeze", "stack", "sum", "tags", "tan", "tanh", "transpose",
    "utils", "vdot", "where", "zeros", "zeros_like",
    "get_ascii_graph", "get_dot_graph", "get_dot_graph_from_partition",
    "show_ascii_graph", "show_dot_graph", "show_fancy_placeholder_data_flow",
    "Bufferizer", "DeviceGroup", "DeviceSpec", "HaloDataTransformer",
    "HaloExchangeSpec", "Handle", "QuantityHaloSpec", "ReceiveBufferRegistry",
    "TraceRecorder", "Transfer", "runtime",
    "ToDevice", "execute_partition_on_devices", "find_device_partition",
    "to_device", "DistributedExecution", "execute_distributed_partition_async",
    "DistributedGraphPart", "DistributedGraphPartition", "DistributedRecv",
    "DistributedSend", "DistributedSendRefHolder",
    "execute_distributed_partition", "find_distributed_partition",
    "generate_code_for_partition", "make_distributed_recv",
    "make_distributed_send", "make_distributed_send_ref_holder",
    "number_distributed_tags", "partition", "staple_distributed_send",
    "verify_distributed_partition",
    "analysis", "eliminate_dead_code", "equality", "materialize_with_mpms",
    "rewrite_einsums_with_no_broadcasts", "to_index_lambda", "transform",
    "generate_jax", "unify_axes_tags",
    "codegen", "function", "inline_calls", "tag_all_calls_to_be_inlined",
    "trace_call", "sparse", "CSRMatmul", "CSRMatrix", "SparseMatmul",
    "SparseMatrix", "make_csr_matrix", "sparse_matmul", "loopy", "call_loopy",
    "stringify",
]

# the names NumPy's refusals may point at (pytato_like._numpy_interop)
pytato_like._numpy_interop.PACKAGE_NAMES.update(__dir__())
