"""`CompileOptions`: what a compile is asked to do, for every target.

`budget_seconds` decides how much searching happens: None = none (the backend's default
variants, no tuning database: what tests and integrations want); 0 = the e-graph rewrite
plus tuning-database hits, nothing measured; > 0 = rewrite, then measure kernel variants
for up to that long.  `precision` lowers an f32 model's storage to fp16 or bf16
(`ir/precision.py`; `auto` builds fp32 today, docs/compiler.md "Precision"); a compile
records the precision it built, so an artifact's manifest never says `auto`.
`cache_key()` is stable across runs of the same luminal version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from luminal._version import __version__
from luminal.compiler.ir.precision import Precision


@dataclass(frozen=True)
class CompileOptions:
    target: str = "cpu"
    tile_m: int | None = None  # contraction register tile; None picks by vector width
    tile_n: int | None = None
    openmp: bool = True
    budget_seconds: float | None = None
    top_k: int = 4  # candidates per kernel that get timed
    model_runs: bool = True  # the bench's close calls decided in model runs (search/incontext.py)
    tuning_db: str | None = None  # path; None: $LUMINAL_TUNING_DB or $LUMINAL_HOME/tuning.db
    use_tuning_db: bool = True  # False: measure even what the database knows
    rewrite: bool = True  # e-graph rewrites when searching
    precision: Precision = Precision.FP32  # storage of the model's floats

    @property
    def searching(self) -> bool:
        return self.budget_seconds is not None

    def cache_key(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True) + __version__
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "precision": Precision(self.precision).value}
