"""Shared fixtures of the test suite: seeded random data and dtype lists."""

from __future__ import annotations

import numpy as np
import pytest

#: Every dtype the front end is tested with.
ALL_DTYPES = ("float32", "float64", "int8", "int32", "int64", "uint8",
              "uint32", "complex64", "complex128", "bool")
REAL_FLOAT_DTYPES = ("float32", "float64")
INEXACT_DTYPES = ("float32", "float64", "complex64", "complex128")
INT_DTYPES = ("int8", "int32", "int64", "uint8", "uint32")
NUMERIC_DTYPES = tuple(d for d in ALL_DTYPES if d != "bool")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed, so every test sees the same
    data on every run."""
    return np.random.default_rng(1234)
