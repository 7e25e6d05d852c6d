"""Shared fixtures: suite models exported once per session, and a CLI runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from luminal.cli.app import app
from typer.testing import CliRunner


@pytest.fixture(scope="session")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("suite")


@pytest.fixture(scope="session")
def suite_onnx(suite_dir: Path):  # type: ignore[no-untyped-def]
    """name -> (path of the exported .onnx, example feeds); exported once per session."""
    from benchmarks.models import build, example_feeds, export_onnx

    cache: dict[str, tuple[Path, dict[str, np.ndarray]]] = {}

    def get(name: str) -> tuple[Path, dict[str, np.ndarray]]:
        if name not in cache:
            model = build(name)
            cache[name] = (export_onnx(model, suite_dir / f"{name}.onnx"), example_feeds(model))
        return cache[name]

    return get


class Cli:
    """Runs `luminal ...` in-process and returns (exit code, stdout, stderr)."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str) -> tuple[int, str, str]:
        result = self.runner.invoke(app, [str(a) for a in args])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def cli() -> Cli:
    return Cli()
