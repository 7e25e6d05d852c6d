"""Every shell block of docs/quickstart.md runs: `sh` blocks by default, `sh slow` blocks
with -m slow; `sh heavy` holds only the README's two make commands (CI runs `make test`)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
BLOCK = re.compile(r"^```sh( \w+)?\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [body for tag, body in BLOCK.findall(QUICKSTART.read_text()) if tag.strip() == kind]


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`luminal`, `luminal-vendor` and `python` on PATH as this checkout's, as after
    `make setup`."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, args in (
        ("luminal", "-m luminal "),
        ("luminal-vendor", "-m luminal_vendor "),
        ("python", ""),
    ):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args}"$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    pythonpath = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "COLUMNS": "100"}


def _run(body: str, env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        ["sh", "-e", "-c", body], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_the_quickstart_has_each_kind_of_block() -> None:
    assert blocks("") and blocks("slow")
    (heavy,) = blocks("heavy")
    commands = [ln.split("#")[0].strip() for ln in heavy.splitlines() if ln.strip()]
    assert commands == ["make demo", "make test"]  # the README's two commands, no more
    readme = (ROOT / "README.md").read_text()
    assert all(c in readme for c in commands)


def test_the_plain_blocks_run(shell_env: dict[str, str], tmp_path: Path) -> None:
    for body in blocks(""):
        _run(body, shell_env, tmp_path)


@pytest.mark.slow
def test_the_slow_blocks_run_in_order(shell_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    for body in blocks("slow"):
        _run(body, shell_env, tmp_path)
    assert (tmp_path / "build" / "demo-report.html").exists()
