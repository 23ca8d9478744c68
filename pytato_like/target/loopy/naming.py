"""Naming stage of loopy code generation: program-level names.

:class:`ProgramNames` owns every name a program's generated code uses at
program level: the buffer names of placeholders (renamed when they clash
with C or OpenCL names), data wrappers (``_pt_data<n>``), stored
temporaries (from naming tags or ``_pt_tmp``) and outputs, and the size
names (``_pt_size``) that stand for symbolic shape components and for
constant sizes passed as kernel arguments. Chunks later rename these to
canonical local names (:mod:`~pytato_like.target.loopy.chunk_spec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

import pymbolic.primitives as prim

from pytato_like.array import Array, DataWrapper, SizeParam
from pytato_like.scalar_expr import substitute
from pytato_like.tags import CountNamed, Named, PrefixNamed
from pytato_like.utils import dim_to_index_lambda_components

if TYPE_CHECKING:
    from pymbolic.typing import Expression

    from pytato_like.target import ProgramInputs

C_KEYWORDS = frozenset("""auto break case char const continue default do double
else enum extern float for goto if inline int long register restrict return
short signed sizeof static struct switch typedef union unsigned void volatile
while kernel global local private constant half bool uchar ushort uint ulong
image2d_t image3d_t sampler_t event_t""".split())


CL_FUNCTIONS = frozenset("""abs fabs sqrt exp log log10 log2 sin cos tan asin
acos atan atan2 sinh cosh tanh pow floor ceil fmod copysign fmin fmax min max
real imag conj isnan select mad clamp sign round trunc exp2 expm1 log1p cbrt
hypot dot cross length normalize get_global_id get_local_id get_group_id
barrier lid gid""".split())


class ProgramNames:
    """The program-level names of one program, unique among each other and
    the input names.

    .. attribute:: array_name

        ``id(node) -> buffer name`` of every input and stored array.

    .. attribute:: data_wrappers

        The data wrappers of the program, in the order their buffers are
        bound.

    .. attribute:: derived_sizes

        ``size name -> pymbolic expression`` over size parameter names (or
        an int for a constant size passed as a kernel argument).

    .. attribute:: user_named

        Names of temporaries named by a naming tag; chunks keep them
        readable instead of renaming them canonically.
    """

    def __init__(self, inputs: ProgramInputs) -> None:
        from pytools import UniqueNameGenerator
        self.size_params = inputs.size_params
        self.vng = UniqueNameGenerator(forced_prefix="")
        for n in set(inputs.placeholders) | set(inputs.size_params):
            self.vng.add_name(n)
        self.array_name: dict[int, str] = {}
        for name, ph in inputs.placeholders.items():
            self.array_name[id(ph)] = self.safe(name)
        self.data_wrappers: list[DataWrapper] = []
        for dw in inputs.data_wrappers:
            if id(dw) in self.array_name:
                continue
            name = self.vng(f"_pt_data{len(self.data_wrappers)}")
            self.array_name[id(dw)] = name
            self.data_wrappers.append(dw)
        # symbolic shape components -> size names
        self.size_name: dict[int, str] = {}
        self.derived_sizes: dict[str, Expression] = {}
        self._size_by_key: dict[str | tuple[str, int], str] = {}
        self.user_named: set[str] = set()

    def fresh(self, base: str) -> str:
        """A new name starting with *base*."""
        return self.vng(base)

    def safe(self, name: str) -> str:
        """*name*, unless it would clash with C or OpenCL names."""
        if name in C_KEYWORDS or name in CL_FUNCTIONS or name.startswith("_lpy"):
            return self.vng(f"{name}_in")
        return name

    def temporary_name(self, node: Array) -> str:
        """Base name of a stored intermediate: from a
        :class:`~pytato_like.tags.Named`, :class:`~pytato_like.tags.PrefixNamed`
        or :class:`~pytato_like.tags.CountNamed` tag, else ``_pt_tmp``
        (made unique by the name generator)."""
        for tag in node.tags:
            if isinstance(tag, Named) and tag.name.isidentifier():
                return self.safe(tag.name)
            if isinstance(tag, (PrefixNamed, CountNamed)) and tag.prefix.isidentifier():
                return self.safe(tag.prefix)
        return "_pt_tmp"

    def is_size(self, name: str) -> bool:
        """Whether *name* is a size parameter or a derived size."""
        return name in self.size_params or name in self.derived_sizes

    @overload
    def dim_expr(self, d: Array) -> prim.Variable: ...
    @overload
    def dim_expr(self, d: int) -> int: ...

    def dim_expr(self, d: int | Array) -> int | prim.Variable:
        """The shape component *d* as an expression: an int, or a variable
        naming a size parameter or a derived size (one name per distinct
        expression)."""
        if isinstance(d, int):
            return d
        if isinstance(d, SizeParam):
            return prim.Variable(d.name)
        name = self.size_name.get(id(d))
        if name is None:
            expr, bindings = dim_to_index_lambda_components(d)
            expr = substitute(expr, {k: prim.Variable(v.name)
                                     for k, v in bindings.items()})
            key = str(expr)
            name = self._size_by_key.get(key)
            if name is None:
                name = self.vng("_pt_size")
                self._size_by_key[key] = name
                self.derived_sizes[name] = expr
            self.size_name[id(d)] = name
        return prim.Variable(name)

    def shape_of(self, ary: Array) -> tuple:
        """The shape of *ary* as ints and size names."""
        return tuple(d if isinstance(d, int) else self.dim_expr(d).name
                     for d in ary.shape)

    def const_size(self, value: int) -> str:
        """The size name standing for the constant *value* when passed as
        a kernel argument (one name per value)."""
        key = ("const", value)
        name = self._size_by_key.get(key)
        if name is None:
            name = self.vng("_pt_size")
            self._size_by_key[key] = name
            self.derived_sizes[name] = value
        return name
