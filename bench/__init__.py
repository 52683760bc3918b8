"""Benchmarks: `python -m bench` runs the suite and prints one table (see bench/run.py and bench/README.md)."""
