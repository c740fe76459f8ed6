"""Benchmarks. Each prints ratios against a baseline measured in the same run, never
absolute pass/fail timings: ``make bench`` (or ``python -m bench [name ...]``)."""
