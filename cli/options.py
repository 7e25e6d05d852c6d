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
TrustUnsignedOption = Annotated[
    bool,
    typer.Option(
        "--trust-unsigned",
        help="Also load an artifact that is unsigned or signed by a key this install does "
        "not trust (see `luminal artifact-key`); hashes and interface are still checked.",
    ),
]


def parse_dims(pairs: list[str] | None) -> dict[str, int]:
    dims = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.isdigit() or int(value) <= 0:
            raise UsageError(f"--dim '{pair}': expected NAME=N with N a positive integer")
        dims[name] = int(value)
    return dims


def parse_budget(text: str) -> float | None:
    """`--budget`: '120s', '2m', '1h', '90' (seconds), '0' (tuning database only) or
    'off' (no search)."""
    value = text.strip().lower()
    if value in ("off", "none", "no"):
        return None
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}
    unit = value[-1:] if value[-1:] in scale else "s"
    number = value[:-1] if value[-1:] in scale else value
    try:
        seconds = float(number) * scale[unit]
    except ValueError:
        raise UsageError(
            f"--budget '{text}': expected a duration such as 120s, 2m or 0, or 'off'"
        ) from None
    if not seconds >= 0 or seconds > 24 * 3600:
        raise UsageError(f"--budget '{text}': must be between 0 and 24h")
    return seconds
