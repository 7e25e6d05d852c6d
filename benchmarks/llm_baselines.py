"""Baselines for LLM generation: torch eager `generate` and ONNX Runtime with a KV cache.

    prompts ──► torch_generate(model, ...)   HF `generate`, greedy, timed per step
           └──► export_onnx(model, dir)  ──► ort_generate(path, ...)
                 (TorchScript exporter)       prefill (past 0), then one token a step,
                                              present fed back as past

Both arms return a `GenerationTiming`: the tokens, the time to first token (prefill and
its sample) and the wall time of every later step.  EOS never ends generation: the
torch arm runs `generate` with `eos_token_id=None` (pad id stays the model's EOS), so
the result is plain argmax for exactly `max_new_tokens` and the ORT arm matches it.

    python -m benchmarks.llm_baselines --models gpt2,llama --prompt 32 --new 64 \
        --batch 1 --threads 2 [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import llm_models
from luminal.references.baselines.ort_generate import OrtGenerateRunner
from luminal.references.baselines.transformers_generate import GenerateRunner, greedy_config

__all__ = [
    "GenerationTiming",
    "export_onnx",
    "main",
    "ort_generate",
    "reference_generate",
    "torch_generate",
]


@dataclass(frozen=True)
class GenerationTiming:
    """One generation run of one arm: tokens per sequence and its wall times."""

    name: str
    tokens: list[list[int]]
    ttft_s: float  # prefill and the first token's sample
    step_s: list[float]  # each later token step

    @property
    def decode_tokens_per_s(self) -> float:
        total = sum(self.step_s)
        return len(self.tokens) * len(self.step_s) / total if total > 0 else float("nan")

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + sum(self.step_s)


def reference_generate(model: Any, prompt: list[int], max_new_tokens: int) -> list[int]:
    """`model.generate` for one prompt, batch 1, no padding: the ids both arms must equal."""
    ids = torch.tensor([prompt], dtype=torch.long)
    cfg = greedy_config(model)
    with torch.no_grad():
        out = model.generate(
            ids, generation_config=cfg, do_sample=False, max_new_tokens=max_new_tokens
        )
    return out[0, len(prompt) :].tolist()


def torch_generate(
    model: Any, prompts: list[list[int]], max_new_tokens: int, *, threads: int | None = None
) -> GenerationTiming:
    """HF `generate` as users run it (greedy, KV cache), timed per token step: the
    product's baseline runner (`references.baselines.transformers_generate`)."""
    previous = torch.get_num_threads()
    try:
        runner = GenerateRunner(model, threads or previous, max_new_tokens)
        tokens, t = runner.generate(prompts)
    finally:
        torch.set_num_threads(previous)
    return GenerationTiming("torch", tokens.tolist(), t.ttft_s, list(t.step_s))


class _DecoderWithPast(torch.nn.Module):
    """input_ids, attention_mask, position_ids, past k/v per layer → logits, present k/v."""

    def __init__(self, model: Any, layers: int) -> None:
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, *past: Any) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for layer in range(self.layers):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        present = [t for lay in out.past_key_values.layers for t in (lay.keys, lay.values)]
        return (out.logits, *present)


def _kv_shape(model: Any) -> tuple[int, int, int]:
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return cfg.num_hidden_layers, kv_heads, head_dim


def export_onnx(model: Any, directory: str | Path, name: str = "decoder") -> Path:
    """The model as `<directory>/<name>.onnx`, a decoder step with past key/values."""
    layers, kv_heads, head_dim = _kv_shape(model)
    past_names = [f"past_{kind}_{lay}" for lay in range(layers) for kind in ("key", "value")]
    present_names = [f"present_{kind}_{lay}" for lay in range(layers) for kind in ("key", "value")]
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"},
        "logits": {0: "batch", 1: "seq"},
        **{n: {0: "batch", 2: "past"} for n in past_names},
        **{n: {0: "batch", 2: "total"} for n in present_names},
    }
    batch, seq, past = 2, 3, 4  # traced with a non-empty past; every one of them is dynamic
    gen = torch.Generator().manual_seed(0)
    args = (
        torch.randint(0, model.config.vocab_size, (batch, seq), generator=gen),
        torch.ones(batch, past + seq, dtype=torch.long),
        torch.arange(past, past + seq).expand(batch, seq).contiguous(),
        *(torch.randn(batch, kv_heads, past, head_dim, generator=gen) for _ in past_names),
    )
    path = Path(directory) / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    # The exporter restores the wrapper's training flag on the way out, and a fresh
    # module is in training mode: without eval() here GPT-2's dropout comes back on.
    was_training = model.training
    wrapper = _DecoderWithPast(model, layers).eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer and deprecation chatter
            torch.onnx.export(
                wrapper,
                args,
                str(path),
                input_names=["input_ids", "attention_mask", "position_ids", *past_names],
                output_names=["logits", *present_names],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
    finally:
        model.train(was_training)
    return path


@functools.lru_cache(maxsize=8)
def _ort_runner(path: str, mtime_ns: int, threads: int, new: int) -> OrtGenerateRunner:
    return OrtGenerateRunner(Path(path), threads, new)


def ort_generate(
    onnx_path: str | Path, prompts: list[list[int]], max_new_tokens: int, threads: int = 1
) -> GenerationTiming:
    """Greedy generation on ONNX Runtime, present fed back as past: the product's
    baseline runner (`references.baselines.ort_generate`), its session kept per file."""
    path = Path(onnx_path)
    runner = _ort_runner(str(path), path.stat().st_mtime_ns, threads, max_new_tokens)
    tokens, t = runner.generate(prompts)
    return GenerationTiming("ort", tokens.tolist(), t.ttft_s, list(t.step_s))


def _prompts(batch: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, size=(batch, length)).tolist()


def _cell(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main(argv: list[str] | None = None) -> int:
    """Time both arms per model and print a markdown table of medians (min-max)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm_baselines")
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--prompt", type=int, default=32, help="prompt length in tokens")
    parser.add_argument("--new", type=int, default=64, help="tokens to generate")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    print(
        f"prompt {args.prompt}, new {args.new}, batch {args.batch}, threads {args.threads}, "
        f"repeats {args.repeats} (median (min-max), after one warm-up per arm)\n"
    )
    print("| model | arm | TTFT ms | decode tok/s | e2e ms |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = llm_models.build(name)
            prompts = _prompts(args.batch, args.prompt, model.config.vocab_size)
            onnx_path = export_onnx(model, tmp, name)
            arms = {
                "torch": functools.partial(
                    torch_generate, model, prompts, args.new, threads=args.threads
                ),
                "ort": functools.partial(ort_generate, onnx_path, prompts, args.new, args.threads),
            }
            runs: dict[str, list[GenerationTiming]] = {arm: [] for arm in arms}
            for run in arms.values():
                run()  # warm-up
            for _ in range(args.repeats):
                for arm, run in arms.items():
                    runs[arm].append(run())
            if runs["torch"][0].tokens != runs["ort"][0].tokens:
                print(f"<!-- {name}: torch and ort tokens differ -->")
            for arm, timings in runs.items():
                ttft = _cell([t.ttft_s * 1e3 for t in timings], ".2f")
                tps = _cell([t.decode_tokens_per_s for t in timings], ".0f")
                e2e = _cell([t.e2e_s * 1e3 for t in timings], ".1f")
                print(f"| {name} | {arm} | {ttft} | {tps} | {e2e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
