"""`luminal inspect MODEL`: inputs, outputs, op histogram, parameters, FLOPs, IR size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import DimOption, JsonOption, parse_dims
from luminal.compiler.frontend import load_model
from luminal.compiler.summary import ModelSummary, summarize


def inspect_cmd(
    model: Annotated[Path, typer.Argument(help="An .onnx file or a .pt2 ExportedProgram.")],
    dim: DimOption = None,
    as_json: JsonOption = False,
) -> None:
    """Describe a model: its inputs and outputs, ops, parameters, FLOPs and IR size.

    Examples:

      luminal inspect model.onnx

      luminal inspect model.onnx --dim batch=8 --json
    """
    summary = summarize(load_model(model, parse_dims(dim)))
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
        return
    print_summary(Console(), summary)


def print_summary(console: Console, s: ModelSummary) -> None:
    console.print(
        f"[bold]{s.source}[/]  ({s.format}{f', opset {s.opset}' if s.opset else ''}"
        f"{f', {s.producer}' if s.producer else ''})",
        highlight=False,
    )
    io = Table(title="Inputs and outputs", title_justify="left")
    for col in ("", "name", "shape", "dtype"):
        io.add_column(col)
    for kind, specs in (("input", s.inputs), ("output", s.outputs)):
        for spec in specs:
            io.add_row(
                kind, spec.name, "x".join(map(str, spec.shape)) or "scalar", spec.dtype.value
            )
    console.print(io)
    ops = Table(title="Source ops", title_justify="left")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for op, count in s.source_ops.items():
        ops.add_row(op, str(count))
    console.print(ops)
    facts = Table(show_header=False, title="Size", title_justify="left")
    facts.add_column("what")
    facts.add_column("value", justify="right")
    facts.add_row("parameters", f"{s.parameters:,}")
    facts.add_row("FLOPs per run", f"{s.flops:,} ({s.flops / 1e9:.3f} GFLOP)")
    facts.add_row("IR nodes", f"{s.ir_nodes:,}")
    facts.add_row("IR constants", f"{s.constant_bytes / 2**20:.2f} MiB")
    top = ", ".join(f"{op} {n}" for op, n in list(s.ir_ops.items())[:8])
    facts.add_row("IR ops (top)", top)
    console.print(facts)
