"""Decoder architectures as two static torch programs: a prefill and a one-token step.

A Hugging Face decoder (`GPT2LMHeadModel`, `LlamaForCausalLM` and models of the same
shape: RoPE, RMSNorm, SwiGLU, grouped-query attention) is read once into a
`DecoderConfig`; `Prefill` and `DecodeStep` are `nn.Module`s over the model's own
submodules (its norms, MLPs and projections, so their numerics are the model's), with
attention written out against the KV cache layout of `llm.cache`:

    cache, per layer, K and V each   [capacity, batch, kv_heads, head_dim]   position-major

Position-major means the first `c` positions of a cache are a contiguous prefix, so a
step graph compiled for a smaller capacity reads the same buffer without a copy.

Prefill (batch B, padded prompt length P; prompts right-padded, causal attention, so a
real row never attends to padding):

    inputs   input_ids [B, P] i64, last [B] i64 (each prompt's last real index)
    outputs  logits [B, vocab] at `last`; per layer k{l}, v{l} [P, B, kv_heads, head_dim]

Decode step (capacity C):

    inputs   input_ids [B] i64, position [B] i64 (= tokens cached per sequence),
             per layer k{l}, v{l} [C, B, kv_heads, head_dim] (the cache, read only)
    outputs  logits [B, vocab]; per layer k{l}, v{l} [B, kv_heads, head_dim]: the new
             token's entries, which the runtime writes at cache[position[b], b]

The step never concatenates the cache with the new token: the new token's score joins
the cached scores in one softmax and its value is added after the cached product, so
the cache is read once and never copied.  Grouped heads read their shared K/V head
directly (no repeat).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from luminal.compiler.llm.config import Arch, DecoderConfig

__all__ = ["DecodeStep", "Prefill"]


class _Blocks(nn.Module):
    """The model's pieces in one shape for both architectures."""

    def __init__(self, model: nn.Module, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.scale = 1.0 / math.sqrt(cfg.head_dim)
        if cfg.arch is Arch.GPT2:
            body = model.transformer
            self.embed, self.wpe = body.wte, body.wpe
            self.layers = body.h
            self.norm = body.ln_f
        else:
            body = model.model
            self.embed, self.wpe = body.embed_tokens, None
            self.layers = body.layers
            self.norm = body.norm
            pos = torch.arange(cfg.max_positions)[None]
            with torch.no_grad():
                cos, sin = body.rotary_emb(torch.zeros(1, dtype=torch.float32), pos)
            self.register_buffer("cos", cos[0].contiguous(), persistent=False)
            self.register_buffer("sin", sin[0].contiguous(), persistent=False)
        self.head = model.lm_head
        # a vocabulary padded to whole column panels (`schedule.contraction.PANEL`) with
        # zero rows, the padding's logits cut off: the head reads its weight in panels
        vocab, pad = self.head.weight.shape[0], -self.head.weight.shape[0] % 32
        self.vocab = vocab
        if pad and self.head.bias is None:
            w = self.head.weight.detach()
            self.register_buffer(
                "head_w", torch.cat([w, w.new_zeros(pad, w.shape[1])]), persistent=False
            )
        else:
            self.head_w = None

    def embed_at(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return x + self.wpe(pos) if self.wpe is not None else x

    def pre_attn(self, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return layer.ln_1(x) if self.cfg.arch is Arch.GPT2 else layer.input_layernorm(x)

    def qkv(
        self, layer: nn.Module, h: torch.Tensor, pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [..., heads, D], k and v [..., kv_heads, D] for rows `h` [..., hidden]
        at positions `pos` (h's leading shape)."""
        c = self.cfg
        lead = h.shape[:-1]
        if c.arch is Arch.GPT2:
            q, k, v = layer.attn.c_attn(h).split(c.hidden, dim=-1)
        else:
            a = layer.self_attn
            q, k, v = a.q_proj(h), a.k_proj(h), a.v_proj(h)
        q = q.reshape(*lead, c.heads, c.head_dim)
        k = k.reshape(*lead, c.kv_heads, c.head_dim)
        v = v.reshape(*lead, c.kv_heads, c.head_dim)
        if c.arch is Arch.LLAMA:
            cos = nn.functional.embedding(pos, self.cos).unsqueeze(-2)
            sin = nn.functional.embedding(pos, self.sin).unsqueeze(-2)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        return q, k, v

    def attn_out(self, layer: nn.Module, o: torch.Tensor) -> torch.Tensor:
        if self.cfg.arch is Arch.GPT2:
            return layer.attn.c_proj(o)
        return layer.self_attn.o_proj(o)

    def mlp(self, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        if self.cfg.arch is Arch.GPT2:
            return x + layer.mlp(layer.ln_2(x))
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.head_w is None:
            return self.head(self.norm(h))
        return nn.functional.linear(self.norm(h), self.head_w)[..., : self.vocab]


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Prefill(nn.Module):
    """The prompt pass at one padded length (see the module docstring)."""

    def __init__(self, model: nn.Module, cfg: DecoderConfig, length: int) -> None:
        super().__init__()
        self.m = _Blocks(model, cfg)
        self.length = length
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        self.register_buffer("causal", mask, persistent=False)

    def forward(self, input_ids: torch.Tensor, last: torch.Tensor) -> tuple[torch.Tensor, ...]:
        m, c = self.m, self.m.cfg
        b, p = input_ids.shape
        pos = torch.arange(p).expand(b, p)
        x = m.embed_at(input_ids, pos)
        caches: list[torch.Tensor] = []
        for layer in m.layers:
            q, k, v = m.qkv(layer, m.pre_attn(layer, x), pos)  # [B, P, H, D]
            qg = q.reshape(b, p, c.kv_heads, c.groups, c.head_dim).permute(0, 2, 3, 1, 4)
            kt = k.permute(0, 2, 3, 1).unsqueeze(2)  # [B, Hkv, 1, D, P]
            s = torch.matmul(qg, kt) * m.scale  # [B, Hkv, G, P, P]
            s = s.masked_fill(~self.causal, float("-inf"))
            w = torch.softmax(s, dim=-1)
            o = torch.matmul(w, v.permute(0, 2, 1, 3).unsqueeze(2))  # [B, Hkv, G, P, D]
            o = o.permute(0, 3, 1, 2, 4).reshape(b, p, c.heads * c.head_dim)
            x = m.mlp(layer, x + m.attn_out(layer, o))
            caches += [k.permute(1, 0, 2, 3), v.permute(1, 0, 2, 3)]  # [P, B, Hkv, D]
        h = x[torch.arange(b), last]  # [B, hidden]
        return (m.logits(h), *caches)


class DecodeStep(nn.Module):
    """One token per sequence against a cache of `capacity` (see the module docstring)."""

    def __init__(self, model: nn.Module, cfg: DecoderConfig, capacity: int) -> None:
        super().__init__()
        self.m = _Blocks(model, cfg)
        self.capacity = capacity

    def forward(
        self, input_ids: torch.Tensor, position: torch.Tensor, *cache: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        m, c = self.m, self.m.cfg
        b = input_ids.shape[0]
        x = m.embed_at(input_ids, position)  # [B, hidden]
        valid = torch.arange(self.capacity)[None, :] < position[:, None]  # [B, C]
        valid = valid[:, None, None, :]
        new: list[torch.Tensor] = []
        for n, layer in enumerate(m.layers):
            kc, vc = cache[2 * n], cache[2 * n + 1]  # [C, B, Hkv, D]
            q, k, v = m.qkv(layer, m.pre_attn(layer, x), position)  # [B, H, D], [B, Hkv, D]
            qg = q.reshape(b, c.kv_heads, c.groups, c.head_dim)
            s_old = torch.einsum("bhgd,cbhd->bhgc", qg, kc) * m.scale
            s_old = s_old.masked_fill(~valid, float("-inf"))
            s_new = (qg * k[:, :, None, :]).sum(-1, keepdim=True) * m.scale
            w = torch.softmax(torch.cat((s_old, s_new), dim=-1), dim=-1)
            o = torch.einsum("bhgc,cbhd->bhgd", w[..., : self.capacity], vc)
            o = o + w[..., self.capacity :] * v[:, :, None, :]
            x = m.mlp(layer, x + m.attn_out(layer, o.reshape(b, c.heads * c.head_dim)))
            new += [k, v]
        return (m.logits(x), *new)
