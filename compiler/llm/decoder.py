"""A decoder artifact: prefill and decode-step graphs in one signed file, and the session
that generates with them.

    compile_decoder(hf_model, out.lmnl, batch=3, prompt_lengths=(32,), capacities=(128,))
    session = load_decoder(out.lmnl)
    session.generate([[1, 2, 3], [4, 5]], max_new_tokens=64)      # -> Generation

The file is a zip of whole signed artifacts, one per graph (`prefill-P.lmnl` for each
padded prompt length P, `step-C.lmnl` for each cache capacity C; each compiled through
`compile_model`, so the license gate, the search and the reference check apply), and
`decoder.json`, the typed `DecoderPlan` with every member's SHA-256, signed by this
install's artifact key (`decoder.sig`).  Loading verifies that signature, the members'
digests, each inner artifact, and that each graph's inputs are the plan's shapes.

Generation: the prompts (right-padded into the smallest prompt bucket holding the
longest) run once through a prefill, whose K/V fill the session's `KVCache`; then each
step runs the smallest capacity bucket holding every sequence's cache (so a step's cost
grows with the cached length only through attention over its bucket), and the new K/V
rows are written into the cache in place.
"""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal.compiler.artifact import Manifest, read_artifact_bytes, sha256
from luminal.compiler.artifact.signing import Signer, verify
from luminal.compiler.artifact.trust import TrustStore
from luminal.compiler.llm.cache import KVCache
from luminal.compiler.llm.config import Arch, DecoderConfig, config_of
from luminal.compiler.llm.sampling import Sampling
from luminal.compiler.options import CompileOptions
from luminal.compiler.runtime.session import METERED, Session, open_artifact
from luminal.errors import IntegrityError, UsageError
from luminal.licensing.home import write_atomic
from luminal.metering.usage.meter import MeterConfig

__all__ = [
    "DecoderBuild",
    "DecoderPlan",
    "DecoderSession",
    "Generation",
    "compile_decoder",
    "load_decoder",
]

FORMAT = "luminal-decoder/1"
PLAN, SIGNATURE = "decoder.json", "decoder.sig"
_MAX_BUCKETS = 16


@dataclass(frozen=True)
class DecoderPlan:
    config: DecoderConfig
    batch: int
    prompt_lengths: tuple[int, ...]  # prefill buckets, ascending
    capacities: tuple[int, ...]  # decode-step buckets, ascending; the last is the cache's

    def __post_init__(self) -> None:
        for name, xs in (("prompt lengths", self.prompt_lengths), ("capacities", self.capacities)):
            if not xs or len(xs) > _MAX_BUCKETS or list(xs) != sorted(set(xs)) or xs[0] < 1:
                raise UsageError(
                    f"{name} must be 1 to {_MAX_BUCKETS} ascending positive sizes, got {list(xs)}"
                )
        if self.batch < 1 or self.batch > 256:
            raise UsageError(f"batch must be 1..256, got {self.batch}")
        if self.prompt_lengths[-1] > self.capacities[-1]:
            raise UsageError(
                f"the longest prompt bucket ({self.prompt_lengths[-1]}) exceeds the cache capacity ({self.capacities[-1]})"
            )
        if self.capacities[-1] >= self.config.max_positions + 1:
            raise UsageError(
                f"capacity {self.capacities[-1]} exceeds the model's {self.config.max_positions} positions"
            )

    @property
    def capacity(self) -> int:
        return self.capacities[-1]

    def members(self) -> list[str]:
        return [f"prefill-{p}.lmnl" for p in self.prompt_lengths] + [
            f"step-{c}.lmnl" for c in self.capacities
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config.to_json(),
            "batch": self.batch,
            "prompt_lengths": list(self.prompt_lengths),
            "capacities": list(self.capacities),
        }

    @staticmethod
    def from_json(data: Any, where: str) -> DecoderPlan:
        try:
            c = data["config"]
            eos = c["eos_token_id"]
            config = DecoderConfig(
                Arch(c["arch"]),
                *(
                    _int(c[k])
                    for k in (
                        "layers",
                        "heads",
                        "kv_heads",
                        "head_dim",
                        "hidden",
                        "vocab",
                        "max_positions",
                    )
                ),
                None if eos is None else _int(eos),
            )
            if min(
                config.layers, config.heads, config.kv_heads, config.head_dim, config.vocab
            ) < 1 or (config.heads % config.kv_heads):
                raise ValueError("a non-positive or inconsistent model shape")
            return DecoderPlan(
                config,
                _int(data["batch"]),
                tuple(_int(x) for x in data["prompt_lengths"]),
                tuple(_int(x) for x in data["capacities"]),
            )
        except (KeyError, TypeError, ValueError, UsageError) as err:
            raise IntegrityError(f"{where}: {PLAN} is not a valid decoder plan ({err})") from None


