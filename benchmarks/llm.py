"""Language-model generation: luminal's decoder artifacts against torch eager
(`transformers` `generate`) and ONNX Runtime with past key/values, and what a decode
step costs as the cache grows.

Models are `benchmarks.llm_models` (2 layers, random weights, fixed seeds): `small`
(hidden 128, vocab 1000, where per-token overhead is the cost) and `base` (GPT-2 small's
and a 1B Llama's widths, where reading the weights is).  For each model:

1. **Generation** at batch `--batch` with prompts of `--prompt` tokens (random ids, fixed
   seed) and `--new` greedy tokens: time to first token (prefill and the first choice),
   decode tokens per second (every sequence's tokens over the steps' wall time) and end to
   end, per arm.  Arms run one generation each per round in a rotated order after one
   warm-up generation each, for `--repeats` rounds; medians with [min-max].  The tokens of
   every arm must equal torch eager's (checked, printed).
2. **Decode step vs cached tokens**: one step timed at `--cached` positions (default 16,
   128 and 512) with `benchmarks.compare.time_arms` (interleaved blocks, pauses, the
   median of block means).  A step runs the smallest compiled capacity holding the cache
   (`--capacities`), so its cost grows only with attention over that bucket: the table
   gives the bucket and the K/V bytes its attention reads.

    python -m benchmarks.llm                                    # gpt2,llama small and base
    python -m benchmarks.llm --models gpt2 --sizes base --batch 1 --new 64 --repeats 7
    python -m benchmarks.llm --no-baselines --cached 16,128,512 --json llm.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ARMS = ("luminal", "torch", "onnxruntime")


def random_prompts(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """`batch` prompts of `length` token ids below `vocab`, seeded."""
    rng = np.random.default_rng(seed)
    lengths = [length] * batch  # equal: the torch arm runs them as one unpadded batch
    return [rng.integers(0, vocab, n).tolist() for n in lengths]


def decode_cost(
    session: Any, cached: list[int], duration: float, rounds: int, seed: int
) -> list[dict[str, Any]]:
    """One step timed at each cached length (module docstring, 2)."""
    from benchmarks.compare import time_arms
    from luminal.metering.bench.method import MethodSettings

    c, batch = session.config, session.plan.batch
    rng = np.random.default_rng(seed)
    tokens = np.zeros(batch, np.int64)
    arms: dict[str, Callable[[], Any]] = {}
    buckets: dict[str, int] = {}
    for n in cached:
        cache = session.new_cache()
        for a in cache.arrays:
            a[:n] = rng.standard_normal(a[:n].shape).astype(np.float32)
        cache.lengths[:] = n
        name = f"cached={n}"
        buckets[name] = session.step_outputs(cache, tokens).capacity
        arms[name] = lambda cache=cache: session.step_outputs(cache, tokens)
    settings = MethodSettings(
        duration_s=duration, min_runs=1, min_blocks=rounds, seed=seed, audit_samples=0
    )
    _, stats = time_arms(arms, settings, next(iter(arms)))
    rows = []
    for n in cached:
        name = f"cached={n}"
        bucket = buckets[name]
        kv_bytes = 2 * c.layers * bucket * batch * c.kv_heads * c.head_dim * 4
        s = stats[name]
        rows.append(
            {
                "cached": n,
                "bucket": bucket,
                "median_ms": s["median_ms"],
                "q1_ms": s["q1_ms"],
                "q3_ms": s["q3_ms"],
                "vs_first": s[f"vs_{next(iter(arms))}"],
                "kv_bytes": kv_bytes,
            }
        )
    return rows


def _summary(runs: list[Any]) -> dict[str, Any]:
    def stat(xs: list[float]) -> dict[str, float]:
        return {"median": float(np.median(xs)), "min": float(min(xs)), "max": float(max(xs))}

    return {
        "ttft_ms": stat([r.ttft_s * 1e3 for r in runs]),
        "decode_tokens_per_s": stat([r.decode_tokens_per_s for r in runs]),
        "e2e_ms": stat([r.e2e_s * 1e3 for r in runs]),
    }


def generation(
    arms: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Each arm once per round in a rotated order, after one warm-up each."""
    names = list(arms)
    last = {name: arms[name]() for name in names}  # warm-up
    runs: dict[str, list[Any]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            last[name] = arms[name]()
            runs[name].append(last[name])
    return {name: _summary(rs) for name, rs in runs.items()}, last


def _fmt(s: dict[str, float], digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def run_model(name: str, size: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import torch

    from benchmarks.llm_models import build
    from luminal.compiler.llm.decoder import compile_decoder, load_decoder
    from luminal.compiler.options import CompileOptions

    torch.set_num_threads(args.threads)
    model = build(name, size=size)
    vocab = model.config.vocab_size
    prompts = random_prompts(args.batch, args.prompt, vocab, args.seed)
    capacities = tuple(int(x) for x in args.capacities.split(","))
    budget = None if args.budget == "off" else float(args.budget)
    built = compile_decoder(
        model,
        tmp / f"{name}-{size}.lmnl",
        batch=args.batch,
        prompt_lengths=(max(len(p) for p in prompts),),
        capacities=capacities,
        options=CompileOptions(budget_seconds=budget),
    )
    session = load_decoder(built.path, meter=None)
    from benchmarks.llm_baselines import GenerationTiming, export_onnx, ort_generate

    def luminal() -> GenerationTiming:
        g = session.generate(prompts, args.new)
        return GenerationTiming("luminal", [list(t) for t in g.tokens], g.ttft_s, list(g.step_s))

    arms: dict[str, Callable[[], Any]] = {"luminal": luminal}
    if not args.no_baselines:
        from luminal.references.baselines.transformers_generate import GenerateRunner

        # torch eager as `luminal bench --scenario llm` runs it (equal-length prompts)
        runner = GenerateRunner(model, args.threads, args.new)
        ids = np.asarray(prompts, np.int64)

        def torch_eager() -> GenerationTiming:
            tokens, t = runner.timed(ids)
            return GenerationTiming("torch", tokens.tolist(), t.ttft_s, list(t.step_s))

        arms["torch"] = torch_eager
        onnx_path = export_onnx(model, tmp / f"{name}-{size}-onnx")
        arms["onnxruntime"] = lambda: ort_generate(onnx_path, prompts, args.new, args.threads)
    stats, last = generation(arms, args.repeats)
    tokens = {arm: [list(t) for t in run.tokens] for arm, run in last.items()}
    ref = tokens.get("torch")
    same = {arm: (ref is None or t == ref) for arm, t in tokens.items()}
    cost = decode_cost(
        session, [int(x) for x in args.cached.split(",")], args.duration, args.min_rounds, args.seed
    )
    return {
        "model": name,
        "size": size,
        "batch": args.batch,
        "prompt_lengths": [len(p) for p in prompts],
        "new_tokens": args.new,
        "compile_s": sum(built.seconds.values()),
        "arms": stats,
        "tokens_equal_torch": same,
        "decode_cost": cost,
    }


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| model | arm | TTFT ms | decode tok/s | end to end ms | decode vs torch | tokens = torch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        arms = r["arms"]
        torch_tps = arms.get("torch", {}).get("decode_tokens_per_s", {}).get("median")
        for arm, s in arms.items():
            tps = s["decode_tokens_per_s"]["median"]
            ratio = f"{tps / torch_tps:.2f}x" if torch_tps else ""
            lines.append(
                f"| {r['model']}-{r['size']} b{r['batch']} | {arm} | {_fmt(s['ttft_ms'])} | "
                f"{_fmt(s['decode_tokens_per_s'], 0)} | {_fmt(s['e2e_ms'], 1)} | {ratio} | "
                f"{'yes' if r['tokens_equal_torch'][arm] else 'NO'} |"
            )
    lines += [
        "",
        "| model | cached tokens | step bucket | step ms [IQR] | vs first | K/V read MiB |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for row in r["decode_cost"]:
            lines.append(
                f"| {r['model']}-{r['size']} b{r['batch']} | {row['cached']} | {row['bucket']} | "
                f"{row['median_ms']:.3f} [{row['q1_ms']:.3f}-{row['q3_ms']:.3f}] | {row['vs_first']:.2f}x | "
                f"{row['kv_bytes'] / 2**20:.2f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--sizes", default="small,base")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--capacities", default="128,256,1024")
    parser.add_argument("--cached", default="16,128,512")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per decode-cost table")
    parser.add_argument("--min-rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument(
        "--budget", default="off", help="search seconds for the whole artifact, or off"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from benchmarks.licensed import licensed

    results = []
    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-llm-") as tmp:
        for size in args.sizes.split(","):
            for name in args.models.split(","):
                print(f"measuring {name}-{size} ...", file=sys.stderr, flush=True)
                results.append(run_model(name, size, args, Path(tmp)))
    print(
        f"{platform.processor() or platform.machine()}, threads {args.threads}, batch {args.batch}, "
        f"prompt {args.prompt}, new {args.new}, repeats {args.repeats}"
    )
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
