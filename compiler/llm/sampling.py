"""How the next token is chosen from a step's logits: greedy, or temperature and top-k
sampling from a seeded generator (the same seed gives the same tokens)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.errors import UsageError

__all__ = ["Sampling"]


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0: greedy (the first largest logit, as torch.argmax)
    top_k: int = 0  # 0: every token
    seed: int = 0

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature < 0:
            raise UsageError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise UsageError(f"top-k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def generator(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def choose(self, logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One token per row of `logits` [batch, vocab]."""
        if self.greedy:
            return logits.argmax(-1).astype(np.int64)
        z = logits.astype(np.float64) / self.temperature
        if 0 < self.top_k < z.shape[-1]:
            kth = np.partition(z, -self.top_k, axis=-1)[:, -self.top_k][:, None]
            z = np.where(z >= kth, z, -np.inf)
        z -= z.max(-1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(-1, keepdims=True)
        return np.array([rng.choice(p.shape[-1], p=row) for row in p], np.int64)