def _int(x: object) -> int:
    if type(x) is not int:
        raise ValueError(f"expected an integer, got {x!r}")
    return x


@dataclass(frozen=True)
class DecoderBuild:
    path: Path
    plan: DecoderPlan
    seconds: dict[str, float]  # per member: its compile's wall time
    kernels: dict[str, int]  # per member


def _names(cfg: DecoderConfig) -> list[str]:
    return [f"{kv}{n}" for n in range(cfg.layers) for kv in "kv"]


def compile_decoder(
    model: Any,
    output: Path,
    *,
    batch: int = 1,
    prompt_lengths: Sequence[int] = (32, 128),
    capacities: Sequence[int] = (128, 512),
    options: CompileOptions | None = None,
    on_member: Callable[[str, int, int], None] | None = None,
) -> DecoderBuild:
    """Compile a Hugging Face decoder (`arch.config_of` says which) into one artifact.

    `options.budget_seconds` is the whole artifact's search budget, split evenly among
    its graphs; `on_member(name, n, total)` hears each graph's compile start."""
    import torch

    from luminal.compiler.frontend.torch import from_module
    from luminal.compiler.llm.arch import DecodeStep, Prefill
    from luminal.compiler.pipeline import compile_model

    cfg = config_of(model)
    plan = DecoderPlan(cfg, batch, tuple(prompt_lengths), tuple(capacities))
    names = _names(cfg)
    members: dict[str, bytes] = {}
    seconds: dict[str, float] = {}
    kernels: dict[str, int] = {}
    jobs: list[tuple[str, torch.nn.Module, tuple[Any, ...], list[str]]] = []
    for p in plan.prompt_lengths:
        example = (torch.zeros(batch, p, dtype=torch.long), torch.zeros(batch, dtype=torch.long))
        jobs.append((f"prefill-{p}.lmnl", Prefill(model, cfg, p), example, ["input_ids", "last"]))
    for c in plan.capacities:
        cache = tuple(torch.zeros(c, batch, cfg.kv_heads, cfg.head_dim) for _ in names)
        ids = torch.zeros(batch, dtype=torch.long)
        example = (ids, torch.ones(batch, dtype=torch.long), *cache)
        jobs.append(
            (
                f"step-{c}.lmnl",
                DecodeStep(model, cfg, c),
                example,
                ["input_ids", "position", *names],
            )
        )
    options = options or CompileOptions()
    if options.budget_seconds:
        options = dataclasses.replace(options, budget_seconds=options.budget_seconds / len(jobs))
    with tempfile.TemporaryDirectory(prefix="luminal-decoder-") as tmp:
        for n, (member, module, example, inputs) in enumerate(jobs):
            if on_member:
                on_member(member, n, len(jobs))
            t0 = time.perf_counter()
            loaded = from_module(
                module, example, input_names=inputs, output_names=["logits", *names]
            )
            result = compile_model(loaded, Path(tmp) / member, options)
            seconds[member] = time.perf_counter() - t0
            kernels[member] = result.kernels
            members[member] = (Path(tmp) / member).read_bytes()
    record = {
        "format": FORMAT,
        "plan": plan.to_json(),
        "members": {k: sha256(v) for k, v in members.items()},
    }
    text = json.dumps(record, indent=2, sort_keys=True).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(PLAN, text)
        z.writestr(SIGNATURE, Signer.for_install().sign(text))
        for name, data in members.items():
            z.writestr(name, data)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(output, buf.getvalue(), 0o644)
    return DecoderBuild(output, plan, seconds, kernels)


