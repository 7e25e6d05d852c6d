"""The LLM baseline: `transformers` `generate` in torch eager, as a user runs it.

`open_generate(model_dir, threads, new_tokens)` loads the Hugging Face model from its
directory (local files only) and returns a `GenerateRunner`: called with
`{"input_ids": [batch, prompt] int64}` it generates `new_tokens` greedy tokens per row
under `torch.inference_mode` with the model's own KV cache, and returns
`{"tokens": [batch, new_tokens] int64}`.  EOS is switched off in the generation config
(plain argmax for exactly `new_tokens`; `min_new_tokens` would instead mask EOS's logit
and pick another token where EOS is the argmax).  `generate(prompts)` takes prompts of
different lengths, left-padded with an attention mask as `generate` expects, and also
returns the time to first token and each later step's wall time, read by a logits
processor that `generate` calls once per token, after that token's forward.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal.references.baselines.base import Feeds, Outputs

__all__ = ["GenerateRunner", "StepTimes", "greedy_config", "left_pad", "open_generate"]


@dataclass(frozen=True)
class StepTimes:
    ttft_s: float
    step_s: tuple[float, ...]

    def decode_tokens_per_s(self, batch: int) -> float:
        total = sum(self.step_s)
        return batch * len(self.step_s) / total if total > 0 else 0.0


def left_pad(prompts: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of different lengths as `input_ids` and `attention_mask`, padded on the
    left (a decoder continues from each row's last column)."""
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad, dtype=np.int64)
    mask = np.zeros((len(prompts), width), dtype=np.int64)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    return ids, mask


def greedy_config(model: Any) -> Any:
    """The model's generation config, greedy, with EOS off (pad stays the EOS id)."""
    import copy

    cfg = copy.deepcopy(model.generation_config)
    eos = cfg.eos_token_id if cfg.eos_token_id is not None else model.config.eos_token_id
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    cfg.pad_token_id = eos if eos is not None else 0
    cfg.eos_token_id = None
    cfg.do_sample = False
    return cfg


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
        self.config = greedy_config(model)
        torch.set_num_threads(threads)
        self.info = {
            "object": f"transformers {type(model).__name__}.generate",
            "mode": "eager, greedy (EOS off), KV cache (the model's default cache)",
            "threads": threads,
            "new_tokens": new_tokens,
        }

    def __call__(self, feeds: Feeds) -> Outputs:
        ids = np.asarray(feeds["input_ids"], np.int64)
        return {"tokens": self._generate(ids, np.ones_like(ids), None)}

    def timed(self, input_ids: np.ndarray) -> tuple[np.ndarray, StepTimes]:
        ids = np.asarray(input_ids, np.int64)
        return self._timed(ids, np.ones_like(ids))

    def generate(self, prompts: list[list[int]]) -> tuple[np.ndarray, StepTimes]:
        """Prompts of any lengths, left-padded: the tokens and their times."""
        return self._timed(*left_pad(prompts, self.config.pad_token_id))

    def _timed(self, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, StepTimes]:
        clock = _Clock()
        t0 = time.perf_counter()
        tokens = self._generate(ids, mask, clock)
        marks = clock.marks
        return tokens, StepTimes(marks[0] - t0, tuple(b - a for a, b in itertools.pairwise(marks)))

    def _generate(self, ids: np.ndarray, mask: np.ndarray, clock: _Clock | None) -> np.ndarray:
        import torch
        from transformers import LogitsProcessorList

        x = torch.from_numpy(np.ascontiguousarray(ids))
        with torch.inference_mode():
            out = self.model.generate(
                x,
                attention_mask=torch.from_numpy(np.ascontiguousarray(mask)),
                generation_config=self.config,
                max_new_tokens=self.new_tokens,
                logits_processor=LogitsProcessorList([clock]) if clock else None,
            )
        return out[:, x.shape[1] :].numpy().astype(np.int64)


def open_generate(model_dir: Path, threads: int, new_tokens: int) -> GenerateRunner:
    from luminal.compiler.llm.hf import load_pretrained

    return GenerateRunner(load_pretrained(model_dir), threads, new_tokens)
