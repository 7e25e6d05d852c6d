"""The generation baselines produce HF greedy tokens exactly: torch eager and ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import llm_models  # before transformers (torchvision shim)
from benchmarks.llm_baselines import (
    GenerationTiming,
    export_onnx,
    main,
    ort_generate,
    reference_generate,
    torch_generate,
)

LENGTHS = (5, 11, 17)


@pytest.fixture(scope="module", params=llm_models.NAMES)
def decoder(request, tmp_path_factory):
    model = llm_models.build(request.param)
    path = export_onnx(model, tmp_path_factory.mktemp(request.param), request.param)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 1000, n).tolist() for n in LENGTHS]
    return model, path, prompts


def _check(decoder, new: int) -> None:
    model, path, prompts = decoder
    for prompt in prompts:
        expected = reference_generate(model, prompt, new)
        assert len(expected) == new
        assert torch_generate(model, [prompt], new, threads=1).tokens == [expected]
        assert ort_generate(path, [prompt], new, threads=1).tokens == [expected]


def test_both_arms_equal_hf_greedy_per_prompt(decoder):
    _check(decoder, 16)


@pytest.mark.slow
def test_both_arms_equal_hf_greedy_per_prompt_64(decoder):
    _check(decoder, 64)


def test_left_padded_batch_equals_per_prompt(decoder):
    model, path, prompts = decoder
    expected = [reference_generate(model, p, 16) for p in prompts]
    assert torch_generate(model, prompts, 16, threads=1).tokens == expected
    assert ort_generate(path, prompts, 16, threads=1).tokens == expected


def test_timing_records_one_ttft_and_a_step_per_later_token(decoder):
    model, path, prompts = decoder
    for timing in (torch_generate(model, prompts[:2], 6), ort_generate(path, prompts[:2], 6)):
        assert len(timing.step_s) == 5 and all(s > 0 for s in timing.step_s)
        assert timing.ttft_s > 0 and len(timing.tokens) == 2


def test_export_leaves_the_model_in_eval_mode(decoder):
    model, _, _ = decoder
    assert not model.training  # the exporter restores its wrapper's flag on the way out


def test_generation_timing_properties():
    t = GenerationTiming("x", [[1, 2, 3], [4, 5, 6]], ttft_s=0.5, step_s=[0.25, 0.75])
    assert t.decode_tokens_per_s == pytest.approx(4.0)
    assert t.e2e_s == pytest.approx(1.5)


def test_main_prints_a_markdown_table(capsys):
    assert main(["--models", "llama", "--prompt", "4", "--new", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| model | arm | TTFT ms | decode tok/s | e2e ms |" in out
    assert "| llama | torch |" in out and "| llama | ort |" in out
    assert "differ" not in out