def is_decoder_artifact(path: Path) -> bool:
    """Whether `path` is a decoder artifact (a zip holding a decoder plan)."""
    try:
        with zipfile.ZipFile(path) as z:
            return PLAN in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


@dataclass(frozen=True)
class Generation:
    tokens: tuple[tuple[int, ...], ...]  # generated ids per prompt (prompt excluded)
    prompt_bucket: int
    ttft_s: float  # prefill and the first token's choice
    step_s: tuple[float, ...]  # each later token's step, wall time
    steps_by_capacity: dict[int, int] = field(default_factory=dict)

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + sum(self.step_s)

    def decode_tokens_per_s(self) -> float:
        """Tokens per second over the decode steps, counting every sequence's token."""
        total = sum(self.step_s)
        return len(self.tokens) * len(self.step_s) / total if total > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "tokens": [list(t) for t in self.tokens],
            "prompt_bucket": self.prompt_bucket,
            "ttft_ms": self.ttft_s * 1e3,
            "decode_tokens_per_s": self.decode_tokens_per_s(),
            "e2e_ms": self.e2e_s * 1e3,
            "steps_by_capacity": {str(k): v for k, v in self.steps_by_capacity.items()},
        }


@dataclass(frozen=True)
class Prefilled:
    """Generation after its first phase: what the decode steps continue from."""

    token: np.ndarray  # [batch] the first chosen token per row
    cache: KVCache  # filled with the prompts
    rng: np.random.Generator  # the sampler's state after the first choice
    ttft_s: float
    bucket: int  # the prompt bucket the prefill ran in
    count: int  # the prompts given (rows beyond are padding)


@dataclass(frozen=True)
class StepOutput:
    logits: np.ndarray  # [batch, vocab]
    rows: list[np.ndarray]  # per layer K then V: [batch, kv_heads, head_dim]
    capacity: int  # the step bucket it ran in


