"""A gather whose index is the same along the innermost output loop (an embedding lookup)
reads and bounds-checks the index once per row, before that loop, which is then a plain
copy (`codegen._KernelWriter._gather_rows`); a gather whose index moves with the innermost
loop keeps the lookup per element.  Against ONNX Runtime, and an out-of-range index is
still the run's error."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

import luminal
from luminal.compiler.backends.cpu import codegen, toolchain
from luminal.compiler.frontend.onnx import load
from luminal.compiler.hardware import detect_cpu
from luminal.compiler.pipeline import compile_model
from luminal.compiler.schedule import schedule
from luminal.errors import UsageError
from luminal.references.oracle import run_oracle
from tests.helpers.onnx_cases import chain_model

_CHECK = re.compile(r"^( *)if \((g\d+) < 0 \|\| \2 >= \d+\)", re.M)


def _source(path) -> str:  # type: ignore[no-untyped-def]
    _, features = toolchain.feature_flags(detect_cpu())
    return codegen.generate(schedule(load(path).graph), codegen.options_for(features, True))


def _hoisted(source: str) -> list[bool]:
    """Per gather bounds check: whether a loop opens after it at its own depth (the row's
    loop, so the check runs once per row) before that depth closes."""
    lines = source.splitlines()
    out = []
    for n, line in enumerate(lines):
        m = _CHECK.match(line)
        if m is None:
            continue
        depth, found = len(m.group(1)), False
        for after in lines[n + 1 :]:
            indent = len(after) - len(after.lstrip())
            if indent < depth:
                break
            if indent == depth and after.lstrip().startswith("for ("):
                found = True
                break
        out.append(found)
    return out


def _embedding(tmp_path, vocab: int = 50, dim: int = 96):  # type: ignore[no-untyped-def]
    """Token embedding plus position embedding, as BERT and GPT-2 export them (the
    positions fed, so that their lookup is not folded into a constant)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Gather", ["wte", "ids"], ["tok"], axis=0),
        helper.make_node("Gather", ["wpe", "pos"], ["p"], axis=0),
        helper.make_node("Add", ["tok", "p"], ["out0"]),
    ]
    model = chain_model(
        nodes,
        {"ids": np.zeros((2, 7), np.int64), "pos": np.zeros((1, 7), np.int64)},
        ["out0"],
        consts={
            "wte": rng.standard_normal((vocab, dim)).astype(np.float32),
            "wpe": rng.standard_normal((7, dim)).astype(np.float32),
        },
    )
    path = tmp_path / "embed.onnx"
    onnx.save(model, path)
    return path


def test_embedding_rows_look_up_each_index_once_and_match_onnxruntime(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _embedding(tmp_path)
    hoisted = _hoisted(_source(path))
    assert len(hoisted) == 2 and all(hoisted), hoisted  # the token's and the position's
    feeds = {
        "ids": np.array([[0, 3, 49, -1, -50, 7, 7], [1, 2, 3, 4, 5, 6, 48]], np.int64),
        "pos": np.array([[6, 5, 4, 3, 2, 1, 0]], np.int64),
    }
    out = tmp_path / "embed.lmnl"
    compile_model(load(path), out)
    got = luminal.load(out).run(feeds)["out0"]
    want = run_oracle("onnxruntime", path, feeds)["out0"]
    np.testing.assert_array_equal(got, want)


def test_an_out_of_range_index_looked_up_per_row_is_still_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _embedding(tmp_path)
    out = tmp_path / "embed.lmnl"
    compile_model(load(path), out)
    session = luminal.load(out)
    ids = np.zeros((2, 7), np.int64)
    ids[1, 4] = 50
    with pytest.raises(UsageError, match="out of range"):
        session.run({"ids": ids, "pos": np.zeros((1, 7), np.int64)})


def test_an_index_that_moves_along_the_row_is_looked_up_per_element(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    data = rng.standard_normal((6, 40)).astype(np.float32)
    idx = rng.integers(-40, 40, size=(24,)).astype(np.int64)
    model = chain_model(
        [helper.make_node("Gather", ["data", "idx"], ["out0"], axis=1)],
        {"data": data},
        ["out0"],
        consts={"idx": idx},
    )
    path = tmp_path / "cols.onnx"
    onnx.save(model, path)
    hoisted = _hoisted(_source(path))
    assert hoisted and not any(hoisted), hoisted
    out = tmp_path / "cols.lmnl"
    compile_model(load(path), out)
    got = luminal.load(out).run({"data": data})["out0"]
    np.testing.assert_array_equal(got, run_oracle("onnxruntime", path, {"data": data})["out0"])
