"""Runtime pieces the executors use: halo packing, buffer pools."""
