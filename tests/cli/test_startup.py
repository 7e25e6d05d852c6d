"""The CLI starts without the heavy imports a command may never need: onnx (whose
ml_dtypes alone takes 0.6-0.9 s), egglog and torch are imported by the commands that use
them.  `luminal --help` took 1.8 s with them, 0.7 s without."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("onnx", "ml_dtypes", "egglog", "torch", "onnxruntime")


def test_the_cli_imports_no_heavy_module_until_a_command_needs_it() -> None:
    code = (
        "import sys; import luminal.cli.app; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
