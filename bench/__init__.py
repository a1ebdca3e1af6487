"""Benchmarks of pgconsole's collector and history store: ``make bench`` (python -m bench).

Results and methodology: docs/benchmarks.md (written by the run).
"""
