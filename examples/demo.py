"""Placeholder for the distributed solver demo (the real one replaces this)."""

import numpy as np

print("demo placeholder", np.__version__)
