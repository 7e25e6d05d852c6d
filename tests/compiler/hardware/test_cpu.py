"""CPU discovery from recorded /proc files of other machines."""

from __future__ import annotations

from pathlib import Path

from luminal.compiler.hardware.cpu import detect_cpu, parse_cpuinfo

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cpuinfo"


def _fake_root(tmp_path: Path, name: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text((FIXTURES / name).read_text())
    (proc / "meminfo").write_text("MemTotal:       16384000 kB\nMemFree:  1 kB\n")
    return tmp_path


def test_x86_epyc(tmp_path: Path) -> None:
    cpu = detect_cpu(_fake_root(tmp_path, "x86_epyc_2core.txt"))
    assert cpu.model == "AMD EPYC 9R14 96-Core Processor"
    assert cpu.vendor == "AuthenticAMD"
    assert cpu.logical_cores == 2
    assert {"avx2", "fma", "avx512f", "avx512_bf16"} <= set(cpu.simd)
    assert cpu.memory_bytes == 16384000 * 1024


def test_x86_without_avx512(tmp_path: Path) -> None:
    cpu = detect_cpu(_fake_root(tmp_path, "x86_haswell_4core.txt"))
    assert cpu.logical_cores == 4
    assert "avx2" in cpu.simd and "fma" in cpu.simd
    assert not [f for f in cpu.simd if f.startswith("avx512")]


def test_aarch64_features() -> None:
    _model, vendor, simd, cores = parse_cpuinfo(
        (FIXTURES / "aarch64_neoverse_2core.txt").read_text(), "aarch64"
    )
    assert cores == 2 and vendor == "0x41"
    assert {"asimd", "sve", "i8mm", "bf16"} <= set(simd)


def test_fingerprint_is_stable_and_feature_sensitive(tmp_path: Path) -> None:
    a = detect_cpu(_fake_root(tmp_path, "x86_epyc_2core.txt"))
    assert a.fingerprint == detect_cpu(tmp_path).fingerprint
    other = tmp_path / "other"
    other.mkdir()
    b = detect_cpu(_fake_root(other, "x86_haswell_4core.txt"))
    assert a.fingerprint != b.fingerprint


def test_missing_proc_is_not_an_error(tmp_path: Path) -> None:
    cpu = detect_cpu(tmp_path)
    assert cpu.logical_cores >= 1 and cpu.memory_bytes is None and cpu.simd == ()
