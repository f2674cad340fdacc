"""Benchmark scripts that print figures (run from the repository root with python -m)."""
