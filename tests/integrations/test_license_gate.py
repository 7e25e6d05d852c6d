"""The one license gate: every way of compiling is refused without a license, with the
CLI's message and exit code; loading an existing artifact never needs one."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch

import luminal
from benchmarks.models import build
from luminal.compiler.frontend import load_model
from luminal.compiler.pipeline import CompileOptions, compile_model
from luminal.errors import IntegrityError, LicenseError, LicenseMissing, NotEntitled
from luminal.licensing.home import Home
from luminal.licensing.timeutil import utcnow
from tests.helpers.licensing_helpers import Vendor, make_terms


@pytest.fixture
def unlicensed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    home = Home(tmp_path / "unlicensed")
    monkeypatch.setenv("LUMINAL_HOME", str(home.root))
    return home


def _cli_refusal(cli, model: Path, out: Path) -> str:  # type: ignore[no-untyped-def]
    rc, _, err = cli("compile", model, "-o", out, "--budget", "off", "--target", "cpu")
    assert rc == 3 and not out.exists()
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith("error: ")
    return line.removeprefix("error: ")


def test_compile_model_is_refused_like_the_cli(suite_onnx, cli, unlicensed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    message = _cli_refusal(cli, path, tmp_path / "cli.lmnl")
    assert message.startswith(f"no license installed in {unlicensed.root}")
    out = tmp_path / "api.lmnl"
    with pytest.raises(LicenseMissing) as err:
        compile_model(load_model(path, {}), out, CompileOptions(target="cpu"))
    assert str(err.value) == message and err.value.exit_code == 3
    assert not out.exists()


def test_inference_session_is_refused_but_loads_an_artifact(
    suite_onnx, cli, unlicensed, tmp_path, licensed_home, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx("mlp")
    message = _cli_refusal(cli, path, tmp_path / "cli.lmnl")
    cache = tmp_path / "cache"
    with pytest.raises(LicenseMissing) as err:
        luminal.InferenceSession(str(path), cache_dir=cache)
    assert str(err.value) == message
    assert not list(cache.glob("*.lmnl"))
    with pytest.raises(LicenseMissing, match="no license installed"):
        luminal.InferenceSession(path.read_bytes())

    # compiled where there is a license, the artifact runs where there is none
    monkeypatch.setenv("LUMINAL_HOME", str(licensed_home))
    licensed = luminal.InferenceSession(str(path), cache_dir=cache)
    (artifact,) = cache.glob("*.lmnl")
    rc, _, err = cli("artifact-key", "export", "-o", tmp_path / "builder.json")
    assert rc == 0, err
    monkeypatch.setenv("LUMINAL_HOME", str(unlicensed.root))
    with pytest.raises(IntegrityError, match="does not trust"):  # signed by another install
        luminal.InferenceSession(str(artifact))
    assert luminal.InferenceSession(str(artifact), trust_unsigned=True).run(None, feeds)
    rc, _, err = cli("artifact-key", "trust", tmp_path / "builder.json")
    assert rc == 0, err
    again = luminal.InferenceSession(str(artifact))
    (want,) = licensed.run(None, feeds)
    (got,) = again.run(None, feeds)
    np.testing.assert_array_equal(got, want)
    assert not unlicensed.license.exists()


def test_torch_compile_is_refused_not_run_eagerly(suite_onnx, cli, unlicensed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    message = _cli_refusal(cli, suite_onnx("mlp")[0], tmp_path / "cli.lmnl")
    torch._dynamo.reset()
    try:
        model = build("mlp")
        compiled = torch.compile(model.module, backend="luminal")
        with torch.no_grad(), pytest.raises(Exception) as err:
            compiled(*model.example_inputs)
    finally:
        torch._dynamo.reset()
    chain = [err.value]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)  # type: ignore[arg-type]
    refusals = [e for e in chain if isinstance(e, LicenseError)]
    assert refusals and str(refusals[0]) == message
    assert message in str(err.value)


def test_a_license_without_the_target_is_refused_before_any_stage(
    suite_onnx, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "cpu-less"
    vendor = Vendor.create(root / "vendor")
    lic = vendor.write_license(root / "license.json", None, terms=make_terms(targets=("cuda",)))
    monkeypatch.setenv("LUMINAL_HOME", str(root / "home"))
    from tests.conftest import Cli

    cli = Cli()
    assert cli("license", "trust", vendor.pub_path, "--evaluation")[0] == 0
    assert cli("license", "install", lic)[0] == 0
    path, _ = suite_onnx("mlp")
    steps: list[str] = []
    with pytest.raises(NotEntitled, match="does not entitle target 'cpu'"):
        compile_model(load_model(path, {}), tmp_path / "m.lmnl", on_step=steps.append)
    assert steps == []


def test_license_warnings_reach_the_hook_or_the_logger(
    suite_onnx, tmp_path, monkeypatch, caplog
) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "expiring"
    vendor = Vendor.create(root / "vendor")
    soon = utcnow() + timedelta(days=3)
    lic = vendor.write_license(root / "license.json", None, expires_at=soon)
    monkeypatch.setenv("LUMINAL_HOME", str(root / "home"))
    from tests.conftest import Cli

    cli = Cli()
    assert cli("license", "trust", vendor.pub_path, "--evaluation")[0] == 0
    assert cli("license", "install", lic)[0] == 0
    path, _ = suite_onnx("mlp")
    heard: list[tuple[str, ...]] = []
    compile_model(
        load_model(path, {}), tmp_path / "a.lmnl", on_license=lambda s: heard.append(s.warnings)
    )
    assert len(heard) == 1 and "expires on" in heard[0][0]
    with caplog.at_level(logging.WARNING, logger="luminal.licensing"):
        compile_model(load_model(path, {}), tmp_path / "b.lmnl")
    assert [r.getMessage() for r in caplog.records] == list(heard[0])
    rc, _, err = cli("compile", path, "-o", tmp_path / "c.lmnl", "--budget", "off")
    assert rc == 0 and f"warning: {heard[0][0]}" in " ".join(err.split())
