"""Preparing a DAG for code generation (pytato's ``pytato.codegen``).

* :func:`normalize_outputs`: a program result (an array, a dict of arrays,
  a :class:`~pytato_like.array.DictOfNamedArrays`) as a
  :class:`~pytato_like.array.DictOfNamedArrays`; the conversion rule is
  :func:`pytato_like.target.normalize_outputs`.
* :class:`CodeGenPreprocessor`: a copy of the DAG in the form code
  generators consume -- every node with an expression lowered to an
  :class:`~pytato_like.array.IndexLambda` (by the rules of
  :mod:`pytato_like.transform.lower_to_index_lambda`), every data wrapper
  replaced by a placeholder whose data is recorded in
  :attr:`~CodeGenPreprocessor.bound_arguments`.
* :func:`preprocess`: both, plus the order in which to compute the outputs
  (an output another output depends on comes first), as a
  :class:`PreprocessResult`.

All of it runs on DAGs of any depth at the default recursion limit (the
preprocessor is a :class:`~pytato_like.transform.CopyMapper`).

.. autofunction:: normalize_outputs
.. autoclass:: CodeGenPreprocessor
.. autoclass:: PreprocessResult
.. autofunction:: preprocess
.. autofunction:: _generate_name_for_temp
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pytools import UniqueNameGenerator
from pytools.graph import compute_topological_order

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DataWrapper,
    DictOfNamedArrays,
    Placeholder,
    make_dict_of_named_arrays,
)
from pytato_like.diagnostic import NameClashError
from pytato_like.tags import Named, PrefixNamed
from pytato_like.target import gather_program_inputs
from pytato_like.target import normalize_outputs as _outputs_by_name
from pytato_like.transform import (
    CopyMapper,
    SubsetDependencyMapper,
    copy_dict_of_named_arrays,
)
from pytato_like.transform.lower_to_index_lambda import ToIndexLambdaMixin

if TYPE_CHECKING:
    from pytato_like.function import FunctionDefinition
    from pytato_like.transform.mapper import CachedMapperCache


def normalize_outputs(result: Array | DictOfNamedArrays | dict[str, Array]
                      ) -> DictOfNamedArrays:
    """*result* as a :class:`~pytato_like.array.DictOfNamedArrays` (an
    array alone is named ``_pt_out``); anything else raises
    :class:`~pytato_like.diagnostic.NotAnArrayError`."""
    outputs, _ = _outputs_by_name(result)
    if isinstance(result, DictOfNamedArrays):
        return result
    return make_dict_of_named_arrays(outputs)


def _generate_name_for_temp(expr: Array, var_name_gen: UniqueNameGenerator,
                            default_prefix: str = "_pt_temp") -> str:
    """The name of the variable holding the stored array *expr* (pytato's
    rule, called by arraycontext): the name of its
    :class:`~pytato_like.tags.Named` tag, which is then taken in
    *var_name_gen*; else a new name from *var_name_gen* based on the prefix
    of its :class:`~pytato_like.tags.PrefixNamed` tag; else one based on
    *default_prefix*.

    A :class:`~pytato_like.tags.Named` name that *var_name_gen* already has
    raises :class:`~pytato_like.diagnostic.NameClashError` (a
    :class:`ValueError`, as pytato raises).
    """
    named = expr.tags_of_type(Named)
    if named:
        name = next(iter(named)).name
        if var_name_gen.is_name_conflicting(name):
            raise NameClashError(
                f"cannot name the temporary holding the {type(expr).__name__} "
                f"of shape {expr.shape} and dtype {expr.dtype} {name!r} (its "
                "Named tag): the name is already taken")
        var_name_gen.add_name(name)
        return name
    prefixed = expr.tags_of_type(PrefixNamed)
    if prefixed:
        return var_name_gen(next(iter(prefixed)).prefix)
    return var_name_gen(default_prefix)


class CodeGenPreprocessor(ToIndexLambdaMixin, CopyMapper):
    """Copies a DAG into the form code generators consume:

    * a :class:`~pytato_like.array.DataWrapper` becomes a
      :class:`~pytato_like.array.Placeholder` (its own name if it has one,
      else ``_pt_data...``), its data recorded in :attr:`bound_arguments`;
    * einsums, reshapes, axis permutations, rolls, indexing, concatenations
      and stacks become :class:`~pytato_like.array.IndexLambda` nodes.

    .. attribute:: bound_arguments

        placeholder name -> the data of the data wrapper it replaced.

    .. attribute:: target

        The target code is generated for (kept for subclasses).
    """

    def __init__(self, target: object = None, kernels_seen: dict | None = None,
                 _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        super().__init__(_cache=_cache, _function_cache=_function_cache)
        self.target = target
        self.kernels_seen: dict = {} if kernels_seen is None else kernels_seen
        self.bound_arguments: dict[str, object] = {}
        self.var_name_gen = UniqueNameGenerator()

    def map_data_wrapper(self, expr: DataWrapper) -> Array:
        if expr.name is not None:
            name = expr.name
            self.var_name_gen.add_name(name, conflicting_ok=True)
        else:
            name = self.var_name_gen("_pt_data")
        self.bound_arguments[name] = expr.data
        shape = tuple(self.rec(d) if isinstance(d, Array) else d
                      for d in expr.shape)
        return Placeholder(name, shape, expr.dtype, axes=expr.axes,
                           tags=expr.tags)

    def clone_for_callee(self, function: FunctionDefinition) -> CodeGenPreprocessor:
        return type(self)(self.target, self.kernels_seen,
                          _function_cache=self._function_cache)


@dataclasses.dataclass(repr=False, eq=False)
class PreprocessResult:
    """What :func:`preprocess` returns.

    .. attribute:: outputs

        The preprocessed :class:`~pytato_like.array.DictOfNamedArrays`.

    .. attribute:: compute_order

        The output names, each after the outputs it depends on.

    .. attribute:: bound_arguments

        placeholder name -> data, for the data wrappers replaced.
    """

    outputs: DictOfNamedArrays
    compute_order: tuple[str, ...]
    bound_arguments: dict[str, object]


def preprocess(outputs: DictOfNamedArrays, target: object = None
               ) -> PreprocessResult:
    """*outputs* prepared for code generation by a
    :class:`CodeGenPreprocessor`, with the order in which to compute them.
    Raises :class:`~pytato_like.diagnostic.NameClashError` when two
    different inputs share a name."""
    outputs = normalize_outputs(outputs)
    exprs = list(outputs._data.values())
    gather_program_inputs(topological_order(exprs))  # checks input names

    # an output that another output uses is computed first
    get_deps = SubsetDependencyMapper(frozenset(exprs))
    rep_name = {ary: name for name, ary in reversed(outputs._data.items())}
    users_of_deps = {
        name: frozenset(rep_name[dep] for dep in get_deps(ary)) - {name}
        for name, ary in outputs._data.items()}
    order = compute_topological_order(users_of_deps, key=lambda n: n)[::-1]

    try:  # outlined function calls, where the package has them
        from pytato_like.transform.calls import inline_calls
    except ImportError:
        pass
    else:
        outputs = inline_calls(outputs)

    mapper = CodeGenPreprocessor(target)
    new_outputs = copy_dict_of_named_arrays(outputs, mapper)
    return PreprocessResult(outputs=new_outputs, compute_order=tuple(order),
                            bound_arguments=mapper.bound_arguments)
