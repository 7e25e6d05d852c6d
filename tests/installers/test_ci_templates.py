"""The CI templates' script part, run here as the runner would run it (acceptance, issue
17): the GitHub composite action passes on the example model, and the GitLab job fails on
a forced regression (a threshold the example cannot reach).  Each writes the
github-action-benchmark JSON, JUnit XML and the markdown summary."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

CI = Path(__file__).resolve().parents[2] / "installers" / "ci"
#: A short, lenient bench: the test checks the step's wiring, not the speedup's precision.
QUICK = {
    "BUDGET": "off",
    "DURATION": "1",
    "BENCH_ARGS": "--scenario latency --min-runs 20 --min-blocks 6 --block-ms 20 "
    "--target-halfwidth 0.5 --max-duration 6",
    "LUMINAL": f"{sys.executable} -m luminal",
}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.compiler.test_profile import mlp

    return Path(mlp(tmp_path_factory.mktemp("ci") / "mlp.onnx"))


def _env(**values: str) -> dict[str, str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, **values}


def _check_files(ci_dir: Path, gate: float, passed: bool) -> None:
    entries = json.loads((ci_dir / "benchmark.json").read_text())
    assert entries and all(set(e) == {"name", "unit", "value", "range", "extra"} for e in entries)
    assert {e["unit"] for e in entries} == {"ms"} and all(e["value"] > 0 for e in entries)
    assert any(e["name"].endswith("luminal p50") for e in entries)
    suite = ET.parse(ci_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    case = next(c for c in suite.iter("testcase") if c.get("name") == f"speedup >= {gate:g}")
    assert (case.find("failure") is None) == passed
    assert (ci_dir / "summary.md").read_text().startswith("## ")
    assert (ci_dir / "report.json").exists() and (ci_dir / "model.lmnl").exists()


def test_github_action_passes_on_the_example(example: Path, tmp_path: Path) -> None:
    action = yaml.safe_load((CI / "github" / "action.yml").read_text())
    step = action["runs"]["steps"][0]
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update(model=str(example), threshold="0.1", **{"ci-dir": str(tmp_path / "ci")})
    inputs.update({k.lower().replace("_", "-"): v for k, v in QUICK.items()})

    def expand(text: str) -> str:
        text = text.replace("${{ github.action_path }}", str(CI / "github"))
        return re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: inputs[m.group(1)], text)

    summary = tmp_path / "step-summary.md"
    env = _env(GITHUB_STEP_SUMMARY=str(summary), **{k: expand(v) for k, v in step["env"].items()})
    done = subprocess.run(
        [step["shell"], "-c", expand(step["run"])], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "==> luminal bench" in done.stdout and "ci: " in done.stderr
    # line-by-line progress: each finished phase on its own line, no live bar
    assert "✓ parity (latency)" in done.stderr and "✓ timed (latency)" in done.stderr
    assert "\r" not in done.stderr and "\x1b[" not in done.stderr
    _check_files(tmp_path / "ci", 0.1, passed=True)
    assert summary.read_text().startswith("## ")


def test_gitlab_job_fails_on_a_forced_regression(example: Path, tmp_path: Path) -> None:
    job = yaml.safe_load((CI / "gitlab" / "luminal.gitlab-ci.yml").read_text())[".luminal-bench"]
    variables = {k: str(v) for k, v in job["variables"].items()}
    variables.update(QUICK, MODEL=str(example), THRESHOLD="1000", CI_DIR=str(tmp_path / "ci"))
    script = "set -e\n" + "\n".join(job["script"])
    done = subprocess.run(
        ["sh", "-c", script], env=_env(**variables), capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the gate, not a crash
    assert "below --fail-below 1000" in done.stderr
    _check_files(tmp_path / "ci", 1000, passed=False)