class DecoderSession:
    def __init__(
        self, path: Path, plan: DecoderPlan, graphs: dict[str, Session], digests: dict[str, str]
    ) -> None:
        self.path, self.plan, self.config = path, plan, plan.config
        self._digests = digests
        self._prefill = {p: graphs[f"prefill-{p}.lmnl"] for p in plan.prompt_lengths}
        self._step = {c: graphs[f"step-{c}.lmnl"] for c in plan.capacities}
        self._names = _names(plan.config)

    def new_cache(self) -> KVCache:
        c = self.config
        return KVCache(c.layers, self.plan.batch, c.kv_heads, c.head_dim, self.plan.capacity)

    def prefill(self, prompts: Sequence[Sequence[int]]) -> tuple[np.ndarray, KVCache, int]:
        """The last position's logits per sequence [batch, vocab], the filled cache and
        the prompt bucket used.  Rows beyond len(prompts) hold a one-token dummy."""
        plan = self.plan
        lengths = self._check_prompts(prompts)
        bucket = next(p for p in plan.prompt_lengths if p >= max(lengths))
        ids = np.zeros((plan.batch, bucket), np.int64)
        for b, prompt in enumerate(prompts):
            ids[b, : len(prompt)] = prompt
        full = lengths + [1] * (plan.batch - len(prompts))
        out = self._prefill[bucket].run({"input_ids": ids, "last": np.asarray(full, np.int64) - 1})
        cache = self.new_cache()
        cache.fill([out[n] for n in self._names], full)
        return out["logits"], cache, bucket

    def step_outputs(self, cache: KVCache, tokens: np.ndarray) -> StepOutput:
        """One decode step's outputs for `tokens` [batch] at the cache's lengths, in the
        smallest step bucket holding them; the cache is read, not changed."""
        need = int(cache.lengths.max())
        capacity = next((c for c in self.plan.capacities if c >= need + 1), None)
        if capacity is None:
            raise UsageError(f"the cache is full ({self.plan.capacity} positions)")
        feeds = {"input_ids": tokens.astype(np.int64), "position": cache.lengths.copy()}
        feeds.update(zip(self._names, cache.prefix(capacity), strict=True))
        out = self._step[capacity].run(feeds)
        return StepOutput(out["logits"], [out[n] for n in self._names], capacity)

    def step(self, cache: KVCache, tokens: np.ndarray) -> tuple[np.ndarray, int]:
        """One decode step: the next logits [batch, vocab] and the bucket it ran in; the
        new K/V rows are written into the cache."""
        out = self.step_outputs(cache, tokens)
        cache.append(out.rows)
        return out.logits, out.capacity

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        sampling: Sampling | None = None,
        eos_token_id: int | None = None,
    ) -> Generation:
        """Generate up to `max_new_tokens` per prompt.  A sequence that emits
        `eos_token_id` (None: never stop early) ends there; the others go on."""
        sampling = sampling or Sampling()
        return self.finish(
            self.begin(prompts, max_new_tokens, sampling), max_new_tokens, sampling, eos_token_id
        )

    def begin(
        self, prompts: Sequence[Sequence[int]], max_new_tokens: int, sampling: Sampling
    ) -> Prefilled:
        """The prefill and the first token: generation's first phase, which may run on
        another device than the rest (`llm.placement`)."""
        if max_new_tokens < 1:
            raise UsageError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        lengths = self._check_prompts(prompts)
        if max(lengths) + max_new_tokens - 1 > self.plan.capacity:
            raise UsageError(
                f"a prompt of {max(lengths)} tokens plus {max_new_tokens} new needs "
                f"{max(lengths) + max_new_tokens - 1} cache positions; this artifact holds {self.plan.capacity}"
            )
        rng = sampling.generator()
        t0 = time.perf_counter()
        logits, cache, bucket = self.prefill(prompts)
        token = sampling.choose(logits, rng)
        return Prefilled(token, cache, rng, time.perf_counter() - t0, bucket, len(prompts))

    def finish(
        self,
        start: Prefilled,
        max_new_tokens: int,
        sampling: Sampling,
        eos_token_id: int | None = None,
    ) -> Generation:
        """The decode steps after `begin`: up to `max_new_tokens` in all per prompt."""
        cache, rng, token = start.cache, start.rng, start.token
        out: list[list[int]] = [[int(token[b])] for b in range(start.count)]
        done = [eos_token_id is not None and t[0] == eos_token_id for t in out]
        steps: list[float] = []
        used: dict[int, int] = {}
        for _ in range(max_new_tokens - 1):
            if all(done):
                break
            t1 = time.perf_counter()
            logits, capacity = self.step(cache, token)
            token = sampling.choose(logits, rng)
            steps.append(time.perf_counter() - t1)
            used[capacity] = used.get(capacity, 0) + 1
            for b, seq in enumerate(out):
                if not done[b]:
                    seq.append(int(token[b]))
                    done[b] = eos_token_id is not None and int(token[b]) == eos_token_id
        return Generation(
            tuple(tuple(s) for s in out), start.bucket, start.ttft_s, tuple(steps), used
        )

    def _check_prompts(self, prompts: Sequence[Sequence[int]]) -> list[int]:
        plan = self.plan
        if not 1 <= len(prompts) <= plan.batch:
            raise UsageError(f"{len(prompts)} prompts; this artifact runs 1 to {plan.batch}")
        for n, prompt in enumerate(prompts):
            if not len(prompt):
                raise UsageError(f"prompt {n} is empty")
            if len(prompt) > plan.prompt_lengths[-1]:
                raise UsageError(
                    f"prompt {n} has {len(prompt)} tokens; the longest this artifact prefills is {plan.prompt_lengths[-1]}"
                )
            bad = [t for t in prompt if not 0 <= int(t) < plan.config.vocab]
            if bad:
                raise UsageError(
                    f"prompt {n}: token id {bad[0]} outside the vocabulary [0, {plan.config.vocab})"
                )
        return [len(p) for p in prompts]

    def manifest(self) -> Manifest:
        """The manifest of the full-capacity step graph: what the graphs were compiled for
        (all were compiled alike, by one `compile_decoder`)."""
        return self._step[self.plan.capacity].manifest

    def member_digests(self) -> dict[str, str]:
        """Each graph's artifact SHA-256 (how its usage is metered and reported)."""
        return dict(self._digests)

    def close(self) -> None:
        for s in [*self._prefill.values(), *self._step.values()]:
            s.close()


