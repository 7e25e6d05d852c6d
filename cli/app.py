"""The `luminal` command.  Commands are thin: parse, call the library, print.

Errors a user can act on (`luminal.errors.LuminalError`) become one line on stderr and
the documented exit code (docs/cli.md); `-v` adds the traceback.
"""

from __future__ import annotations

import sys
import traceback
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from luminal._version import __version__
from luminal.cli import bench, bundle, devices, doctor, generate, inspect, profile, run
from luminal.cli import compile as compile_command
from luminal.cli.artifact_key import artifact_key_app
from luminal.cli.license import license_app
from luminal.cli.meter import meter_app
from luminal.cli.report import report_app
from luminal.cli.tune_db import tune_db_app
from luminal.errors import EXIT_CODES, LuminalError

#: The end of every command's help: the exit codes (errors.py; docs/cli.md explains them).
EXIT_CODES_HELP = "Exit codes: " + ", ".join(
    f"{code} {meaning.split(':')[0].split(' (')[0]}" for code, meaning in EXIT_CODES
)


class _Argument(TyperArgument):
    """An argument shown as click shows it, MODEL or [MODEL], not typer's {model}."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.display_name_raw + ("..." if self.nargs != 1 else "")
        return [name if self.required else f"[{name}]"]


def tidy_help(command: Any) -> None:
    """Help without typer's type noise: no `<bool>` beside a flag, arguments in capitals,
    and the exit codes at the end of every command's help (the whole tree, once)."""
    for param in command.params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
        elif isinstance(param, TyperArgument):
            param.metavar = param.metavar or (param.name or "ARG").upper()
            param.__class__ = _Argument
    help_option = command.get_help_option  # made per call, so wrapped per command

    def quiet_help_option(ctx: Any) -> Any:
        option = help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = quiet_help_option
    if command.epilog is None:
        command.epilog = EXIT_CODES_HELP
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)


class _Group(TyperGroup):
    """Turns LuminalError raised by any command into one line and its exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_help(self)

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
app.command("generate")(generate.generate_cmd)
app.command("devices")(devices.devices_cmd)
app.command("bench")(bench.bench_cmd)
app.command("profile")(profile.profile_cmd)
app.command("doctor")(doctor.doctor_cmd)
app.command("bundle")(bundle.bundle_cmd)
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


if __name__ == "__main__":
    main()
