"""The host halo packer: :class:`HaloDataTransformerNumpy` moves each
segment with one NumPy copy between a view of the quantity and a view of
the buffer."""

from __future__ import annotations

import numpy as np

from pytato_like.diagnostic import QuantityMismatchError
from pytato_like.runtime.halo_transformer import HaloDataTransformer


class HaloDataTransformerNumpy(HaloDataTransformer[np.ndarray]):
    """Host variant: each turned region is a view (one basic index with
    reversed slices, one transpose -- what :func:`numpy.rot90` does) copied
    straight into its segment of the buffer, no temporaries. Work is done
    when :meth:`async_pack` / :meth:`async_unpack` return."""

    _array_type = np.ndarray

    @staticmethod
    def accepts(np_module_or_queue: object) -> bool:
        return np_module_or_queue is np

    def _compile(self) -> None:
        # (component, index, basic index, axis permutation, negate) per
        # segment, so a pack is one index, one transpose, one copy each.
        self._pack_program = [(m.component, m.index, *m._turned_index,
                               m.sign < 0) for m in self._pack_moves]
        self._unpack_program = [(m.component, m.index, m.slices)
                                for m in self._unpack_moves]

    def _check_array_kind(self, array: object, where: str) -> None:
        if not isinstance(array, np.ndarray):
            raise QuantityMismatchError(
                f"{where} is a {type(array).__name__}; the NumPy transformer "
                "packs numpy.ndarray")

    def async_pack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "pack")
        for (comp, i, index, perm, negate), dst in zip(self._pack_program,
                                                       self._views(True), strict=True):
            view = groups[comp][i][index]
            if perm is not None:
                view = view.transpose(perm)
            if negate:
                np.negative(view, out=dst)
            else:
                dst[...] = view

    def async_unpack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "unpack")
        for (comp, i, slices), src in zip(self._unpack_program,
                                          self._views(False), strict=True):
            groups[comp][i][slices] = src

    def synchronize(self) -> None:
        pass

    def ready(self) -> bool:
        return True
