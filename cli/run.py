"""`luminal run MODEL_OR_ARTIFACT`: run on given or seeded inputs, optionally against an oracle."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.engine import Engine
from luminal.cli.options import DimOption, JsonOption, TrustUnsignedOption, parse_dims
from luminal.compiler.inputs import random_inputs, read_inputs
from luminal.errors import InvalidResult, UsageError
from luminal.references.oracle import ORACLES, run_oracle
from luminal.references.parity import (
    Parity,
    Tolerance,
    compare,
    precision_tolerance,
    tolerance_for,
)
from luminal.references.quant_steps import steps_of_file
from luminal.references.spread import reference_spread

#: `--rtol/--atol` hold every float output to f32's default unless given (as before), or
#: an artifact built at a reduced precision to that precision's bound.
_DEFAULT = tolerance_for("f32")


def run_cmd(
    model: Annotated[
        Path,
        typer.Argument(help="A compiled .lmnl artifact, an .onnx file or a .pt2 ExportedProgram."),
    ],
    input: Annotated[
        list[str] | None,
        typer.Option(
            "--input", "-i", help="NAME=FILE.npy, or one FILE.npz with every input (repeatable)."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed for made-up inputs when --input is not given.")
    ] = 0,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference",
            help="Run a model file on the numpy reference interpreter instead of compiling it.",
        ),
    ] = False,
    compare_with: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help=f"Also run an oracle on the same inputs and check parity: {', '.join(ORACLES)}.",
        ),
    ] = None,
    rtol: Annotated[
        float | None,
        typer.Option(
            help=f"Relative tolerance for --compare (default {_DEFAULT.rtol:g}; an fp16/bf16 "
            "artifact's: its precision's bound)."
        ),
    ] = None,
    atol: Annotated[
        float | None,
        typer.Option(
            help=f"Absolute tolerance for --compare (default {_DEFAULT.atol:g}, or the "
            "precision's bound)."
        ),
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", "-o", help="Save each output as NAME.npy here.")
    ] = None,
    dim: DimOption = None,
    trust_unsigned: TrustUnsignedOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run a compiled artifact or a model and print its outputs; --compare checks them.

    A model file (.onnx, .pt2) is compiled for this CPU in a temporary folder and run, or
    with --reference run on the numpy reference interpreter.  For an artifact (.lmnl),
    --compare runs the oracle on the model file the artifact was compiled from.
    Exit code 5 when --compare finds outputs outside tolerance; exit 4 when the artifact
    fails a check (signature, hashes, interface), e.g. when it was built by an install
    whose key this one does not trust (`luminal artifact-key trust`).

    Examples:

      luminal run model.lmnl --input x=x.npy --compare onnxruntime

      luminal run model.onnx --reference --input inputs.npz -o outputs/
    """
    engine = Engine.open(model, parse_dims(dim), reference, trust_unsigned)
    feeds = read_inputs(input, engine.inputs) if input else random_inputs(engine.inputs, seed)
    outputs = engine.run(feeds)
    parity = None
    default = precision_tolerance(engine.precision) or _DEFAULT
    given = rtol is not None or atol is not None
    rtol = default.rtol if rtol is None else rtol
    atol = default.atol if atol is None else atol
    if compare_with:
        want = run_oracle(compare_with, engine.source, feeds)
        parity = compare(
            outputs,
            want,
            Tolerance(rtol, atol) if given else default,
            steps=steps_of_file(engine.source),
            spreads=reference_spread(engine.source, feeds),
        )
    if output_dir is not None:
        save_outputs(outputs, output_dir)
    if as_json:
        typer.echo(
            json.dumps(
                _json(engine.name, outputs, parity, compare_with, input is None, seed), indent=2
            )
        )
    else:
        _print(Console(), engine.name, outputs, parity, compare_with)
    if parity is not None and not parity.ok:
        bad = [o.name for o in parity.outputs if not o.ok]
        raise InvalidResult(
            f"outputs {bad} disagree with {compare_with} beyond rtol {rtol:g}, atol {atol:g}"
        )


def save_outputs(outputs: dict[str, np.ndarray], directory: Path) -> None:
    """Write NAME.npy per output; each file appears whole or not at all."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{directory}: cannot create output folder ({err.strerror})") from None
    for name, array in outputs.items():
        target = directory / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.npy"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, array, allow_pickle=False)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def parity_line(parity: Parity, oracle: str) -> str:
    verdict = "OK" if parity.ok else "MISMATCH"
    step = max((o.tolerance.step for o in parity.outputs), default=0.0)
    spread = max((o.tolerance.spread for o in parity.outputs), default=0.0)
    quant = (f", + 1 quantization step {step:.3g}" if step else "") + (
        f", + {oracle}'s own spread {spread:.3g}" if spread else ""
    )
    return (
        f"parity vs {oracle}: {verdict} (max abs err {parity.max_abs:.3g}, max rel err {parity.max_rel:.3g}; "
        f"rtol {parity.rtol:g}, atol {parity.atol:g}{quant})"
    )


def _print(
    console: Console,
    engine: str,
    outputs: dict[str, np.ndarray],
    parity: Parity | None,
    oracle: str | None,
) -> None:
    table = Table(title=f"Outputs ({engine})", title_justify="left")
    for col in ("name", "shape", "dtype", "min", "max", "mean", "first values"):
        table.add_column(col)
    for name, a in outputs.items():
        flat = a.reshape(-1)
        numeric = flat.astype(np.float64) if flat.size else np.zeros(1)
        head = " ".join(f"{v:.4g}" for v in numeric[:4])
        table.add_row(
            name,
            "x".join(map(str, a.shape)) or "scalar",
            str(a.dtype),
            f"{numeric.min():.4g}",
            f"{numeric.max():.4g}",
            f"{numeric.mean():.4g}",
            head,
        )
    console.print(table)
    if parity is not None and oracle is not None:
        console.print(
            parity_line(parity, oracle), style="green" if parity.ok else "bold red", highlight=False
        )


def _json(
    engine: str,
    outputs: dict[str, np.ndarray],
    parity: Parity | None,
    oracle: str | None,
    seeded: bool,
    seed: int,
) -> dict[str, object]:
    return {
        "engine": engine,
        "inputs": {"seeded": seeded, "seed": seed if seeded else None},
        "outputs": {
            name: {
                "shape": list(a.shape),
                "dtype": str(a.dtype),
                "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(),
            }
            for name, a in outputs.items()
        },
        "parity": None if parity is None else {"oracle": oracle, **parity.to_json()},
    }
