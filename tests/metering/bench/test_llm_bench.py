"""`luminal bench --scenario llm`: a decoder artifact against transformers `generate`, the
tokens checked equal, both phases timed, in a signed report that verifies offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.llm_models import build
from luminal.metering.report import read

QUICK = (
    *("--duration", "0.3", "--max-duration", "1", "--min-runs", "3", "--min-blocks", "3"),
    *("--input-sets", "2", "--prompt", "6", "--new-tokens", "8"),
)


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from luminal.compiler.llm.decoder import compile_decoder

    root = tmp_path_factory.mktemp("llm-bench")
    model = build("gpt2")
    model.save_pretrained(root / "gpt2")
    art = root / "gpt2.lmnl"
    compile_decoder(model, art, batch=2, prompt_lengths=(8,), capacities=(16,))
    return art, root / "gpt2"


def test_llm_bench_report_has_both_phases_and_verifies(cli, decoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    art, model_dir = decoder
    out = tmp_path / "llm.report.json"
    rc, stdout, err = cli(
        "bench", art, "--scenario", "llm", "-b", "torch", "--model", model_dir, "-o", out, *QUICK
    )
    assert rc in (0, 5), err  # 5: INVALID, a too-short timed phase on a shared machine
    assert "llm (batch 2)" in stdout and "time to first token" in stdout
    _, statement = read(out)
    p = statement["predicate"]
    # parity is token-for-token equality with transformers on every input set
    (tokens,) = p["parity"]["outputs"]
    assert tokens["name"] == "tokens" and tokens["ok"] and tokens["max_abs"] == 0
    gen = p["scenarios"]["llm"]["generation"]
    for arm in ("baseline", "luminal"):
        assert len(gen[arm]["ttft_ns"]) == 5 and all(len(s) == 7 for s in gen[arm]["step_ns"])
    derived = p["results"]["scenarios"]["llm"]["generation"]
    assert derived["luminal"]["decode_tokens_per_s"] > 0 and derived["decode_speedup"] > 0
    assert p["baseline"]["name"] == "transformers-generate"
    names = [s["name"] for s in statement["subject"]]
    assert names[:3] == [
        "artifact:gpt2.lmnl",
        "artifact:gpt2.lmnl:prefill-8.lmnl",
        "artifact:gpt2.lmnl:step-16.lmnl",
    ]
    rc, stdout, err = cli("report", "verify", out)
    assert rc == 0 and "OK" in stdout, err


def test_llm_bench_against_onnx_runtime_with_past_key_values(cli, decoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.llm_baselines import export_onnx

    art, _ = decoder
    onnx_path = export_onnx(build("gpt2"), tmp_path / "onnx")
    out = tmp_path / "ort.report.json"
    rc, _, err = cli(
        "bench",
        art,
        "--scenario",
        "llm",
        "-b",
        "onnxruntime",
        "--model",
        onnx_path,
        "-o",
        out,
        *QUICK,
    )
    assert rc in (0, 5), err
    _, statement = read(out)
    p = statement["predicate"]
    (tokens,) = p["parity"]["outputs"]
    assert tokens["ok"] and tokens["max_abs"] == 0  # ORT's greedy tokens are luminal's
    assert p["baseline"]["name"] == "onnxruntime-generate"
    assert p["baseline"]["info"]["intra_op_num_threads"] == p["conditions"]["threads"]
    assert p["results"]["scenarios"]["llm"]["generation"]["baseline"]["runs"] == 5


def test_llm_bench_usage_errors(cli, decoder) -> None:  # type: ignore[no-untyped-def]
    art, model_dir = decoder
    rc, _, err = cli("bench", art, "--scenario", "llm", "-b", "torch")
    assert rc == 2 and "--model DIR" in err
    rc, _, err = cli("bench", art, "--scenario", "llm", "-b", "tvm", "--model", model_dir)
    assert rc == 2 and "has no generation arm" in err
    rc, _, err = cli(
        "bench", art, "--scenario", "llm", "-b", "torch", "--model", model_dir, "--prompt", "9"
    )
    assert rc == 2 and "prompt 0 has 9 tokens" in err
