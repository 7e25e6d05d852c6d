"""Options shared by several commands, and their parsing."""

from __future__ import annotations

from typing import Annotated

import typer

from luminal.errors import UsageError

DimOption = Annotated[
    list[str] | None,
    typer.Option("--dim", help="Bind a symbolic input dim, e.g. --dim batch=8 (repeatable)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]


def parse_dims(pairs: list[str] | None) -> dict[str, int]:
    dims = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.isdigit() or int(value) <= 0:
            raise UsageError(f"--dim '{pair}': expected NAME=N with N a positive integer")
        dims[name] = int(value)
    return dims
