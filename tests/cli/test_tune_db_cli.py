"""`luminal tune-db` and `luminal compile --budget` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search.tunedb import Measurement, TuningDB


def _seed(db: Path) -> None:
    with TuningDB(db) as t:
        t.record(
            [
                Measurement("k1", "dev", "1.0", Variant(), 2e-6, 3e-6, True, "contraction", "8x8"),
                Measurement(
                    "k1", "dev", "1.0", Variant(mr=4, nr=8), 1e-6, 2e-6, True, "contraction", "8x8"
                ),
            ]
        )


def test_show_export_import_clear(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b, x = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "x.json"
    _seed(a)
    rc, out, _ = cli("tune-db", "show", "--db", a, "--kernels", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["groups"][0]["kernels"] == 1 and data["groups"][0]["measurements"] == 2
    assert data["winners"][0]["variant"] == "generated-mr4-nr8"

    rc, out, _ = cli("tune-db", "export", x, "--db", a)
    assert rc == 0 and "exported 2" in out
    rc, out, _ = cli("tune-db", "import", x, "--db", b)
    assert rc == 0 and "imported 2" in out
    with TuningDB(b) as t:
        assert t.winner("k1", "dev", "1.0").variant == Variant(mr=4, nr=8)  # type: ignore[union-attr]

    rc, out, _ = cli("tune-db", "clear", "--yes", "--db", b)
    assert rc == 0 and "cleared 2" in out
    with TuningDB(b) as t:
        assert t.measurements() == []


def test_import_of_a_foreign_file_is_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    rc, _, err = cli("tune-db", "import", bad, "--db", tmp_path / "t.db")
    assert rc == 2
    assert (
        err.strip().count("\n") == 0 and "not a tuning-db export" in err and "Traceback" not in err
    )


def test_compile_with_a_bad_budget_is_a_usage_error(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    rc, _, err = cli("compile", path, "-o", tmp_path / "m.lmnl", "--budget", "soon")
    assert rc == 2 and "--budget 'soon'" in err
    assert not (tmp_path / "m.lmnl").exists()


def test_compile_searches_and_reports_in_json(cli, suite_onnx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    db = tmp_path / "t.db"
    rc, out, _ = cli(
        "compile", path, "-o", tmp_path / "m.lmnl", "--budget", "20s", "--tuning-db", db, "--json"
    )
    assert rc == 0
    result = json.loads(out)
    assert result["search"]["kernels"] >= 1
    assert result["rewrite"]["nodes_before"] >= result["rewrite"]["nodes_after"] > 0
    rc, out, _ = cli(
        "compile",
        path,
        "-o",
        tmp_path / "m2.lmnl",
        "--budget",
        "20s",
        "--tuning-db",
        db,
        "--verbose",
    )
    assert (
        rc == 0
        and "Kernel choices" in out
        and "E-graph rules" in out
        and "from the tuning database" in out
    )


def test_clear_without_a_terminal_asks_for_yes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # CliRunner's stdin is not a terminal: a usage error (exit 2), not exit 1 (internal)
    rc, _, err = cli("tune-db", "clear", "--db", tmp_path / "t.db")
    assert rc == 2 and "--yes" in err
