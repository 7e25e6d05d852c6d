"""`luminal compile MODEL`: compile a model for this machine into one `.lmnl` artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal import licensing
from luminal.cli.options import DimOption, JsonOption, parse_dims
from luminal.compiler.frontend import load_model
from luminal.compiler.pipeline import STEPS, TARGETS, CompileOptions, CompileResult, compile_model


def compile_cmd(
    model: Annotated[Path, typer.Argument(help="An .onnx file or a .pt2 ExportedProgram.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Artifact path (default: MODEL with .lmnl)."),
    ] = None,
    target: Annotated[
        str, typer.Option(help=f"Device to compile for: {', '.join(TARGETS)}.")
    ] = "cpu",
    tile_m: Annotated[
        int | None,
        typer.Option(
            help="Contraction tile rows (default: by the CPU's vector width).", min=1, max=16
        ),
    ] = None,
    tile_n: Annotated[
        int | None,
        typer.Option(help="Contraction tile columns (default: by vector width).", min=1, max=64),
    ] = None,
    dim: DimOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compile a model into one artifact file that `luminal run` and `luminal.load` run.

    Needs a license entitling `compile` on the target (exit 3 if not); running the
    artifact never does.

    Examples:

      luminal compile model.onnx -o model.lmnl

      luminal compile model.pt2 --json
    """
    out = output or model.with_suffix(".lmnl")
    console = Console(stderr=True, quiet=as_json)
    for warning in licensing.check("compile", target).warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    with console.status("loading model") as status:
        loaded = load_model(model, parse_dims(dim))
        options = CompileOptions(target=target, tile_m=tile_m, tile_n=tile_n)
        done: list[str] = []

        def step(name: str) -> None:
            if done:
                console.print(f"  [green]✓[/] {done[-1]}")
            done.append(name)
            status.update(f"{name} ({len(done)}/{len(STEPS)})")

        result = compile_model(loaded, out, options, on_step=step)
        console.print(f"  [green]✓[/] {done[-1]}")
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_result(Console(), result)


def print_result(console: Console, r: CompileResult) -> None:
    table = Table(title=f"Compiled {r.path}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.kernel_kinds.items()))
    table.add_row("kernels", f"{r.kernels} ({kinds})")
    saved = 1 - r.arena_bytes / r.intermediate_bytes if r.intermediate_bytes else 0.0
    table.add_row(
        "arena",
        f"{r.arena_bytes / 2**20:.2f} MiB (intermediates total {r.intermediate_bytes / 2**20:.2f} MiB, {saved:.0%} saved)",
    )
    table.add_row("weights", f"{r.weights_bytes / 2**20:.2f} MiB")
    table.add_row("artifact", f"{r.artifact_bytes / 2**20:.2f} MiB")
    table.add_row("toolchain", f"{r.toolchain}; CPU features {' '.join(r.cpu_features) or '-'}")
    steps = ", ".join(f"{k} {v:.2f}s" for k, v in r.seconds.items())
    table.add_row("compile time", f"{r.total_seconds:.2f}s ({steps})")
    console.print(table)
