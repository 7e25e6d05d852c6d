"""`luminal inspect MODEL`: inputs, outputs, op histogram and coverage, parameters, FLOPs,
IR size.  A model with unsupported ops is still described (exit 0; `--strict` exits 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import DimOption, JsonOption, parse_dims
from luminal.compiler.frontend import analyze_model
from luminal.compiler.frontend.coverage import Coverage, OpStatus
from luminal.compiler.summary import ModelSummary, summarize
from luminal.errors import LuminalError, UnsupportedOp

StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="Exit 6 (after printing) when any op is unsupported, for CI gates."
    ),
]

_STYLE = {
    OpStatus.SUPPORTED: "green",
    OpStatus.UNSUPPORTED: "red",
    OpStatus.INVALID: "red",
    OpStatus.NOT_REACHED: "yellow",
}


def inspect_cmd(
    model: Annotated[Path, typer.Argument(help="An .onnx file or a .pt2 ExportedProgram.")],
    dim: DimOption = None,
    as_json: JsonOption = False,
    strict: StrictOption = False,
) -> None:
    """Describe a model: its inputs and outputs, ops and their coverage (supported or why
    not), parameters, FLOPs and IR size.

    Examples:

      luminal inspect model.onnx

      luminal inspect model.onnx --dim batch=8 --json

      luminal inspect model.onnx --strict      # exit 6 if any op is unsupported
    """
    dims = parse_dims(dim)
    unbound = _unbound_dims(model, dims)
    if unbound:  # a dynamic model is described at size 1, as it says
        Console(stderr=True).print(
            f"note: symbolic dims {', '.join(unbound)} taken as 1 for this summary "
            "(--dim NAME=N to choose)",
            highlight=False,
        )
        dims.update({name: 1 for name in unbound})
    summary = summarize(analyze_model(model, dims))
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
    else:
        print_summary(Console(), summary)
    if strict and not summary.coverage.complete:
        raise UnsupportedOp(summary.coverage.message())


def _unbound_dims(model: Path, dims: dict[str, int]) -> list[str]:
    """The ONNX model's named symbolic input dims that `dims` leaves unbound."""
    if model.suffix.lower() != ".onnx" or not model.is_file():
        return []
    from luminal.compiler.frontend.dims import dim_names, symbolic_axes

    try:
        named = dim_names(symbolic_axes(model))
    except LuminalError:
        return []  # not readable: the loader says so, in its words
    return sorted(named - set(dims))


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
    print_coverage(console, s.coverage)
    facts = Table(show_header=False, title="Size", title_justify="left")
    facts.add_column("what")
    facts.add_column("value", justify="right")
    facts.add_row("parameters", f"{s.parameters:,}")
    if s.ir is None:
        facts.add_row("IR", "not built (unsupported ops)")
    else:
        facts.add_row("FLOPs per run", f"{s.ir.flops:,} ({s.ir.flops / 1e9:.3f} GFLOP)")
        facts.add_row("IR nodes", f"{s.ir.nodes:,}")
        facts.add_row("IR constants", f"{s.ir.constant_bytes / 2**20:.2f} MiB")
        facts.add_row(
            "IR ops (top)", ", ".join(f"{op} {n}" for op, n in list(s.ir.ops.items())[:8])
        )
    console.print(facts)


def print_coverage(console: Console, coverage: Coverage) -> None:
    ops = Table(title="Source ops", title_justify="left")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    ops.add_column("status", no_wrap=True)
    ops.add_column("reason", overflow="fold")
    for o in coverage.ops:
        style = _STYLE[o.status]
        ops.add_row(o.kind.label(), str(o.count), f"[{style}]{o.status.value}[/]", o.reason())
    console.print(ops)
    for problem in coverage.problems:
        console.print(f"[red]unsupported:[/] {problem.detail}", highlight=False)
    style = "green" if coverage.complete else "red"
    console.print(f"[{style}]{coverage.summary()}[/]", highlight=False)
