"""Benchmarks and the evaluation harness. Each module runs as `python -m bench.<name>` and prints a table."""
