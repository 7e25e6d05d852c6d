"""IR element types against numpy's: bfloat16 comes from ml_dtypes, imported only where a
bfloat16 is met (its import is most of `import luminal`'s start-up)."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from luminal.compiler.ir import DType


def test_every_dtype_round_trips_through_numpy() -> None:
    for dtype in DType:
        assert DType.from_numpy(dtype.np) is dtype
    assert DType.BF16.np == np.dtype(ml_dtypes.bfloat16) and DType.BF16.itemsize == 2


def test_a_two_byte_void_is_not_bfloat16() -> None:
    with pytest.raises(ValueError, match="no IR dtype"):
        DType.from_numpy(np.dtype("V2"))


def test_importing_the_runtime_leaves_ml_dtypes_out() -> None:
    code = "import sys, luminal; print('ml_dtypes' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
