"""Arbitrage on this machine: the planner's choice for each objective, the run it made,
and its tokens against one device alone.

For each objective (latency, cost) the planner measures prefill and a decode step on
every CPU set, and one KV-cache transfer, picks a (prefill, decode) pair, and generates;
the table gives what it measured, what it chose and why, the cache it moved, the run's
wall time and cost against the prediction, and whether the tokens equal a plain
single-process generation of the same artifact (greedy).

    python -m benchmarks.arbitrage                       # gpt2 base, cpu:0,1 and cpu:1
    python -m benchmarks.arbitrage --model llama --size small --cpus 0 --cpus 0-1
    python -m benchmarks.arbitrage --repeats 3 --json arbitrage.json

Compiled with the search off (`--budget off`) unless told otherwise, as
`benchmarks.llm` does: the planner compares devices running the same artifact.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from luminal.compiler.llm.placement import DEFAULT_SLACK


def _cpus_default() -> list[str]:
    cpus = sorted(os.sched_getaffinity(0))
    wide = ",".join(map(str, cpus))
    return [wide, str(cpus[-1])] if len(cpus) > 1 else [wide]


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from benchmarks.llm import random_prompts
    from benchmarks.llm_models import build
    from luminal.compiler.llm.decoder import compile_decoder, load_decoder
    from luminal.compiler.llm.placement import Device, Objective, arbitrage
    from luminal.compiler.llm.sampling import Sampling
    from luminal.compiler.options import CompileOptions
    from luminal.metering.bench.environment import parse_cpus

    model = build(args.model, size=args.size)
    prompts = random_prompts(args.batch, args.prompt, model.config.vocab_size, args.seed)
    budget = None if args.budget == "off" else float(args.budget)
    built = compile_decoder(
        model,
        tmp / "decoder.lmnl",
        batch=args.batch,
        prompt_lengths=(args.prompt,),
        capacities=(args.prompt + args.new,),
        options=CompileOptions(budget_seconds=budget),
    )
    greedy = Sampling()
    alone = load_decoder(built.path, meter=None)
    try:
        want = [list(t) for t in alone.generate(prompts, args.new, greedy).tokens]
    finally:
        alone.close()
    devices = [Device(parse_cpus(text) or ()) for text in args.cpus]
    runs = []
    for objective in (Objective.LATENCY, Objective.COST):
        for _ in range(args.repeats):
            got = arbitrage(
                built.path,
                devices,
                prompts,
                args.new,
                greedy,
                objective=objective,
                slack=args.slack,
            )
            doc = got.to_json()
            doc["tokens_equal_single_device"] = [list(t) for t in got.generation.tokens] == want
            doc["predicted_cost"] = got.placement.candidates[0].cost
            runs.append(doc)
            print(f"  {objective.value}: {got.placement.reason}", file=sys.stderr)
    return {
        "model": args.model,
        "size": args.size,
        "batch": args.batch,
        "prompt": args.prompt,
        "new_tokens": args.new,
        "slack": args.slack,
        "runs": runs,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| objective | devices: prefill ms / step ms (price) | transfer | chosen prefill / decode "
        "| moved KiB | predicted ms / cost | ran ms / cost | tokens = one device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        place = r["placement"]
        devs = "; ".join(
            f"{d['device']} {d['prefill_ms']:.2f} / {d['step_ms']:.3f} ({d['price']:g})"
            for d in r["devices"]
        )
        lines.append(
            f"| {place['objective']} | {devs} | {r['transfer']['bytes'] / 1024:.0f} KiB in "
            f"{r['transfer']['ms']:.2f} ms | {place['prefill']} / {place['decode']} | "
            f"{r['moved_bytes'] / 1024:.0f} | {place['predicted_ms']:.1f} / "
            f"{r['predicted_cost']:.4f} | {r['ran_ms']:.1f} / {r['cost']:.4f} | "
            f"{'yes' if r['tokens_equal_single_device'] else 'NO'} |"
        )
    lines.append("")
    for r in result["runs"]:
        lines.append(f"- {r['placement']['objective']}: {r['placement']['reason']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="gpt2", choices=("gpt2", "llama"))
    parser.add_argument("--size", default="base", choices=("small", "base"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=120)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument(
        "--cpus", action="append", help="a device's CPU set (repeat); default: all, and the last"
    )
    parser.add_argument("--slack", type=float, default=DEFAULT_SLACK)
    parser.add_argument("--repeats", type=int, default=2, help="runs per objective")
    parser.add_argument("--budget", default="off")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.cpus = args.cpus or _cpus_default()
    from benchmarks.licensed import licensed

    with licensed(), tempfile.TemporaryDirectory(prefix="luminal-arbitrage-") as tmp:
        result = run(args, Path(tmp))
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
