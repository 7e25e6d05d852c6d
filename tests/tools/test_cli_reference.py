"""docs/cli-reference.md is generated from the typer app and must not go stale: every
command (and every option of it) has its entry."""

from __future__ import annotations

import typer

from luminal.cli.app import app
from tools import cli_reference


def test_the_reference_is_up_to_date() -> None:
    assert cli_reference.main(["--check"]) == 0, "run: python -m tools.cli_reference"


def test_every_command_and_option_has_an_entry() -> None:
    text = cli_reference.OUT.read_text()
    sections = {s.split("\n", 1)[0]: s for s in text.split("\n### ")[1:]}
    found = list(cli_reference.commands(typer.main.get_command(app)))
    assert {"doctor", "bundle", "compile", "bench"} <= {p[0] for p, _ in found}
    for path, cmd in found:
        section = sections[f"luminal {' '.join(path)}"]
        for param in cmd.params:
            if param.param_type_name == "option" and param.name != "help":
                assert f"`{param.opts[0]}" in section, (path, param.opts)
