"""`luminal generate ARTIFACT`: token generation with a decoder artifact, and the
decoder branch of `luminal compile DIR` (a Hugging Face model directory)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.compiler.llm.placement import DEFAULT_SLACK, Objective
from luminal.compiler.options import CompileOptions
from luminal.errors import UsageError

if TYPE_CHECKING:  # the decoder modules import torch: loaded when a command needs them
    from luminal.compiler.llm.decoder import DecoderBuild, Generation
    from luminal.compiler.llm.sampling import Sampling

__all__ = ["Arbitration", "compile_decoder_dir", "generate_cmd", "parse_sizes"]


@dataclass(frozen=True)
class Arbitration:
    """What `--cpus`, `--split`, `--objective` and `--slack` asked of the planner."""

    cpus: tuple[str, ...]
    split: str | None
    objective: Objective
    slack: float


def parse_sizes(text: str, option: str) -> tuple[int, ...]:
    """'32,128' -> (32, 128): ascending positive sizes, or a UsageError naming `option`."""
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{option} '{text}': expected sizes such as 32,128") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"{option} '{text}': expected positive sizes such as 32,128")
    return tuple(sorted(set(sizes)))


def parse_prompt(text: str, n: int) -> list[int]:
    try:
        ids = [int(x) for x in text.replace(" ", ",").split(",") if x]
    except ValueError:
        raise UsageError(
            f"--prompt-ids #{n + 1} '{text}': expected token ids such as 1,2,3"
        ) from None
    if not ids:
        raise UsageError(f"--prompt-ids #{n + 1} is empty")
    return ids


def compile_decoder_dir(
    model: Path,
    out: Path,
    options: CompileOptions,
    batch: int,
    prompt_lengths: str,
    capacities: str,
    console: Console,
) -> DecoderBuild:
    """Compile the decoder in `model` (a Hugging Face directory) into `out`."""
    lengths = parse_sizes(prompt_lengths, "--prompt-lengths")
    caps = parse_sizes(capacities, "--capacities")
    from luminal.compiler.llm.decoder import compile_decoder
    from luminal.compiler.llm.hf import load_pretrained

    console.print(f"loading {model}", highlight=False)
    hf = load_pretrained(model)

    def member(name: str, n: int, total: int) -> None:
        console.print(f"  graph {n + 1}/{total}: {name}", highlight=False)

    return compile_decoder(
        hf,
        out,
        batch=batch,
        prompt_lengths=lengths,
        capacities=caps,
        options=options,
        on_member=member,
    )


def print_decoder_build(console: Console, build: DecoderBuild) -> None:
    plan = build.plan
    c = plan.config
    console.print(
        f"[green]compiled[/] {build.path}: {c.arch.value} decoder, {c.layers} layers, "
        f"batch {plan.batch}, prompts up to {plan.prompt_lengths[-1]} tokens "
        f"(buckets {', '.join(map(str, plan.prompt_lengths))}), KV cache of {plan.capacity} "
        f"positions (step buckets {', '.join(map(str, plan.capacities))}), "
        f"{sum(build.seconds.values()):.1f} s",
        highlight=False,
    )


def decoder_build_json(build: DecoderBuild) -> dict[str, object]:
    return {
        "path": str(build.path),
        "decoder": build.plan.to_json(),
        "graphs": {
            name: {"seconds": build.seconds[name], "kernels": build.kernels[name]}
            for name in build.seconds
        },
    }


def generate_cmd(
    artifact: Annotated[
        Path, typer.Argument(help="A decoder artifact from `luminal compile DIR`.")
    ],
    prompt_ids: Annotated[
        list[str],
        typer.Option(
            "--prompt-ids", help="One prompt's token ids, e.g. 1,2,3 (repeat for a batch)."
        ),
    ],
    max_new_tokens: Annotated[int, typer.Option(help="Tokens to generate per prompt.", min=1)] = 32,
    temperature: Annotated[
        float, typer.Option(help="0 is greedy; else sample at this temperature.", min=0.0)
    ] = 0.0,
    top_k: Annotated[
        int, typer.Option(help="Sample among the k likeliest tokens (0: all).", min=0)
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the sampler.")] = 0,
    eos: Annotated[
        int | None, typer.Option(help="Token id that ends a sequence (default: the model's).")
    ] = None,
    ignore_eos: Annotated[
        bool, typer.Option("--ignore-eos", help="Never end a sequence early.")
    ] = False,
    cpus: Annotated[
        list[str] | None,
        typer.Option(
            "--cpus",
            help="A device for arbitrage: a CPU set such as 0 or 0-3 (repeat: each phase "
            "runs where it measured cheapest).",
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            help="With --cpus: run prefill and decode on these devices, e.g. cpu:0/cpu:1."
        ),
    ] = None,
    objective: Annotated[
        Objective,
        typer.Option(
            help="With --cpus: latency (least end to end) or cost (least device time x "
            "price, a CPU set's price being its cores, each phase within --slack of its "
            "fastest device).",
            case_sensitive=False,
        ),
    ] = Objective.LATENCY,
    slack: Annotated[
        float,
        typer.Option(
            help="With --objective cost: how much slower than on its fastest device a "
            "phase may run (1.2: 20%).",
            min=1.0,
        ),
    ] = DEFAULT_SLACK,
    as_json: JsonOption = False,
) -> None:
    """Generate tokens with a decoder artifact: one prefill, then one step per token over
    the KV cache the session holds.

    Examples:

      luminal compile ./gpt2-dir -o gpt2.lmnl --batch 2 --capacities 128,512

      luminal generate gpt2.lmnl --prompt-ids 464,3290,318 --max-new-tokens 64

      luminal generate gpt2.lmnl --prompt-ids 1,2,3 --prompt-ids 7,8 --temperature 0.8 --top-k 40 --seed 1 --json

      luminal generate gpt2.lmnl --prompt-ids 1,2,3 --cpus 0 --cpus 0-1

      luminal generate gpt2.lmnl --prompt-ids 1,2,3 --cpus 0-1 --cpus 1 --objective cost

    With --cpus, each CPU set is a device (a pinned worker process): prefill and one
    decode step are measured on each, the best split for --objective is printed with its
    reason (moving the KV cache included), and generation runs that way.
    """
    from luminal.compiler.llm.decoder import load_decoder
    from luminal.compiler.llm.sampling import Sampling

    prompts = [parse_prompt(text, n) for n, text in enumerate(prompt_ids)]
    sampling = Sampling(temperature, top_k, seed)
    if cpus:
        _arbitrage(
            artifact,
            prompts,
            max_new_tokens,
            sampling,
            eos,
            ignore_eos,
            Arbitration(tuple(cpus), split, objective, slack),
            as_json,
        )
        return
    session = load_decoder(artifact)
    try:
        stop = None if ignore_eos else (eos if eos is not None else session.config.eos_token_id)
        result = session.generate(prompts, max_new_tokens, sampling, stop)
    finally:
        session.close()
    if as_json:
        typer.echo(
            json.dumps({"prompt_lengths": [len(p) for p in prompts], **result.to_json()}, indent=2)
        )
        return
    print_generation(Console(), prompts, result)


def print_generation(out: Console, prompts: list[list[int]], result: Generation) -> None:
    for n, (prompt, tokens) in enumerate(zip(prompts, result.tokens, strict=True)):
        out.print(
            f"prompt {n} ({len(prompt)} tokens): {' '.join(map(str, tokens))}", highlight=False
        )
    out.print(
        f"time to first token {result.ttft_s * 1e3:.2f} ms, decode "
        f"{result.decode_tokens_per_s():.0f} tokens/s ({len(prompts)} sequences), "
        f"end to end {result.e2e_s * 1e3:.2f} ms",
        highlight=False,
    )


def _arbitrage(
    artifact: Path,
    prompts: list[list[int]],
    max_new_tokens: int,
    sampling: Sampling,
    eos: int | None,
    ignore_eos: bool,
    ask: Arbitration,
    as_json: bool,
) -> None:
    from luminal.compiler.llm.decoder import read_plan
    from luminal.compiler.llm.placement import Device, arbitrage
    from luminal.metering.bench.environment import parse_cpus

    devices = [Device(parse_cpus(text) or ()) for text in ask.cpus]
    force = None
    if ask.split:
        p, sep, d = ask.split.partition("/")
        if not sep:
            raise UsageError(f"--split '{ask.split}': expected PREFILL/DECODE, e.g. cpu:0/cpu:1")
        force = (p, d)
    stop = (
        None
        if ignore_eos
        else (eos if eos is not None else read_plan(artifact).config.eos_token_id)
    )
    result = arbitrage(
        artifact,
        devices,
        prompts,
        max_new_tokens,
        sampling,
        stop,
        force=force,
        objective=ask.objective,
        slack=ask.slack,
    )
    if as_json:
        typer.echo(
            json.dumps({"prompt_lengths": [len(p) for p in prompts], **result.to_json()}, indent=2)
        )
        return
    out = Console()
    table = Table(title="devices (measured)")
    for col in ("device", "price", "prefill ms", "decode step ms"):
        table.add_column(col)
    for t in result.timings:
        table.add_row(
            t.device,
            f"{result.prices[t.device]:g}",
            f"{t.prefill_s * 1e3:.3f}",
            f"{t.step_s * 1e3:.4f}",
        )
    out.print(table)
    out.print(
        f"KV cache transfer: {result.transfer.bytes / 1024:.1f} KiB in {result.transfer.seconds * 1e3:.3f} ms",
        highlight=False,
    )
    place = result.placement
    out.print(
        f"placement ({place.objective.value}): prefill on {place.prefill}, decode on "
        f"{place.decode}: {place.reason}",
        highlight=False,
    )
    if result.moved_bytes:
        out.print(f"moved the KV cache: {result.moved_bytes / 1024:.1f} KiB", highlight=False)
    out.print(
        f"ran in {result.ran_s * 1e3:.2f} ms (predicted {place.predicted_s * 1e3:.2f}), "
        f"cost {result.cost:.4g} device-seconds x price",
        highlight=False,
    )
    print_generation(out, prompts, result.generation)
