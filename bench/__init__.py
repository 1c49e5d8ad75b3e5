"""Benchmarks: each prints its configuration, the machine's cores and every figure with its baseline."""
