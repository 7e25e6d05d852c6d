"""The LLM baseline on ONNX Runtime: a decoder exported with past key/values, run one
token a step with `present` fed back as `past`, as users serve such an export.

The export's interface is read from its names (the `transformers`/optimum conventions):

    inputs   input_ids [batch, seq]; attention_mask [batch, past + seq] and position_ids
             [batch, seq] when present; per layer past K and V [batch, kv_heads, past,
             head_dim], named `past_key_values.L.key|value` or `past_key|value_L`
    outputs  logits [batch, seq, vocab] first; per layer present K and V, named
             `present.L.key|value` or `present_key|value_L`

`open_ort_generate(path, threads, new_tokens)` returns an `OrtGenerateRunner` with the
interface of `transformers_generate.GenerateRunner`: a call generates `new_tokens` greedy
tokens per row of `input_ids` (no EOS stop); `timed` also returns the time to first token
and every later step, and `generate(prompts)` takes prompts of different lengths,
left-padded, positions counting real tokens only (padded slots get 1, as `transformers`
does).  ONNX Runtime runs with every optimization, the CPU provider and
`threads` intra-op threads.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import numpy as np

from luminal.errors import UsageError
from luminal.references.baselines.base import Feeds, Outputs
from luminal.references.baselines.transformers_generate import StepTimes, left_pad

__all__ = ["OrtGenerateRunner", "open_ort_generate"]

_PAST = re.compile(r"past(?:_key_values)?[._]?(?:(\d+)[._](key|value)|(key|value)[._](\d+))$")
_PRESENT = re.compile(r"present[._]?(?:(\d+)[._](key|value)|(key|value)[._](\d+))$")


def _layer_kind(m: re.Match[str]) -> tuple[int, str]:
    layer, kind = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
    return int(layer), kind


def _ordered(names: list[str], pattern: re.Pattern[str], what: str, path: Path) -> list[str]:
    found = {}
    for n in names:
        m = pattern.search(n)
        if m:
            found[_layer_kind(m)] = n
    layers = len(found) // 2
    want = [(lay, kind) for lay in range(layers) for kind in ("key", "value")]
    if not found or sorted(found) != sorted(want):
        raise UsageError(
            f"{path}: no {what} key/value pairs per layer (e.g. past_key_values.0.key) found"
        )
    return [found[w] for w in want]


class OrtGenerateRunner:
    def __init__(self, path: Path, threads: int, new_tokens: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as err:  # ORT raises its own types; the first line says what
            raise UsageError(
                f"{path}: ONNX Runtime cannot load it: {str(err).splitlines()[0]}"
            ) from None
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = [o.name for o in self.session.get_outputs()]
        if "input_ids" not in inputs or not outputs or "logits" not in outputs[0]:
            raise UsageError(
                f"{path}: not a decoder export (expected input_ids in, logits out first)"
            )
        self.past = _ordered(list(inputs), _PAST, "past", path)
        self.present = _ordered(outputs, _PRESENT, "present", path)
        shape = inputs[self.past[0]].shape
        if len(shape) != 4 or not isinstance(shape[1], int) or not isinstance(shape[3], int):
            raise UsageError(f"{path}: {self.past[0]} is not [batch, kv_heads, past, head_dim]")
        self.kv_heads, self.head_dim = shape[1], shape[3]
        self.mask = "attention_mask" in inputs
        self.positions = "position_ids" in inputs
        self.outputs = [outputs[0], *self.present]
        self.new_tokens = new_tokens
        vocab = self.session.get_outputs()[0].shape[-1]
        self.vocab = vocab if isinstance(vocab, int) else None
        self.info = {
            "object": f"onnxruntime InferenceSession {path.name}",
            "mode": "greedy, present fed back as past",
            "providers": ["CPUExecutionProvider"],
            "intra_op_num_threads": threads,
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "new_tokens": new_tokens,
        }

    def __call__(self, feeds: Feeds) -> Outputs:
        ids = np.asarray(feeds["input_ids"], np.int64)
        return {"tokens": self._generate(ids, np.ones_like(ids), None)}

    def timed(self, input_ids: np.ndarray) -> tuple[np.ndarray, StepTimes]:
        ids = np.asarray(input_ids, np.int64)
        return self._timed(ids, np.ones_like(ids))

    def generate(self, prompts: list[list[int]]) -> tuple[np.ndarray, StepTimes]:
        """Prompts of any lengths, left-padded: the tokens and their times."""
        return self._timed(*left_pad(prompts, 0))

    def _timed(self, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, StepTimes]:
        marks: list[float] = []
        t0 = time.perf_counter()
        tokens = self._generate(ids, mask, marks)
        steps = tuple(b - a for a, b in itertools.pairwise(marks))
        return tokens, StepTimes(marks[0] - t0, steps)

    def _generate(self, ids: np.ndarray, mask: np.ndarray, marks: list[float] | None) -> np.ndarray:
        batch = ids.shape[0]
        feeds: dict[str, np.ndarray] = {
            n: np.zeros((batch, self.kv_heads, 0, self.head_dim), np.float32) for n in self.past
        }
        positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1).astype(np.int64)
        out = np.empty((batch, self.new_tokens), np.int64)
        for step in range(self.new_tokens):
            feeds["input_ids"] = ids
            if self.mask:
                feeds["attention_mask"] = mask
            if self.positions:
                feeds["position_ids"] = positions
            logits, *present = self.session.run(self.outputs, feeds)
            token = logits[:, -1, :].argmax(-1).astype(np.int64)
            out[:, step] = token
            if marks is not None:
                marks.append(time.perf_counter())
            feeds.update(zip(self.past, present, strict=True))
            ids = token[:, None]
            positions = positions[:, -1:] + 1
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1)
        return out


def open_ort_generate(path: Path, threads: int, new_tokens: int) -> OrtGenerateRunner:
    if not path.is_file():
        raise UsageError(f"--model {path}: no such file")
    return OrtGenerateRunner(path, threads, new_tokens)
