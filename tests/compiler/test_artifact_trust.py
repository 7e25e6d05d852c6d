"""Artifacts a runtime can trust: signed by a trusted install, checked against their own
library, size-capped before decompression.  Every refusal is one line and exit 4 through
`luminal run`, and nothing an attacker edits reaches native code."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import luminal
from luminal.compiler.artifact import (
    MANIFEST,
    SIGNATURE,
    Signer,
    Trust,
    limits,
    read_artifact,
    write_artifact,
)
from luminal.compiler.artifact.trust import TrustStore
from luminal.compiler.ir import TensorSpec
from luminal.errors import IntegrityError
from luminal.licensing.home import Home
from luminal.references.oracle import run_oracle
from luminal.references.parity import Tolerance, compare
from tests.compiler.test_pipeline import _rewrite


@pytest.fixture(scope="module")
def gemm(gemm_artifact) -> tuple[Path, Path, dict[str, np.ndarray]]:  # type: ignore[no-untyped-def]
    """(artifact built and signed by the session's home, its ONNX model, feeds)."""
    return gemm_artifact


def _run(cli, artifact: Path, feeds: dict[str, np.ndarray], tmp: Path, *flags: str):  # type: ignore[no-untyped-def]
    np.save(tmp / "x.npy", feeds["in0"])
    return cli("run", artifact, "--input", f"in0={tmp / 'x.npy'}", "--json", *flags)


def _refused(rc: int, err: str, *needles: str) -> None:
    assert rc == 4, err
    assert len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def _evil_library(tmp: Path) -> tuple[bytes, Path]:
    """A library whose constructor leaves a mark, with the ABI and run entry points."""
    marker = tmp / "constructor-ran"
    c = tmp / "evil.c"
    c.write_text(
        f'#include <stdio.h>\n__attribute__((constructor)) static void f(void) {{ FILE *o = fopen("{marker}", "w"); if (o) fclose(o); }}\n'
        "int lum_abi_version(void) { return 1; }\nint lum_run(void *a, void *b, void *c, void *d) { return 0; }\n"
    )
    subprocess.run(["cc", "-shared", "-fPIC", str(c), "-o", str(tmp / "evil.so")], check=True)
    return (tmp / "evil.so").read_bytes(), marker


def test_own_artifact_is_signed_and_runs(gemm, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    art_path, src, feeds = gemm
    art = read_artifact(art_path)
    assert art.provenance.trust is Trust.OWN
    assert art.provenance.keyid == TrustStore.load().own.keyid  # type: ignore[union-attr]
    with zipfile.ZipFile(art_path) as z:
        assert SIGNATURE in z.namelist()
    parity = compare(
        luminal.load(art_path).run(feeds),
        run_oracle("onnxruntime", src, feeds),
        Tolerance(1e-4, 1e-5),
    )
    assert parity.ok, parity.to_json()


def test_swapped_library_with_consistent_hashes_is_refused_before_dlopen(
    gemm, cli, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    art_path, _, feeds = gemm
    evil, marker = _evil_library(tmp_path)
    art = read_artifact(art_path)
    members = {**art.members, "model.so": evil}
    # 1. hashes fixed in manifest.json, the old signature kept
    fixed = tmp_path / "fixed.lmnl"
    write_artifact(fixed, art.manifest, members)
    with zipfile.ZipFile(art_path) as z:
        old_sig = z.read(SIGNATURE)
    _rewrite(fixed, tmp_path / "swapped.lmnl", lambda n, d: old_sig if n == SIGNATURE else d)
    rc, _, err = _run(cli, tmp_path / "swapped.lmnl", feeds, tmp_path)
    _refused(rc, err, "does not match its signature", "recompile")
    # 2. re-signed by a key this install does not trust
    other = Signer.for_install(Home(tmp_path / "attacker"))
    write_artifact(tmp_path / "resigned.lmnl", art.manifest, members, signer=other)
    rc, _, err = _run(cli, tmp_path / "resigned.lmnl", feeds, tmp_path)
    _refused(rc, err, f"signed by key {other.keyid}", "does not trust")
    with pytest.raises(IntegrityError, match=other.keyid):
        luminal.load(tmp_path / "resigned.lmnl")
    assert not marker.exists()


def _edit(manifest, what: str):  # type: ignore[no-untyped-def]
    if what == "output shape":
        (o,) = manifest.outputs
        return replace(manifest, outputs=(TensorSpec(o.name, (1, 1), o.dtype),))
    if what == "input shape":
        (i,) = manifest.inputs
        return replace(manifest, inputs=(TensorSpec(i.name, (1, 1), i.dtype),))
    if what == "arena size":
        return replace(
            manifest, memory=replace(manifest.memory, arena_bytes=manifest.memory.arena_bytes + 64)
        )
    assert what == "arena 2^50"
    return replace(manifest, memory=replace(manifest.memory, arena_bytes=2**50))


@pytest.mark.parametrize("what", ["output shape", "input shape", "arena size", "arena 2^50"])
def test_manifest_edit_is_refused(what, gemm, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    art_path, _, feeds = gemm
    art = read_artifact(art_path)
    edited = _edit(art.manifest, what)
    # edited in place: the signature no longer covers the manifest
    write_artifact(tmp_path / "tmp.lmnl", edited, art.members)
    with zipfile.ZipFile(art_path) as z:
        old_sig = z.read(SIGNATURE)
    _rewrite(
        tmp_path / "tmp.lmnl",
        tmp_path / "edited.lmnl",
        lambda n, d: old_sig if n == SIGNATURE else d,
    )
    rc, _, err = _run(cli, tmp_path / "edited.lmnl", feeds, tmp_path)
    _refused(rc, err, "does not match its signature", "recompile")
    # signed by a trusted key anyway (a buggy builder), or loaded with --trust-unsigned:
    # the manifest is checked against the library's own interface, never run
    write_artifact(tmp_path / "signed.lmnl", edited, art.members)
    for flags in ((), ("--trust-unsigned",)):
        rc, _, err = _run(
            cli, tmp_path / ("signed.lmnl" if not flags else "edited.lmnl"), feeds, tmp_path, *flags
        )
        if what == "arena 2^50":
            _refused(rc, err, "memory.arena_bytes", "memory available")
        else:
            _refused(rc, err, "does not match its library's interface")


def test_unsigned_artifact_is_refused_unless_trusted_explicitly(gemm, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    art_path, _, feeds = gemm
    bare = tmp_path / "unsigned.lmnl"
    with zipfile.ZipFile(art_path) as zin, zipfile.ZipFile(bare, "w") as zout:
        for name in zin.namelist():
            if name != SIGNATURE:
                zout.writestr(name, zin.read(name))
    rc, _, err = _run(cli, bare, feeds, tmp_path)
    _refused(rc, err, "unsigned", "--trust-unsigned")
    with pytest.raises(IntegrityError, match="unsigned"):
        luminal.load(bare)
    rc, _, err = _run(cli, bare, feeds, tmp_path, "--trust-unsigned")
    assert rc == 0, err
    signed = luminal.load(art_path).run(feeds)
    unsigned = luminal.load(bare, trust_unsigned=True)
    assert read_artifact(bare, trust_unsigned=True).provenance.trust is Trust.UNVERIFIED
    got = unsigned.run(feeds)
    assert got.keys() == signed.keys()
    for name, want in signed.items():
        np.testing.assert_array_equal(got[name], want)


def test_artifact_from_another_install_runs_once_its_key_is_trusted(
    gemm, cli, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    art_path, _, feeds = gemm
    art = read_artifact(art_path)
    build_home = tmp_path / "build-server"
    foreign = tmp_path / "foreign.lmnl"
    monkeypatch.setenv("LUMINAL_HOME", str(build_home))
    write_artifact(foreign, art.manifest, art.members)  # signed by the build server's key
    rc, _, err = cli("artifact-key", "export", "-o", tmp_path / "build.key.json")
    assert rc == 0, err
    build_key = json.loads((tmp_path / "build.key.json").read_text())["keyid"]
    monkeypatch.setenv("LUMINAL_HOME", str(tmp_path / "runner"))
    rc, _, err = _run(cli, foreign, feeds, tmp_path)
    _refused(rc, err, f"signed by key {build_key}", "luminal artifact-key trust")
    rc, out, err = cli("artifact-key", "trust", tmp_path / "build.key.json")
    assert rc == 0 and build_key in out, err
    rc, out, err = cli("artifact-key", "list", "--json")
    assert [r["keyid"] for r in json.loads(out)] == [build_key]  # the runner compiled nothing
    rc, out, err = _run(cli, foreign, feeds, tmp_path)
    assert rc == 0, err
    assert read_artifact(foreign).provenance.trust is Trust.TRUSTED
    rc, _, err = cli("artifact-key", "untrust", build_key)
    assert rc == 0, err
    rc, _, err = _run(cli, foreign, feeds, tmp_path)
    _refused(rc, err, build_key)


def test_a_key_file_whose_id_does_not_match_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = cli("artifact-key", "export")
    doc = json.loads(out)
    doc["keyid"] = "0" * 16
    (tmp_path / "k.json").write_text(json.dumps(doc))
    rc, _, err = cli("artifact-key", "trust", tmp_path / "k.json")
    assert rc == 2 and "does not match its public key" in err


def _bomb(src: Path, dst: Path, gib: float = 1.5) -> None:
    """`src` with weights.bin replaced by `gib` GiB of zeros deflated to ~1.5 MB: the
    deflate stream is built from one full-flushed 1 MiB block repeated, not compressed."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = co.compress(bytes(2**20)) + co.flush(zlib.Z_FULL_FLUSH)
    data = block * int(gib * 1024) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            if name == "weights.bin":
                continue
            zout.writestr(name, zin.read(name))
        info = zipfile.ZipInfo("weights.bin")
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size, info.compress_size, info.CRC = int(gib * 2**30), len(data), 0
        assert zout.fp is not None
        info.header_offset = zout.fp.tell()
        zout.fp.write(info.FileHeader())
        zout.fp.write(data)
        zout.filelist.append(info)
        zout.NameToInfo[info.filename] = info
        zout.start_dir = zout.fp.tell()
        zout._didModify = True  # type: ignore[attr-defined]


_MEASURE = """
import json, resource, sys, time
from pathlib import Path
from luminal.compiler.artifact import read_artifact
from luminal.errors import LuminalError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
try:
    read_artifact(Path(sys.argv[1]))
    verdict = "accepted"
except LuminalError as err:
    verdict = f"{type(err).__name__}: {err}"
seconds = time.perf_counter() - t
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"verdict": verdict, "seconds": seconds, "grew_bytes": grew}))
"""


def test_compression_bomb_is_refused_fast_and_small(gemm, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    art_path, _, feeds = gemm
    bomb = tmp_path / "bomb.lmnl"
    _bomb(art_path, bomb)
    assert bomb.stat().st_size < 5 * 2**20
    with zipfile.ZipFile(bomb) as z:
        assert z.getinfo("weights.bin").file_size == int(1.5 * 2**30)
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(bomb)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["verdict"].startswith("IntegrityError") and "compression bomb" in got["verdict"], got
    assert got["seconds"] < 1.0 and got["grew_bytes"] < 100 * 2**20, got
    rc, _, err = _run(cli, bomb, feeds, tmp_path, "--trust-unsigned")
    _refused(rc, err, "weights.bin", "compression bomb")


def _info(name: str, size: int, packed: int, method: int = zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.file_size, info.compress_size, info.compress_type = size, packed, method
    return info


def _encrypted(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    info.flag_bits |= 0x1
    return info


@pytest.mark.parametrize(
    ("infos", "message"),
    [
        ([_info("weights.bin", 2000, 10)], "compression bomb"),
        ([_info("weights.bin", 100, 90, zipfile.ZIP_STORED)], "inconsistent sizes"),
        (
            [
                _info("weights.bin", 900, 50),
                _info("model.so", 900, 50),
            ],
            "memory available",
        ),
        ([_info("a", 1, 1), _info("a", 1, 1)], "appears twice"),
        ([_info(MANIFEST, 600, 600, zipfile.ZIP_STORED)], "allowed"),
        ([_info("w", 10, 10, zipfile.ZIP_BZIP2)], "compression method"),
        ([_encrypted(_info("w", 10, 10, zipfile.ZIP_STORED))], "encrypted"),
        ([_info("w", 900, 900, zipfile.ZIP_STORED)], "more bytes than the file holds"),
    ],
)
def test_zip_records_are_capped_before_reading(infos, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IntegrityError, match=message):
        limits.check_zip("x.lmnl", infos, 800, 1000, {MANIFEST: 500})


def test_zip_records_within_the_caps_pass() -> None:
    stored = [_info(MANIFEST, 400, 400, zipfile.ZIP_STORED), _info("w", 500, 30)]
    limits.check_zip("x.lmnl", stored, 4000, 1000, {MANIFEST: 500})


def test_memory_budget_reads_meminfo(tmp_path) -> None:  # type: ignore[no-untyped-def]
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable: 40 kB\nSwapFree: 2 kB\n")
    assert limits.memory_budget(meminfo) == 42 * 1024
    assert limits.memory_budget(tmp_path / "absent") > 0


def test_a_record_claiming_an_unknown_zip_version_is_damaged(gemm, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Found by the fuzz: zipfile raises NotImplementedError on opening an archive whose
    central directory claims a ZIP version it does not implement."""
    import struct

    from luminal.compiler.artifact import read_artifact
    from luminal.errors import IntegrityError

    src = gemm[0]
    data = bytearray(src.read_bytes())
    at = data.index(b"PK\x01\x02")  # the first central directory record
    struct.pack_into("<B", data, at + 6, 84)  # "version needed to extract": 8.4
    bad = tmp_path / "version.lmnl"
    bad.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="damaged artifact"):
        read_artifact(bad)
    rc, _, err = cli("run", bad)
    assert rc == 4 and err.count("\n") == 1, err
