"""Small decoder language models for the generation tests and benchmarks, built in code.

Random weights from fixed seeds (nothing downloaded), from `transformers` configs:

    gpt2    GPT2LMHeadModel: 2 layers, 4 heads of 32, learned positions, tied head
    llama   LlamaForCausalLM: 2 layers, RoPE, RMSNorm, SwiGLU, 4 query heads sharing
            2 key/value heads (grouped-query attention)

`initializer_range` is raised from 0.02 to 0.2 so random logits are spread far
enough apart that greedy decoding is decided by the model, not by float rounding.
"""

from __future__ import annotations

from typing import Any

import torch

from luminal.integrations.torchvision_compat import torchvision

__all__ = ["NAMES", "build"]

NAMES = ("gpt2", "llama")
SEED = 0


def build(name: str, *, layers: int = 2, vocab: int = 1000, positions: int = 1024) -> Any:
    """The named model (eval mode, f32), with weights from a fixed seed."""
    torchvision()  # transformers imports torchvision when it is installed
    import transformers as tf

    torch.manual_seed(SEED)
    if name == "gpt2":
        cfg = tf.GPT2Config(
            n_layer=layers,
            n_embd=128,
            n_head=4,
            vocab_size=vocab,
            n_positions=positions,
            initializer_range=0.2,
            bos_token_id=vocab - 1,
            eos_token_id=vocab - 1,
        )
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = tf.LlamaConfig(
            num_hidden_layers=layers,
            hidden_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=256,
            vocab_size=vocab,
            max_position_embeddings=positions,
            initializer_range=0.2,
        )
        model = tf.LlamaForCausalLM(cfg)
    else:
        raise KeyError(f"unknown decoder {name!r}; known: {', '.join(NAMES)}")
    return model.eval()
