"""A license for the benchmarks: they compile through `compile_model`, which is the
license gate.

`licensed(targets)` keeps the environment's license when it entitles `compile` on every
target.  Without one it makes, in a private temporary LUMINAL_HOME for the duration of
the benchmark, an evaluation license the way `make demo` does: a local evaluation vendor
key (never certified by the vendor root, so its licenses are evaluation terms, not
billable) signs a license bound to that home.  It says so on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from luminal.errors import LicenseError


@contextlib.contextmanager
def licensed(targets: Sequence[str] = ("cpu",)) -> Iterator[Path | None]:
    """The LUMINAL_HOME the benchmark runs under: None when the environment's own license
    already entitles compiling on `targets`, else a temporary evaluation home."""
    from luminal import licensing

    try:
        for target in targets:
            licensing.check("compile", target)
        yield None
        return
    except LicenseError as err:
        print(f"benchmarks: {err}; using a temporary evaluation license", file=sys.stderr)
    before = os.environ.get("LUMINAL_HOME")
    with tempfile.TemporaryDirectory(prefix="luminal-bench-home-") as tmp:
        home, vendor = Path(tmp) / "home", Path(tmp) / "vendor"
        os.environ["LUMINAL_HOME"] = str(home)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout is the benchmark's table
                _evaluation_license(home, vendor, targets)
            yield home
        finally:
            if before is None:
                os.environ.pop("LUMINAL_HOME", None)
            else:
                os.environ["LUMINAL_HOME"] = before


def _evaluation_license(home: Path, vendor: Path, targets: Sequence[str]) -> None:
    """`make demo`'s licensing steps, in this process."""
    import typer

    from luminal.cli.app import app as luminal_app
    from luminal_vendor.cli import app as vendor_app

    def run(app: typer.Typer, args: list[str]) -> None:
        command = typer.main.get_command(app)
        command.main(args=args, prog_name="luminal", standalone_mode=False)

    key, request, license_file = vendor / "eval", vendor / "request.json", vendor / "license.json"
    run(vendor_app, ["keygen", "-o", str(key), "--valid-days", "30"])
    run(luminal_app, ["license", "request", "-o", str(request)])
    run(
        vendor_app,
        [
            "activate",
            str(request),
            "-k",
            f"{key}.key",
            "--licensee",
            "benchmark",
            "--targets",
            ",".join(targets),
            "--price",
            "cpu=0.10",
            "--days",
            "30",
            "--evaluation",
            "-o",
            str(license_file),
        ],
    )
    run(luminal_app, ["license", "trust", f"{key}.pub.json", "--evaluation"])
    run(luminal_app, ["license", "install", str(license_file)])
