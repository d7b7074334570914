"""Benchmarks: datasets, systems, scoring and reports (issue 4; scoring first)."""
