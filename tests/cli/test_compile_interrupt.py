"""A real Ctrl-C (SIGINT to the process group, as a terminal sends it) during the search:
the compile stops measuring, writes the best artifact found so far, keeps what it measured
in the tuning database, and exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.search.tunedb import TuningDB


@pytest.mark.slow  # about 20 s: a cnn compile up to its first measurements
def test_ctrl_c_during_the_search_writes_the_best_artifact(suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, feeds = suite_onnx("cnn")
    out, db = tmp_path / "cnn.lmnl", tmp_path / "tune.db"
    luminal_cmd = Path(sys.executable).parent / "luminal"  # the console script
    cmd = [str(luminal_cmd), "compile", str(model), "-o", str(out)]
    cmd += ["--target", "cpu", "--budget", "120s", "--tuning-db", str(db)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    # Wait until measuring has begun (the first timings reach the database), then Ctrl-C.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with TuningDB(db) as t:
                if t.measurements():
                    break
        time.sleep(0.2)
    if proc.poll() is not None:
        pytest.fail(f"the compile ended before it could be interrupted: {proc.communicate()[1]}")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "Traceback" not in err
    assert out.exists()
    got = luminal.load(out).run(feeds)
    import onnxruntime as ort

    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-3, atol=1e-4)
    with TuningDB(db) as t:
        assert t.measurements()  # kept for the next compile
