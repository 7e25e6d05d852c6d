"""The input sets a benchmark runs on, and their digest.

By default `count` sets are made up with seeds `seed, seed+1, ...` (floats ~ N(0, 1),
integers in [0, 2), bools 50/50: `luminal.compiler.inputs.random_inputs`).  A customer's
`--inputs FILE.npz` holds one array per model input, either exactly the input's shape (one
set) or with one extra leading axis (that many sets).  For another batch size (the
throughput scenario) the customer's samples are repeated along the batch axis.

The digest of a list of sets (the report's `inputs` subject) is SHA-256 over, for each set
in order and each input in name order, the line `"{set}\\0{name}\\0{dtype.str}\\0{shape}\\n"`
followed by the array's C-order bytes, after the prefix `luminal-inputs-v1\\n`.
TEST04's fresh inputs use seeds from FRESH_SEED up, never used for the timed sets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import TensorSpec
from luminal.errors import UsageError
from luminal.licensing.home import read_file

FRESH_SEED = 1 << 32
Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class InputSets:
    sets: tuple[Feeds, ...]
    source: str  # "seeded" or "file"
    seed: int | None = None
    file: str | None = None
    file_sha256: str | None = None

    @property
    def digest(self) -> str:
        return digest(self.sets)

    def describe(self) -> dict[str, object]:
        first = self.sets[0]
        return {
            "source": self.source,
            "seed": self.seed,
            "file": self.file,
            "file_sha256": self.file_sha256,
            "sets": len(self.sets),
            "sha256": self.digest,
            "specs": [
                {"name": n, "shape": list(a.shape), "dtype": str(a.dtype)} for n, a in first.items()
            ],
        }


def digest(sets: Sequence[Mapping[str, np.ndarray]]) -> str:
    h = hashlib.sha256(b"luminal-inputs-v1\n")
    for k, feeds in enumerate(sets):
        for name in sorted(feeds):
            a = np.ascontiguousarray(feeds[name])
            h.update(f"{k}\0{name}\0{a.dtype.str}\0{list(a.shape)}\n".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def seeded(specs: Sequence[TensorSpec], seed: int, count: int) -> InputSets:
    if count < 1:
        raise UsageError(f"--input-sets must be >= 1, got {count}")
    sets = tuple(random_inputs(specs, seed + k) for k in range(count))
    return InputSets(sets, "seeded", seed=seed)


def fresh(specs: Sequence[TensorSpec], count: int) -> list[Feeds]:
    """Inputs never used in the timed phase (TEST04)."""
    return [random_inputs(specs, FRESH_SEED + k) for k in range(count)]


def from_file(path: Path, specs: Sequence[TensorSpec]) -> InputSets:
    raw = read_file(path, "inputs")
    try:
        import io

        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError) as err:
        raise UsageError(f"{path}: not a readable .npz archive ({err})") from None
    names = [s.name for s in specs]
    if set(arrays) != set(names):
        raise UsageError(f"{path}: holds {sorted(arrays)}; the model takes {sorted(names)}")
    counts = set()
    for s in specs:
        a = arrays[s.name]
        if a.dtype != s.dtype.np:
            raise UsageError(f"{path}: '{s.name}' is {a.dtype}, the model wants {s.dtype.value}")
        if a.shape == s.shape:
            counts.add(0)
        elif a.shape[1:] == s.shape:
            counts.add(a.shape[0])
        else:
            raise UsageError(
                f"{path}: '{s.name}' has shape {a.shape}; the model wants {s.shape} "
                f"(or N sets as (N, {', '.join(map(str, s.shape))}))"
            )
    if len(counts) != 1:
        raise UsageError(f"{path}: inputs disagree on the number of sets")
    n = counts.pop()
    if n == 0:
        sets: tuple[Feeds, ...] = ({k: arrays[k] for k in names},)
    else:
        sets = tuple({k: np.ascontiguousarray(arrays[k][i]) for k in names} for i in range(n))
    sha = hashlib.sha256(raw).hexdigest()
    return InputSets(sets, "file", file=str(path), file_sha256=sha)


def rebatch(inputs: InputSets, specs: Sequence[TensorSpec]) -> InputSets:
    """The same input sets at the batch size of `specs` (leading axis)."""
    if inputs.source == "seeded":
        assert inputs.seed is not None
        return seeded(specs, inputs.seed, len(inputs.sets))
    sets = []
    for feeds in inputs.sets:
        out = {}
        for s in specs:
            a = feeds[s.name]
            reps = -(-s.shape[0] // a.shape[0])
            out[s.name] = np.ascontiguousarray(np.concatenate([a] * reps)[: s.shape[0]])
        sets.append(out)
    return InputSets(tuple(sets), "file", file=inputs.file, file_sha256=inputs.file_sha256)
