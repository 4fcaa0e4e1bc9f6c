"""Benchmarks that measure coc and its competitors in the same run and report ratios.

Each pattern is a module with ``register(patterns)`` (its ``coc bench`` sub-command) and the
measurement itself; :mod:`coc.bench.cli` lists them.
"""
