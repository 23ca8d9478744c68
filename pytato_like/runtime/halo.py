"""Halo packing: many n-d slices of many arrays into ONE contiguous buffer.

A communication step rarely sends one whole array: it sends the edges
(halos) of several fields to a neighbour, sometimes in a rotated frame (on a
cubed sphere the neighbouring tile's axes are turned by a multiple of 90
degrees). Sending each slice as its own message costs one latency per slice;
this module packs all of them into one buffer, so an exchange is one
message.

* :class:`QuantityHaloSpec` -- the memory layout of one quantity (shape,
  dtype, names of its dimensions, halo width);
* :class:`HaloExchangeSpec` -- what one exchange does with one quantity:
  the region to pack, the number of clockwise quarter turns applied before
  packing, and the region to unpack into;
* :class:`HaloDataTransformer` -- the packer/unpacker. :meth:`~HaloDataTransformer.get`
  returns a NumPy variant (given the :mod:`numpy` module) or an OpenCL
  variant (given a :class:`pyopencl.CommandQueue`: one launch of a
  loopy-generated copy kernel per segment, enqueued asynchronously).

This module is the public face; the code lives by concern in
:mod:`~pytato_like.runtime.halo_spec` (specs, rotation, buffer layout),
:mod:`~pytato_like.runtime.halo_transformer` (the packer contract and its
buffers), :mod:`~pytato_like.runtime.halo_numpy` (host packer) and
:mod:`~pytato_like.runtime.halo_opencl` (device packer and its kernels).

Order of use::

    t = HaloDataTransformer.get(np_or_queue, specs_x, specs_y)
    t.async_pack(qx, qy)           # gather regions into the pack buffer
    send(t.get_pack_buffer())      # synchronizes, then communicate
    recv(t.get_unpack_buffer())    # receive into the unpack buffer
    t.async_unpack(qx, qy)         # scatter into the destination regions
    t.synchronize()                # destination arrays are now up to date
    t.finalize()                   # buffers go back to the pool

Rotation convention
-------------------

Axis names starting with ``x`` / ``y`` mark the horizontal axes (default
dims: axis 0 is ``x``, axis 1 is ``y``). Picture ``x`` pointing right and
``y`` pointing up. *One clockwise quarter turn* of a scalar field moves the
value at ``(x, y)`` to ``(y, -x)``; in index terms, for an array ``a`` with
``x`` on axis ``ix`` and ``y`` on axis ``iy`` it is
``numpy.rot90(a, 1, axes=(iy, ix))`` (two turns reverse both horizontal
axes). A vector field turns as a whole: positions move as above *and* the
components are turned, so the packed pair is

==========  ===================  ==================
turns       packed x-component   packed y-component
==========  ===================  ==================
0           ``x``                ``y``
1           ``y``                ``-x``
2           ``-x``               ``-y``
3           ``-y``               ``x``
==========  ===================  ==================

where ``x``/``y`` are the rotated slices of the x/y-component arrays (an
east-pointing vector ``(1, 0)`` turned clockwise points south, ``(0, -1)``).
:attr:`HaloExchangeSpec.pack_clockwise_rotation` turns are applied *before
packing*; unpacking never rotates, so the receiver's unpack region has the
rotated shape.

Buffer layout
-------------

Segments follow the order of the descriptors (for vectors: x then y of the
first pair, then of the second pair, ...), each one C-ordered. If every
quantity has the same dtype the buffer has that dtype and segments are
adjacent; otherwise the buffer is ``uint8`` and every segment starts at a
multiple of 16 bytes. Both sides of an exchange compute the layout from the
same (shape, dtype) list, so they agree without sending it.
:attr:`~HaloDataTransformer.pack_layout` and
:attr:`~HaloDataTransformer.unpack_layout` show it.

.. autoclass:: QuantityHaloSpec
.. autoclass:: HaloExchangeSpec
    :members: whole_array, pack_shape, packed_shape, unpack_shape
.. autoclass:: Segment
.. autoclass:: HaloDataTransformer
    :members:
.. autoclass:: HaloDataTransformerNumpy
.. autoclass:: HaloDataTransformerOpenCL
.. autofunction:: rotate_scalar_data
.. autofunction:: rotate_vector_data

.. automodule:: pytato_like.runtime.halo_opencl
"""

from pytato_like.runtime.halo_numpy import HaloDataTransformerNumpy
from pytato_like.runtime.halo_opencl import HaloDataTransformerOpenCL
from pytato_like.runtime.halo_spec import (
    SEGMENT_ALIGNMENT,
    HaloExchangeSpec,
    QuantityHaloSpec,
    Segment,
    default_dims,
    rotate_scalar_data,
    rotate_vector_data,
)
from pytato_like.runtime.halo_transformer import HaloDataTransformer

__all__ = ["SEGMENT_ALIGNMENT", "HaloDataTransformer",
           "HaloDataTransformerNumpy", "HaloDataTransformerOpenCL",
           "HaloExchangeSpec", "QuantityHaloSpec", "Segment", "default_dims",
           "rotate_scalar_data", "rotate_vector_data"]
