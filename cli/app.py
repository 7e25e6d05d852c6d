"""The `luminal` command.  Commands are thin: parse, call the library, print.

Errors a user can act on (`luminal.errors.LuminalError`) become one line on stderr and
the documented exit code (docs/cli.md); `-v` adds the traceback.
"""

from __future__ import annotations

import sys
import traceback
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from luminal._version import __version__
from luminal.cli import bench, devices, inspect, profile, run
from luminal.cli import compile as compile_command
from luminal.cli.artifact_key import artifact_key_app
from luminal.cli.license import license_app
from luminal.cli.meter import meter_app
from luminal.cli.report import report_app
from luminal.cli.tune_db import tune_db_app
from luminal.errors import LuminalError


class _Group(TyperGroup):
    """Turns LuminalError raised by any command into one line and its exit code."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LuminalError as err:
            if ctx.obj and ctx.obj.get("verbose"):
                traceback.print_exc()
            typer.echo(f"error: {err}", err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            ctx.exit(130)


app = typer.Typer(
    cls=_Group,
    name="luminal",
    help="Compile ONNX and PyTorch models for this machine, and prove the speed-up.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"luminal {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show tracebacks and details.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    ctx.obj = {"verbose": verbose}


app.command("compile")(compile_command.compile_cmd)
app.command("inspect")(inspect.inspect_cmd)
app.command("run")(run.run_cmd)
app.command("devices")(devices.devices_cmd)
app.command("bench")(bench.bench_cmd)
app.command("profile")(profile.profile_cmd)
app.add_typer(license_app, name="license", help="Licenses: status, activation, entitlement checks.")
app.add_typer(report_app, name="report", help="Signed benchmark reports: show, verify.")
app.add_typer(
    meter_app, name="meter", help="The usage ledger: fee statement, verify, export, sync."
)
app.add_typer(
    artifact_key_app,
    name="artifact-key",
    help="Keys whose signed artifacts this install runs: export, trust, list, untrust.",
)
app.add_typer(
    tune_db_app, name="tune-db", help="The search's tuning database: show, export, import, clear."
)


def main() -> None:
    """Console-script entry point."""
    sys.exit(app(prog_name="luminal"))
