"""A decoder's shape, read from a Hugging Face model's config: what the prefill and step
graphs (`llm.arch`) and the decoder artifact's plan are built from.  No torch import."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from luminal.errors import UsageError

__all__ = ["Arch", "DecoderConfig", "config_of"]


class Arch(enum.Enum):
    GPT2 = "gpt2"
    LLAMA = "llama"


@dataclass(frozen=True)
class DecoderConfig:
    arch: Arch
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    vocab: int
    max_positions: int
    eos_token_id: int | None = None

    @property
    def groups(self) -> int:
        return self.heads // self.kv_heads

    def to_json(self) -> dict[str, object]:
        return {
            "arch": self.arch.value,
            "layers": self.layers,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "hidden": self.hidden,
            "vocab": self.vocab,
            "max_positions": self.max_positions,
            "eos_token_id": self.eos_token_id,
        }


def _eos(cfg: object) -> int | None:
    eos = getattr(cfg, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    return int(eos) if eos is not None else None


def config_of(model: Any) -> DecoderConfig:
    """The decoder's shape, or a UsageError naming what is not a supported decoder."""
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind == "gpt2":
        heads = int(cfg.n_head)
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False) or getattr(
            cfg, "reorder_and_upcast_attn", False
        ):
            raise UsageError(
                "gpt2: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported"
            )
        return DecoderConfig(
            Arch.GPT2,
            int(cfg.n_layer),
            heads,
            heads,
            int(cfg.n_embd) // heads,
            int(cfg.n_embd),
            int(cfg.vocab_size),
            int(cfg.n_positions),
            _eos(cfg),
        )
    if kind in ("llama", "mistral", "qwen2"):
        if getattr(cfg, "rope_scaling", None) not in (None, {}) and (
            cfg.rope_scaling.get("rope_type", "default") != "default"
        ):
            raise UsageError(f"{kind}: only default RoPE is supported, not {cfg.rope_scaling}")
        if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
            raise UsageError(f"{kind}: sliding-window attention is not supported")
        heads = int(cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        return DecoderConfig(
            Arch.LLAMA,
            int(cfg.num_hidden_layers),
            heads,
            int(cfg.num_key_value_heads or heads),
            head_dim,
            int(cfg.hidden_size),
            int(cfg.vocab_size),
            int(cfg.max_position_embeddings),
            _eos(cfg),
        )
    raise UsageError(
        f"{type(model).__name__}: not a supported decoder (model_type {kind!r}; "
        "supported: gpt2, llama, mistral, qwen2)"
    )
