"""Runtime pieces the executors use: halo packing, buffer pools, Bufferizer."""

from pytato_like.runtime.bufferizer import Bufferizer
from pytato_like.runtime.halo import (
    HaloDataTransformer,
    HaloExchangeSpec,
    QuantityHaloSpec,
)

__all__ = ["Bufferizer", "HaloDataTransformer", "HaloExchangeSpec",
           "QuantityHaloSpec"]
