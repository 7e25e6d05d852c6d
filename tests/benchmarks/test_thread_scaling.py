"""benchmarks.thread_scaling: each kernel's in-model time on one thread and on N, ranked
by what it costs beyond perfect scaling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.thread_scaling import main, measure, report, scaling
from luminal.compiler.frontend.onnx import load
from luminal.compiler.options import CompileOptions
from luminal.compiler.pipeline import compile_model
from luminal.compiler.profile import KernelProfile, Profile
from luminal.compiler.search.tuner import Machine
from tests.benchmarks.test_profile_vs_ort import conv_net

MACHINE = Machine(100.0, 20.0, 2)


def _profile(threads: int, end_to_end: float, **seconds: float) -> Profile:
    kernels = tuple(
        KernelProfile(name, "contraction", (), "generated", (4,), s, 0.5, 0, 0, 1.0)
        for name, s in seconds.items()
    )
    return Profile("m.lmnl", "cpu", threads, 10, kernels, end_to_end, end_to_end, MACHINE)


def test_each_side_takes_its_least_time_and_rows_rank_by_excess() -> None:
    one = [_profile(1, 9e-3, k0=4e-3, k1=3e-3), _profile(1, 8e-3, k0=5e-3, k1=2e-3)]
    many = [_profile(2, 6e-3, k0=2e-3, k1=3e-3), _profile(2, 5e-3, k0=2.5e-3, k1=2.5e-3)]
    s = scaling("m", 2, one, many)
    assert (s.one_s, s.many_s) == (8e-3, 5e-3)
    # k1: 2 ms alone, 2.5 ms on two threads (slower: excess 1.5 ms); k0: 4 -> 2 (none)
    assert [k.name for k in s.kernels] == ["k1", "k0"]
    k1, k0 = s.kernels
    assert (k1.one_s, k1.many_s) == (2e-3, 2.5e-3)
    assert k1.excess_s(2) == pytest.approx(1.5e-3) and k1.speedup == pytest.approx(0.8)
    assert k0.excess_s(2) == pytest.approx(0.0) and k0.speedup == pytest.approx(2.0)
    assert s.excess_s == pytest.approx(1.5e-3) and s.speedup == pytest.approx(1.6)
    text = report(s, top=1)
    assert "| k1 |" in text and "| k0 |" not in text and "+1500.0" in text
    assert json.loads(json.dumps(s.to_json()))["kernels"][0]["excess_ms"] == pytest.approx(1.5)


def test_profiles_of_different_schedules_are_refused() -> None:
    with pytest.raises(ValueError, match="different schedules"):
        scaling("m", 2, [_profile(1, 1e-3, k0=1e-3)], [_profile(2, 1e-3, k1=1e-3)])
    with pytest.raises(ValueError, match="at least one profile"):
        scaling("m", 2, [], [_profile(2, 1e-3, k0=1e-3)])


def test_an_artifact_is_profiled_on_one_thread_and_on_two(tmp_path: Path) -> None:
    art = tmp_path / "net.lmnl"
    built = compile_model(load(conv_net(tmp_path / "net.onnx")), art, CompileOptions())
    assert built.schedule is not None
    s = measure(art, threads=2, repeats=1, seconds=0.05)
    assert s.threads == 2 and s.one_s > 0 and s.many_s > 0
    assert sorted(k.name for k in s.kernels) == sorted(k.name for k in built.schedule.kernels)
    assert any(k.kind == "contraction" for k in s.kernels)
    assert all(k.one_s > 0 and k.many_s > 0 for k in s.kernels)
    out = tmp_path / "scaling.json"
    assert main([str(art), "--repeats", "1", "--seconds", "0.05", "--json", str(out)]) == 0
    (written,) = json.loads(out.read_text())
    assert [k["name"] for k in written["kernels"]] and written["threads"] == 2


def test_a_missing_artifact_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([str(tmp_path / "none.lmnl"), "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "none.lmnl" in err and "Traceback" not in err
