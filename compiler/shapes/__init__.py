"""Symbolic dimensions: one artifact serving every size in a shape profile.

profile.py   `--profile batch=1..32:8` and `--shapes`: the ranges, and the buckets
             (sizes compiled) each one gets
padding.py   why a size-n input may run in code compiled for B >= n: axis tags,
             masked reductions, what is refused
record.py    what the artifact's manifest records of its profile
build.py     `compile_profiled`: one static compile per bucket, a reference check of
             the padding, one artifact (`compiler/runtime/profiled.py` runs it)
"""
