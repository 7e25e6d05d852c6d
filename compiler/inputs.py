"""Model inputs: read from .npy/.npz files, or made up with a fixed seed.

`random_inputs` is the one generator of made-up inputs: `luminal run` without `--input`,
the bench's seeded and fresh input sets, the search's measurement and whole-model check,
and the tests all draw from it, so a given seed means the same arrays everywhere.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from luminal.compiler.ir import DType, TensorSpec
from luminal.errors import UsageError


def random_inputs(specs: Sequence[TensorSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """Floats ~ N(0, 1); integers in [0, 2); bools 50/50.  Drawn in `specs` order.

    Integers are 0 or 1 because an integer input is most often an index (token ids into an
    embedding, Gather or GatherElements indices, OneHot's positions): 0 and 1 are valid
    along any indexed dim of size >= 2, so a made-up input never reads out of range (where
    the reference interpreter and compiled code would disagree on garbage, or fault), and
    two values still exercise the index path rather than one row.
    """
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in specs:
        if spec.dtype.is_float:
            value = rng.standard_normal(spec.shape).astype(spec.dtype.np)
        elif spec.dtype is DType.BOOL:
            value = rng.random(spec.shape) < 0.5
        else:
            value = rng.integers(0, 2, spec.shape).astype(spec.dtype.np)
        feeds[spec.name] = np.asarray(value)
    return feeds


def read_inputs(pairs: Iterable[str], specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """Parse `NAME=FILE.npy` (or a single `FILE.npz` holding every input by name)."""
    names = {s.name for s in specs}
    feeds: dict[str, np.ndarray] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep:
            if pair.endswith(".npz"):
                feeds.update(_read_npz(Path(pair)))
                continue
            raise UsageError(f"--input '{pair}': expected NAME=FILE.npy or FILE.npz")
        if name not in names:
            raise UsageError(
                f"--input '{pair}': the model has no input '{name}' (inputs: {sorted(names)})"
            )
        feeds[name] = _read_npy(Path(path))
    return feeds


def _read_npy(path: Path) -> np.ndarray:
    if not path.is_file():
        raise UsageError(f"{path}: no such input file")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise UsageError(
            f"{path}: not a readable .npy array ({' '.join(str(err).split())})"
        ) from None


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise UsageError(f"{path}: no such input file")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise UsageError(
            f"{path}: not a readable .npz archive ({' '.join(str(err).split())})"
        ) from None