def read_plan(path: Path, store: TrustStore | None = None) -> DecoderPlan:
    """The verified plan of a decoder artifact, without opening its graphs."""
    plan, _, _ = _read(path, store, members=False)
    return plan


def load_decoder(
    path: Path, *, store: TrustStore | None = None, meter: MeterConfig | None = METERED
) -> DecoderSession:
    """Verify a decoder artifact (module docstring) and open its graphs."""
    plan, members, plan_digests = _read(path, store, members=True)
    graphs: dict[str, Session] = {}
    for member, data in members.items():
        where = f"{path}:{member}"
        # trusted through the signed plan, which lists this member's digest
        inner = read_artifact_bytes(data, where, trust_unsigned=True)
        _check_graph(plan, member, inner.manifest.inputs, where)
        graphs[member] = open_artifact(Path(where), inner, meter=meter)
    # the signed plan's digests, each checked against its member's bytes by _read
    return DecoderSession(path, plan, graphs, dict(plan_digests))


def _read(
    path: Path, store: TrustStore | None, members: bool
) -> tuple[DecoderPlan, dict[str, bytes], dict[str, str]]:
    """The signed plan, (with `members`) each graph's bytes, digests checked, and the
    plan's member digests."""
    where = str(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such artifact")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if PLAN not in names:
                raise UsageError(f"{path}: not a decoder artifact (no {PLAN})")
            text = z.read(PLAN)
            sig = z.read(SIGNATURE) if SIGNATURE in names else None
            verify(where, text, sig, store or TrustStore.load())
            try:
                record = json.loads(text)
            except ValueError as err:
                raise IntegrityError(f"{path}: {PLAN} is not JSON ({err})") from None
            if not isinstance(record, dict) or record.get("format") != FORMAT:
                raise IntegrityError(f"{path}: {PLAN} is not a {FORMAT} record")
            plan = DecoderPlan.from_json(record.get("plan"), where)
            digests = record.get("members")
            if not isinstance(digests, dict) or set(digests) != set(plan.members()):
                raise IntegrityError(f"{path}: {PLAN} lists other members than its plan's graphs")
            data: dict[str, bytes] = {}
            for member in plan.members() if members else ():
                if member not in names:
                    raise IntegrityError(f"{path}: member {member} is missing")
                data[member] = z.read(member)
                if sha256(data[member]) != digests[member]:
                    raise IntegrityError(f"{path}: member {member} was altered")
    except (OSError, zipfile.BadZipFile, KeyError) as err:
        raise IntegrityError(f"{path}: damaged decoder artifact ({err})") from None
    return plan, data, {str(k): str(v) for k, v in digests.items()}


def _check_graph(plan: DecoderPlan, member: str, inputs: Sequence[Any], where: str) -> None:
    c, b = plan.config, plan.batch
    size = int(member.split("-")[1].split(".")[0])
    if member.startswith("prefill-"):
        want = {"input_ids": (b, size), "last": (b,)}
    else:
        want = {"input_ids": (b,), "position": (b,)}
        want.update({n: (size, b, c.kv_heads, c.head_dim) for n in _names(c)})
    got = {s.name: tuple(s.shape) for s in inputs}
    if got != want:
        raise IntegrityError(f"{where}: its inputs {got} are not the plan's {want}")
