"""Small decoder language models for the generation tests and benchmarks, built in code.

Random weights from fixed seeds (nothing downloaded), from `transformers` configs:

    gpt2    GPT2LMHeadModel: 2 layers, 4 heads of 32, learned positions, tied head
    llama   LlamaForCausalLM: 2 layers, RoPE, RMSNorm, SwiGLU, 4 query heads sharing
            2 key/value heads (grouped-query attention)

`size="base"` widens both to the width of real small models (GPT-2 small: hidden 768,
12 heads, vocab 50257; Llama-style: hidden 1024, 16 query heads sharing 4 KV heads,
SwiGLU 2816, vocab 32000), still 2 layers, for decode benchmarks where reading the
weights, not Python overhead, is the cost.

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


SIZES = ("small", "base")


def build(name: str, *, size: str = "small", layers: int = 2, positions: int = 1024) -> Any:
    """The named model (eval mode, f32), with weights from a fixed seed."""
    if size not in SIZES:
        raise KeyError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    base = size == "base"
    torchvision()  # transformers imports torchvision when it is installed
    import transformers as tf

    torch.manual_seed(SEED)
    if name == "gpt2":
        cfg = tf.GPT2Config(
            n_layer=layers,
            n_embd=768 if base else 128,
            n_head=12 if base else 4,
            vocab_size=(vocab := 50257 if base else 1000),
            n_positions=positions,
            initializer_range=0.2,
            bos_token_id=vocab - 1,
            eos_token_id=vocab - 1,
        )
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = tf.LlamaConfig(
            num_hidden_layers=layers,
            hidden_size=1024 if base else 128,
            num_attention_heads=16 if base else 4,
            num_key_value_heads=4 if base else 2,
            intermediate_size=2816 if base else 256,
            vocab_size=32000 if base else 1000,
            max_position_embeddings=positions,
            initializer_range=0.2,
        )
        model = tf.LlamaForCausalLM(cfg)
    else:
        raise KeyError(f"unknown decoder {name!r}; known: {', '.join(NAMES)}")
    return model.eval()
