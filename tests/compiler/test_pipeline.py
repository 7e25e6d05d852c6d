"""`luminal compile` end to end: suite models, the artifact's integrity, the runtime."""

from __future__ import annotations

import json
import subprocess
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import luminal
from luminal.compiler.artifact import read_artifact, write_artifact
from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.errors import ArtifactIncompatible, IntegrityError, UsageError
from luminal.references.oracle import run_oracle
from luminal.references.parity import Tolerance, compare
from tests.helpers.onnx_cases import node_model


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return run_oracle("onnxruntime", path, feeds)


#: The CLI's default budget searches for about 10 s on cnn: the default suite searches the
#: mlp end to end and compiles the others with the rewrite and tuning-database hits only
#: (`--budget 0`); the slow suite searches them all.
SUITE_BUDGETS = [
    ("mlp", None),
    ("cnn", "0"),
    ("encoder", "0"),
    ("gpt", "0"),
    *(pytest.param(n, None, marks=pytest.mark.slow) for n in ("cnn", "encoder", "gpt")),
]


@pytest.mark.parametrize(("name", "budget"), SUITE_BUDGETS)
def test_suite_model_compiles_from_onnx_and_matches_onnxruntime(
    name, budget, suite_onnx, cli, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    path, feeds = suite_onnx(name)
    out = tmp_path / f"{name}.lmnl"
    rc, stdout, err = cli(
        "compile", path, "-o", out, "--json", *(["--budget", budget] if budget else [])
    )
    assert rc == 0, err
    summary = json.loads(stdout)
    assert summary["kernels"] > 0 and summary["arena_bytes"] <= summary["intermediate_bytes"]
    assert summary["check"]["status"] == "passed"
    if name != "mlp":  # the mlp's two intermediates are alive together: nothing to share
        assert summary["arena_bytes"] < summary["intermediate_bytes"]
    got = luminal.load(out).run(feeds)
    parity = compare(got, _ort(path, feeds), Tolerance(1e-4, 1e-5))
    assert parity.ok, parity.to_json()


@pytest.fixture(scope="module")
def small_artifact(gemm_artifact) -> tuple[Path, dict[str, np.ndarray]]:  # type: ignore[no-untyped-def]
    out, _, feeds = gemm_artifact
    return out, feeds


def _rewrite(src: Path, dst: Path, change) -> None:  # type: ignore[no-untyped-def]
    """Copy an artifact member by member, letting `change(name, data)` alter bytes, and
    keep the ORIGINAL manifest (so hashes no longer match)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for name in zin.namelist():
            zout.writestr(name, change(name, zin.read(name)))


def _flip_one_byte(member: str):  # type: ignore[no-untyped-def]
    def change(name: str, data: bytes) -> bytes:
        if name != member:
            return data
        b = bytearray(data)
        b[len(b) // 2] ^= 0x01
        return bytes(b)

    return change


@pytest.mark.parametrize("member", ["model.so", "weights.bin"])
def test_altered_member_is_refused_with_exit_4(member, small_artifact, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src, feeds = small_artifact
    bad = tmp_path / "bad.lmnl"
    _rewrite(src, bad, _flip_one_byte(member))
    np.save(tmp_path / "x.npy", feeds["in0"])
    rc, _, err = cli("run", bad, "--input", f"in0={tmp_path / 'x.npy'}")
    assert rc == 4, err
    assert member in err and "SHA-256" in err and len(err.strip().splitlines()) == 1


def test_raw_byte_flip_in_the_file_is_refused(small_artifact, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src, _ = small_artifact
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        info = z.getinfo("weights.bin")
    data[info.header_offset + 30 + len(info.filename) + 4] ^= 0x80  # inside the stored weights
    bad = tmp_path / "raw.lmnl"
    bad.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        luminal.load(bad)


def test_tampered_library_is_never_loaded(small_artifact, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Swap in a library whose constructor would leave a mark: the hash check must
    refuse it before dlopen runs any of its code."""
    src, _ = small_artifact
    marker = tmp_path / "constructor-ran"
    c = tmp_path / "evil.c"
    c.write_text(
        f'#include <stdio.h>\n__attribute__((constructor)) static void f(void) {{ FILE *o = fopen("{marker}", "w"); if (o) fclose(o); }}\nint lum_abi_version(void) {{ return 1; }}\n'
    )
    evil = tmp_path / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(c), "-o", str(evil)], check=True)
    bad = tmp_path / "evil.lmnl"
    _rewrite(src, bad, lambda name, data: evil.read_bytes() if name == "model.so" else data)
    with pytest.raises(IntegrityError, match=r"model\.so"):
        luminal.load(bad)
    assert not marker.exists()


