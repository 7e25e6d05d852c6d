"""Triton's CPU interpreter for every test in this folder.

TRITON_INTERPRET=1 is set before any test module here imports triton: `triton.jit` reads
it when a kernel is defined, and kernels then run on CPU tensors.  The helpers the tests
share are in `tritontest.py`.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"
