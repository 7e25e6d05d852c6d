"""The installed package: layout, public names, console script."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import luminal
import luminal.errors


def test_top_level_folders_are_luminal_subpackages() -> None:
    for name in (
        "cli",
        "compiler",
        "installers",
        "integrations",
        "licensing",
        "metering",
        "references",
    ):
        module = importlib.import_module(f"luminal.{name}")
        assert module.__name__ == f"luminal.{name}"


def test_errors_all_is_complete_and_exit_codes_documented() -> None:
    exported = {
        n
        for n in dir(luminal.errors)
        if isinstance(getattr(luminal.errors, n), type)
        and issubclass(getattr(luminal.errors, n), luminal.errors.LuminalError)
    }
    assert exported == set(luminal.errors.__all__)
    codes = {cls.exit_code for cls in map(lambda n: getattr(luminal.errors, n), exported)}
    assert codes == {1, 2, 3, 4, 5, 6, 7}
    assert codes | {0, 130} == {code for code, _ in luminal.errors.EXIT_CODES}
    doc = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    for code in (2, 3, 4, 5, 6, 7):
        assert f"| {code} " in doc


def test_console_script() -> None:
    exe = Path(sys.executable).parent / "luminal"
    assert exe.is_file()
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"luminal {luminal.__version__}"
