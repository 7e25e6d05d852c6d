"""`luminal profile MODEL_OR_ARTIFACT`: where a compiled model spends its time, per kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import DimOption, JsonOption, parse_budget, parse_dims
from luminal.compiler.options import CompileOptions
from luminal.compiler.pipeline import DEFAULT_BUDGET_SECONDS
from luminal.compiler.profile import Profile, profile_artifact, profile_model

COLUMNS = ("kernel", "kind", "onnx nodes", "variant", "ms", "share", "GFLOP/s", "MB", "% roof")


def profile_cmd(
    model: Annotated[Path, typer.Argument(help="An .onnx / .pt2 model, or a .lmnl artifact.")],
    seconds: Annotated[
        float, typer.Option(help="Seconds of timed runs (half with timers, half without).")
    ] = 2.0,
    top: Annotated[int, typer.Option(help="Kernels shown, slowest first (0: all).", min=0)] = 20,
    threads: Annotated[
        int | None, typer.Option(help="Threads the model runs on (default: every CPU).", min=1)
    ] = None,
    budget: Annotated[
        str, typer.Option(help="Search time when MODEL is a model file, as `luminal compile`.")
    ] = f"{DEFAULT_BUDGET_SECONDS:g}s",
    dim: DimOption = None,
    as_json: JsonOption = False,
) -> None:
    """Time every kernel of a compiled model: its share, GFLOP/s and % of the roofline,
    named by the ONNX nodes it computes, plus the time spent outside kernels.

    A model file is compiled first (the license gate applies, as for `compile`); an
    artifact's schedule is rebuilt from its source model with its recorded variants.

    Examples:

      luminal profile model.onnx --budget 0

      luminal profile model.lmnl --top 10 --threads 1 --json
    """
    dims = parse_dims(dim)
    if model.suffix.lower() == ".lmnl":
        result = profile_artifact(model, dims, seconds, threads)
    else:
        from luminal.compiler.frontend import load_model

        options = CompileOptions(target="auto", budget_seconds=parse_budget(budget))
        if not as_json:
            Console(stderr=True).print(f"compiling {model} ...", highlight=False)
        result = profile_model(load_model(model, dims), options, seconds, threads)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    elif sys.stdout.isatty():
        print_table(Console(), result, top)
    else:
        typer.echo(plain_lines(result, top))


def _rows(p: Profile, top: int) -> list[list[str]]:
    ranked = sorted(p.kernels, key=lambda k: -k.seconds)
    return [
        [
            k.name,
            k.kind,
            ", ".join(k.nodes) or "-",
            k.variant,
            f"{k.seconds * 1e3:.4f}",
            f"{k.share:.1%}",
            f"{k.gflops:.1f}",
            f"{k.bytes / 1e6:.2f}",
            f"{k.percent_of_roof:.0f}%",
        ]
        for k in (ranked[:top] if top else ranked)
    ]


def _summary(p: Profile) -> list[str]:
    m = p.machine
    kinds = ", ".join(f"{kind} {s * 1e3:.3f} ms" for kind, s in p.by_kind().items())
    return [
        f"{p.model}: {p.end_to_end_seconds * 1e3:.3f} ms per run end to end, "
        f"{p.kernel_seconds * 1e3:.3f} ms in {len(p.kernels)} kernels, "
        f"{p.unaccounted_seconds * 1e3:.3f} ms outside kernels (unaccounted)",
        f"by kind: {kinds or '-'}",
        f"roofline: {m.peak_gflops:.1f} GFLOP/s per core x {p.threads or m.cores} threads, "
        f"{m.bandwidth_gbs:.1f} GB/s; {p.runs} timed runs on {p.target}",
    ]


def plain_lines(p: Profile, top: int) -> str:
    """Tab-separated, one kernel a line, for pipes and scripts."""
    lines = ["\t".join(COLUMNS)]
    lines += ["\t".join(row) for row in _rows(p, top)]
    return "\n".join([*lines, *_summary(p)])


def print_table(console: Console, p: Profile, top: int) -> None:
    table = Table(title="Kernels, slowest first", title_justify="left")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in COLUMNS[:4] else "right")
    for row in _rows(p, top):
        table.add_row(*row)
    console.print(table)
    for line in _summary(p):
        console.print(line, highlight=False)
