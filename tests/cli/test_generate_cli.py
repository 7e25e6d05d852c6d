"""`luminal compile DIR` on a Hugging Face decoder directory and `luminal generate`:
greedy tokens equal `transformers`, --json, and one-line errors with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from benchmarks.llm_models import build


def test_compile_a_model_dir_then_generate_equals_transformers(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = build("gpt2")
    model.save_pretrained(tmp_path / "gpt2")
    art = tmp_path / "gpt2.lmnl"
    code, out, err = cli(
        "compile", tmp_path / "gpt2", "-o", art, "--batch", "2",
        "--prompt-lengths", "16", "--capacities", "32", "--budget", "off", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decoder"]["capacities"] == [32] and set(doc["graphs"]) == {
        "prefill-16.lmnl",
        "step-32.lmnl",
    }
    prompts = [[5, 6, 7, 8], [9, 10]]
    want = []
    code, out, err = cli(
        "generate", art, "--prompt-ids", "5,6,7,8", "--prompt-ids", "9,10",
        "--max-new-tokens", "12", "--ignore-eos", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    for prompt, tokens in zip(prompts, doc["tokens"], strict=True):
        with torch.no_grad():
            ref = model.generate(
                torch.tensor([prompt]), max_new_tokens=12, min_new_tokens=12, do_sample=False
            )
        assert tokens == ref[0, len(prompt) :].tolist()
        want.append(tokens)
    assert doc["prompt_lengths"] == [4, 2] and doc["decode_tokens_per_s"] > 0

    code, out, _ = cli("generate", art, "--prompt-ids", "5,6", "--max-new-tokens", "3")
    assert code == 0 and out.startswith("prompt 0 (2 tokens): ") and "time to first token" in out
    code, _, err = cli("generate", art, "--prompt-ids", "5,x")
    assert (
        code == 2
        and err.strip() == "error: --prompt-ids #1 '5,x': expected token ids such as 1,2,3"
    )
    code, _, err = cli("generate", art, "--prompt-ids", "1", "--max-new-tokens", "40")
    assert code == 2 and "needs 40 cache positions; this artifact holds 32" in err

    # arbitrage for cost on one CPU: a device priced by its cores, the run's cost reported
    cpu = sorted(os.sched_getaffinity(0))[0]
    code, out, err = cli(
        "generate", art, "--prompt-ids", "5,6,7,8", "--prompt-ids", "9,10", "--max-new-tokens",
        "12", "--ignore-eos", "--cpus", str(cpu), "--objective", "cost", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["placement"]["objective"] == "cost" and doc["devices"][0]["price"] == 1.0
    assert doc["cost"] > 0 and doc["moved_bytes"] == 0
    assert doc["tokens"] == [list(t) for t in want]
    code, _, err = cli("generate", art, "--prompt-ids", "1", "--cpus", str(cpu), "--slack", "0.5")
    assert code == 2 and "--slack" in err


def test_a_directory_without_a_model_is_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "bert"}')
    code, _, err = cli("compile", tmp_path / "m", "--budget", "off")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: ")
    code, _, err = cli("generate", tmp_path / "none.lmnl", "--prompt-ids", "1")
    assert code == 2 and "no such artifact" in err
