"""dashmem's product code. Kept empty on purpose: every `python -m lib` process imports it first."""