def test_artifact_for_missing_cpu_features_is_refused(small_artifact, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src, _ = small_artifact
    art = read_artifact(src)
    target = art.manifest.target
    manifest = replace(
        art.manifest,
        target={**target, "cpu_features": [*target["cpu_features"], "amx_tile_from_the_future"]},
    )
    other = tmp_path / "other.lmnl"
    write_artifact(other, manifest, art.members)
    with pytest.raises(ArtifactIncompatible, match="amx_tile_from_the_future"):
        luminal.load(other)


def test_not_an_artifact(tmp_path) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.lmnl"
    junk.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(IntegrityError):
        luminal.load(junk)


def test_session_is_thread_safe(small_artifact) -> None:  # type: ignore[no-untyped-def]
    src, _ = small_artifact
    session = luminal.load(src)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(8)]
    expected = [session.run({"in0": x})["out0"] for x in inputs]
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        for _ in range(50):
            results[k] = session.run({"in0": inputs[k]})["out0"]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(8):
        np.testing.assert_array_equal(results[k], expected[k])


def test_runtime_input_checks(small_artifact) -> None:  # type: ignore[no-untyped-def]
    src, _ = small_artifact
    session = luminal.load(src)
    with pytest.raises(UsageError, match="missing input 'in0'"):
        session.run({})
    with pytest.raises(UsageError, match="shape"):
        session.run({"in0": np.zeros((2, 8), np.float32)})


def test_out_of_range_gather_is_an_error_not_a_crash(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from luminal.compiler.pipeline import compile_model

    model = node_model(
        "Gather", [np.ones((4, 3), np.float32), np.array([0, 1], np.int64)], {"axis": 0}
    )
    path = tmp_path / "g.onnx"
    onnx.save(model, path)
    out = tmp_path / "g.lmnl"
    compile_model(load_onnx(path), out)
    session = luminal.load(out)
    ok = session.run({"in0": np.ones((4, 3), np.float32), "in1": np.array([3, -1], np.int64)})[
        "out0"
    ]
    assert ok.shape == (2, 3)
    with pytest.raises(UsageError, match="out of range"):
        session.run({"in0": np.ones((4, 3), np.float32), "in1": np.array([4, 99999999], np.int64)})


def test_unsupported_dtype_names_the_op_and_leaves_no_artifact(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # f16 and bf16 compute through f32; a direct f64 -> bf16 cast is still refused
    model = node_model("Cast", [np.ones((2, 3), np.float64)], {"to": onnx.TensorProto.BFLOAT16})
    path = tmp_path / "half.onnx"
    onnx.save(model, path)
    out = tmp_path / "half.lmnl"
    rc, _, err = cli("compile", path, "-o", out)
    assert rc == 6, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "op cast" in errors[0] and "bf16" in errors[0]
    assert "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".half.lmnl*"))


def test_run_compiles_a_model_file_on_the_fly(suite_onnx, cli) -> None:  # type: ignore[no-untyped-def]
    path, _ = suite_onnx("mlp")
    rc, out, err = cli("run", path, "--compare", "onnxruntime", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["engine"] == "compiled" and data["parity"]["ok"]


@pytest.mark.parametrize(
    "name",
    # the transformers through the torch frontend run in the slow suite; by default they
    # are covered through ONNX here and through torch.compile in tests/integrations
    ["mlp", "cnn", *(pytest.param(n, marks=pytest.mark.slow) for n in ("encoder", "gpt"))],
)
def test_suite_model_compiles_from_pytorch_and_matches_onnxruntime(
    name, suite_onnx, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.models import build
    from luminal.compiler.frontend.torch import from_module
    from luminal.compiler.pipeline import compile_model

    path, feeds = suite_onnx(name)
    suite = build(name)
    model = from_module(
        suite.module,
        suite.example_inputs,
        input_names=suite.input_names,
        output_names=suite.output_names,
    )
    out = tmp_path / f"{name}.lmnl"
    compile_model(model, out)
    got = luminal.load(out).run(feeds)
    parity = compare(got, _ort(path, feeds), Tolerance(1e-4, 1e-5))
    assert parity.ok, parity.to_json()


def test_pt2_file_compiles_and_runs_against_torch(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import torch

    from benchmarks.models import build, example_feeds

    suite = build("mlp")
    pt2 = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(suite.module, suite.example_inputs), pt2)
    out = tmp_path / "mlp.lmnl"
    rc, _, err = cli("compile", pt2, "-o", out)
    assert rc == 0, err
    np.save(tmp_path / "x.npy", example_feeds(suite)["x"])
    rc, stdout, err = cli(
        "run", out, "--input", f"input={tmp_path / 'x.npy'}", "--compare", "torch"
    )
    assert rc == 0, err
    assert "parity vs torch: OK" in stdout


def test_compile_needs_a_license_but_running_an_artifact_does_not(
    small_artifact, suite_onnx, cli, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LUMINAL_HOME", str(tmp_path / "unlicensed"))
    path, _ = suite_onnx("mlp")
    out = tmp_path / "mlp.lmnl"
    rc, _, err = cli("compile", path, "-o", out)
    assert rc == 3 and "no license installed" in err and not out.exists()
    artifact, feeds = small_artifact
    np.save(tmp_path / "x.npy", feeds["in0"])
    # another home: the artifact's signer is not trusted here (tests/compiler/test_artifact_trust.py)
    rc, _, err = cli("run", artifact, "--input", f"in0={tmp_path / 'x.npy'}", "--trust-unsigned")
    assert rc == 0, err
