"""Benchmarks of pytato_like (run with ``python -m bench`` or ``make bench``).

Each ``bench_<area>.py`` module has ``main(argv=None) -> dict`` that prints a
table and returns its figures. Figures are ratios measured within one run
(against NumPy eager, against the copy-bandwidth floor), because absolute
timings on shared 2-core machines are noisy.

The benchmarks time compiled kernels and compiles: a program's first call
is compiled here, not run on the host while it compiles
(``PYTATO_LIKE_HOST_FIRST_CALL=0`` unless set; ``bench_cold_start``
measures both).
"""

import os

os.environ.setdefault("PYTATO_LIKE_HOST_FIRST_CALL", "0")
