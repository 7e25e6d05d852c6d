"""Decoder artifacts against `transformers`: greedy generation token for token, sampling,
EOS, bucket choice, the KV cache's transfer layout, and refusals of edited files."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.llm_models import build
from luminal.compiler.llm.cache import KVCache
from luminal.compiler.llm.decoder import (
    PLAN,
    DecoderSession,
    compile_decoder,
    load_decoder,
)
from luminal.compiler.llm.sampling import Sampling
from luminal.errors import IntegrityError, UsageError

NEW = 64
LENGTHS = (5, 11, 17)


def _prompts(seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1000, n).tolist() for n in LENGTHS]


def _reference(model: torch.nn.Module, prompt: list[int], new: int) -> list[int]:
    """`transformers` greedy generation of one prompt (batch 1, no padding)."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


#: gpt2 in the default suite; llama (RoPE, RMSNorm, grouped KV heads, ~12 s) in `make slow`.
@pytest.fixture(scope="module", params=["gpt2", pytest.param("llama", marks=pytest.mark.slow)])
def compiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    model = build(request.param)
    path = tmp_path_factory.mktemp("decoder") / f"{request.param}.lmnl"
    # two step buckets: 17 + 64 tokens cross from the 64-position step to the 128 one
    compile_decoder(model, path, batch=3, prompt_lengths=(8, 32), capacities=(64, 128))
    return model, path


def test_greedy_generation_equals_transformers_token_for_token(compiled) -> None:  # type: ignore[no-untyped-def]
    model, path = compiled
    session = load_decoder(path)
    prompts = _prompts()
    got = session.generate(prompts, NEW)
    for prompt, tokens in zip(prompts, got.tokens, strict=True):
        assert list(tokens) == _reference(model, prompt, NEW)
    assert got.prompt_bucket == 32
    assert got.steps_by_capacity == {64: 64 - 17, 128: NEW - 1 - (64 - 17)}
    # fewer prompts than the batch, short enough for the small prefill bucket
    one = session.generate([prompts[0]], 20)
    assert one.prompt_bucket == 8
    assert list(one.tokens[0]) == _reference(model, prompts[0], 20)


def test_sampling_is_seeded_and_top_1_is_greedy(compiled) -> None:  # type: ignore[no-untyped-def]
    _, path = compiled
    session = load_decoder(path)
    prompts = _prompts(2)
    a = session.generate(prompts, 12, Sampling(temperature=1.5, top_k=50, seed=7))
    b = session.generate(prompts, 12, Sampling(temperature=1.5, top_k=50, seed=7))
    c = session.generate(prompts, 12, Sampling(temperature=1.5, top_k=50, seed=8))
    assert a.tokens == b.tokens != c.tokens
    greedy = session.generate(prompts, 12)
    assert (
        session.generate(prompts, 12, Sampling(temperature=1.0, top_k=1, seed=3)).tokens
        == greedy.tokens
    )


def test_eos_ends_a_sequence_and_the_others_go_on(compiled) -> None:  # type: ignore[no-untyped-def]
    _, path = compiled
    session = load_decoder(path)
    prompts = _prompts()
    free = session.generate(prompts, 16)
    eos = free.tokens[1][5]
    stopped = session.generate(prompts, 16, eos_token_id=eos)
    first = free.tokens[1].index(eos)
    assert stopped.tokens[1] == free.tokens[1][: first + 1]
    for b in (0, 2):
        want = free.tokens[b]
        cut = want.index(eos) + 1 if eos in want else len(want)
        assert stopped.tokens[b] == want[:cut]


def test_bad_requests_are_one_line_usage_errors(compiled) -> None:  # type: ignore[no-untyped-def]
    _, path = compiled
    session: DecoderSession = load_decoder(path)
    with pytest.raises(UsageError, match="4 prompts; this artifact runs 1 to 3"):
        session.generate([[1]] * 4, 4)
    with pytest.raises(UsageError, match="prompt 0 has 33 tokens"):
        session.generate([[1] * 33], 4)
    with pytest.raises(UsageError, match="token id 1000 outside the vocabulary"):
        session.generate([[1, 1000]], 4)
    with pytest.raises(UsageError, match="needs 131 cache positions; this artifact holds 128"):
        session.generate([[1] * 32], 100)
    with pytest.raises(UsageError, match="temperature"):
        Sampling(temperature=-1)


def _rewrite(src: Path, dst: Path, edit) -> None:  # type: ignore[no-untyped-def]
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for name in z.namelist():
            out.writestr(name, edit(name, z.read(name)))


def test_an_edited_plan_or_member_is_refused(compiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, path = compiled

    def plan_edit(name: str, data: bytes) -> bytes:
        if name != PLAN:
            return data
        record = json.loads(data)
        record["plan"]["capacities"] = [64, 256]
        return json.dumps(record).encode()

    edited = tmp_path / "plan.lmnl"
    _rewrite(path, edited, plan_edit)
    with pytest.raises(IntegrityError, match="altered after it was built"):
        load_decoder(edited)

    def member_edit(name: str, data: bytes) -> bytes:
        return data[:-1] + bytes([data[-1] ^ 1]) if name == "step-64.lmnl" else data

    damaged = tmp_path / "member.lmnl"
    _rewrite(path, damaged, member_edit)
    with pytest.raises(IntegrityError, match=r"member step-64\.lmnl was altered"):
        load_decoder(damaged)
    (tmp_path / "junk.lmnl").write_bytes(b"not a zip")
    with pytest.raises(IntegrityError, match="damaged decoder artifact"):
        load_decoder(tmp_path / "junk.lmnl")


def test_kv_blocks_round_trip_into_another_capacity() -> None:
    rng = np.random.default_rng(0)
    cache = KVCache(layers=2, batch=3, kv_heads=2, head_dim=4, capacity=16)
    for a in cache.arrays:
        a[...] = rng.standard_normal(a.shape)
    cache.lengths = np.array([3, 0, 9])
    data = cache.to_blocks()
    moved = KVCache.from_blocks(data, capacity=12)
    assert moved.lengths.tolist() == [3, 0, 9]
    for a, b in zip(cache.arrays, moved.arrays, strict=True):
        for s, n in enumerate([3, 0, 9]):
            np.testing.assert_array_equal(a[:n, s], b[:n, s])
            assert not b[n:, s].any()
    # per sequence, layer, K/V, head: one contiguous [length, head_dim] block
    header = 4 + int.from_bytes(data[:4], "little")
    first = np.frombuffer(data, "<f4", 3 * 4, header).reshape(3, 4)
    np.testing.assert_array_equal(first, cache.arrays[0][:3, 0, 0])
    with pytest.raises(IntegrityError, match="expected"):
        KVCache.from_blocks(data[:-4], capacity=12)
    with pytest.raises(IntegrityError, match="not a KV cache transfer"):
        KVCache.from_blocks(b"\x05\x00\x00\x00junk!", capacity=12)
    with pytest.raises(UsageError, match="exceeds capacity 8"):
        KVCache.from_blocks(data, capacity=8)
