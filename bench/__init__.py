"""Benchmarks of pytato_like (run with ``python -m bench`` or ``make bench``).

Each ``bench_<area>.py`` module has ``main(argv=None) -> dict`` that prints a
table and returns its figures. Figures are ratios measured within one run
(against NumPy eager, against the copy-bandwidth floor), because absolute
timings on shared 2-core machines are noisy.
"""
