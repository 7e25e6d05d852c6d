"""The LLM baseline: `transformers` `generate` in torch eager, as a user runs it.

`open_generate(model_dir, threads, new_tokens)` loads the Hugging Face model from its
directory (local files only) and returns a `GenerateRunner`: called with
`{"input_ids": [batch, prompt] int64}` it generates `new_tokens` greedy tokens per row
(EOS ignored: `min_new_tokens = max_new_tokens`) under `torch.inference_mode` with the
model's own KV cache, and returns `{"tokens": [batch, new_tokens] int64}`; `timed` does
the same and also returns the time to first token and each later step's wall time, read
by a logits processor that `generate` calls once per token, after that token's forward.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal.references.baselines.base import Feeds, Outputs

__all__ = ["GenerateRunner", "StepTimes", "open_generate"]


@dataclass(frozen=True)
class StepTimes:
    ttft_s: float
    step_s: tuple[float, ...]

    def decode_tokens_per_s(self, batch: int) -> float:
        total = sum(self.step_s)
        return batch * len(self.step_s) / total if total > 0 else 0.0


@dataclass
class _Clock:
    """A logits processor that records when each token's logits are ready."""

    marks: list[float] = field(default_factory=list)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.marks.append(time.perf_counter())
        return scores


class GenerateRunner:
    def __init__(self, model: Any, threads: int, new_tokens: int) -> None:
        import torch

        self.model, self.new_tokens = model, new_tokens
        torch.set_num_threads(threads)
        self.info = {
            "object": f"transformers {type(model).__name__}.generate",
            "mode": "eager, greedy, KV cache (the model's default cache)",
            "threads": threads,
            "new_tokens": new_tokens,
        }

    def __call__(self, feeds: Feeds) -> Outputs:
        tokens = self._generate(np.asarray(feeds["input_ids"]), None)
        return {"tokens": tokens}

    def timed(self, input_ids: np.ndarray) -> tuple[np.ndarray, StepTimes]:
        clock = _Clock()
        t0 = time.perf_counter()
        tokens = self._generate(input_ids, clock)
        marks = clock.marks
        return tokens, StepTimes(marks[0] - t0, tuple(b - a for a, b in itertools.pairwise(marks)))

    def _generate(self, input_ids: np.ndarray, clock: _Clock | None) -> np.ndarray:
        import torch
        from transformers import LogitsProcessorList

        ids = torch.from_numpy(np.ascontiguousarray(input_ids, np.int64))
        pad = self.model.config.eos_token_id
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.new_tokens,
                min_new_tokens=self.new_tokens,
                do_sample=False,
                pad_token_id=pad if isinstance(pad, int) else 0,
                logits_processor=LogitsProcessorList([clock]) if clock else None,
            )
        return out[:, ids.shape[1] :].numpy().astype(np.int64)


def open_generate(model_dir: Path, threads: int, new_tokens: int) -> GenerateRunner:
    from luminal.compiler.llm.hf import load_pretrained

    return GenerateRunner(load_pretrained(model_dir), threads, new_tokens)
