"""Shared fixtures: suite models exported once per session, and a CLI runner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from luminal.cli.app import app


@pytest.fixture(scope="session")
def licensed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LUMINAL_HOME holding a floating evaluation license for every feature on the
    built-in targets and the test backends' `npu` kind (compile_model is the license gate,
    so every test that compiles needs it; asic plugins are not entitled, their tests bring
    their own home), signed by a vendor key that the home trusts by explicit local
    (evaluation) setting."""
    from tests.helpers.licensing_helpers import Vendor, make_terms

    root = tmp_path_factory.mktemp("licensed")
    home = root / "home"
    vendor = Vendor.create(root / "vendor")
    terms = make_terms(targets=("cpu", "cuda", "rocm", "npu"))
    license_file = vendor.write_license(root / "license.json", None, terms=terms)
    runner = CliRunner(env={"LUMINAL_HOME": str(home)})
    for args in (
        ["license", "trust", str(vendor.pub_path), "--evaluation"],
        ["license", "install", str(license_file)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    return home


@pytest.fixture(scope="session", autouse=True)
def _licensed_session(licensed_home: Path) -> Iterator[None]:
    """The evaluation home for the whole session: session- and module-scoped fixtures
    that compile (they run before any test's own fixtures) and subprocesses find its
    license, the artifacts they build are signed by the key the tests trust, and nothing
    touches the real ~/.local/share/luminal."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LUMINAL_HOME", str(licensed_home))
        yield


@pytest.fixture(autouse=True)
def _licensed(licensed_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs against the evaluation home unless it sets LUMINAL_HOME itself."""
    monkeypatch.setenv("LUMINAL_HOME", str(licensed_home))


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


@pytest.fixture(scope="session")
def gemm_artifact(tmp_path_factory: pytest.TempPathFactory, _licensed_session: None):  # type: ignore[no-untyped-def]
    """(a small Gemm artifact built and signed by the session's home, its ONNX model, feeds),
    compiled once for every test that only reads it (tamper tests write altered copies)."""
    import onnx

    from luminal.compiler.frontend.onnx import load as load_onnx
    from luminal.compiler.pipeline import compile_model
    from tests.helpers.onnx_cases import node_model

    tmp = tmp_path_factory.mktemp("gemm")
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(s).astype(np.float32) for s in ((3, 8), (8, 5), (5,))]
    src = tmp / "gemm.onnx"
    onnx.save(node_model("Gemm", weights, consts=(1, 2)), src)
    out = tmp / "gemm.lmnl"
    compile_model(load_onnx(src), out)
    return out, src, {"in0": rng.standard_normal((3, 8)).astype(np.float32)}
