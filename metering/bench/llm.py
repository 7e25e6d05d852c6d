"""`luminal bench --scenario llm`: a decoder artifact against `transformers` `generate`,
with the method of every other bench, into the same signed report.

    prepare     pin and set threads; verify and load the decoder artifact; load the
                Hugging Face model directory (`--model DIR`) as the baseline
    inputs      seeded prompts, `--prompt` token ids each (ids below the vocabulary),
                `batch` rows per call; the same sets for both arms
    execute     `run.execute` with the scenario `llm`: one call of an arm is one whole
                greedy generation of `--new-tokens` tokens (EOS ignored), its output
                `tokens [batch, new]` int64; parity is token-for-token equality on every
                input set; the interleaved measurement times end-to-end generations; the
                TEST01/TEST04 audits run on generations as on any model's calls
    phases      then, per arm, `PHASE_RUNS` more generations in alternation recording the
                time to first token and every decode step (luminal's `Generation`, the
                baseline's per-token logits-processor clock): raw lists in the report, and
                their medians in `results` (`results.derive`)

The headline speedup is the end-to-end one, the paired-block estimator's lower bound,
as for any scenario; time to first token and decode tokens per second are reported
beside it.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal.errors import UsageError
from luminal.licensing.terms import BillingTerms
from luminal.metering.bench import environment
from luminal.metering.bench.inputs import InputSets
from luminal.metering.bench.method import Clock, MethodSettings, Progress
from luminal.metering.bench.results import BASELINE, CANDIDATE
from luminal.metering.bench.run import (
    BenchRun,
    Scenario,
    artifact_subjects,
    execute,
    where_measured,
)
from luminal.references.baselines import versions

__all__ = ["LLM_BASELINES", "PHASE_RUNS", "LlmRequest", "run_llm_bench"]

SCENARIO = "llm"
#: `--baseline` values with a generation arm: transformers `generate` in torch eager on
#: the model's directory, ONNX Runtime on its export with past key/values
LLM_BASELINES = ("torch", "onnxruntime")
PHASE_RUNS = 5
FRESH_SETS = 8  # TEST04's fresh prompts: each run is a whole generation
_FRESH_SEED = 7919


@dataclass(frozen=True)
class LlmRequest:
    target: Path  # a decoder artifact
    model: Path  # torch: the Hugging Face model directory; onnxruntime: its export with past
    baseline: str = "torch"
    prompt: int = 32
    new_tokens: int = 64
    batch: int | None = None  # default: the artifact's
    seed: int = 0
    input_sets: int = 4
    threads: int | None = None
    cpus: tuple[int, ...] | None = None
    method: MethodSettings = field(default_factory=MethodSettings)
    terms: BillingTerms | None = None


def _prompts(batch: int, length: int, vocab: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(0, vocab, (batch, length), dtype=np.int64)}


def dir_sha256(path: Path) -> str:
    """A model directory's digest: every file's relative name and SHA-256, sorted."""
    h = hashlib.sha256(b"luminal-model-dir-v1\n")
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}\0".encode())
        with f.open("rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def run_llm_bench(
    req: LlmRequest, *, clock: Clock = time.perf_counter_ns, progress: Progress | None = None
) -> BenchRun:
    from luminal.compiler.artifact import file_sha256
    from luminal.compiler.llm.decoder import load_decoder
    from luminal.compiler.llm.sampling import Sampling
    from luminal.references.baselines.transformers_generate import open_generate

    if not req.target.is_file():
        raise UsageError(f"{req.target}: no such file")
    if req.baseline not in LLM_BASELINES:
        raise UsageError(
            f"--scenario llm: baseline '{req.baseline}' has no generation arm; choose from {', '.join(LLM_BASELINES)}"
        )
    if req.baseline == "torch" and not req.model.is_dir():
        raise UsageError(
            f"--model {req.model}: the torch baseline is the Hugging Face model directory the artifact was compiled from"
        )
    conditions = environment.apply(req.threads, req.cpus)
    load_start = environment.load_average()
    session = load_decoder(req.target, meter=None)
    plan = session.plan
    batch = req.batch or plan.batch
    if not 1 <= batch <= plan.batch:
        raise UsageError(f"--batch {batch}: the artifact runs 1 to {plan.batch} sequences")
    if req.prompt < 1 or req.new_tokens < 1:
        raise UsageError("--prompt and --new-tokens must be >= 1")
    session.begin([[0] * req.prompt] * batch, req.new_tokens, Sampling())  # a one-line error now
    if progress:
        progress("loading the baseline", 0.0, str(req.model))
    if req.baseline == "torch":
        runner: Any = open_generate(req.model, conditions.threads, req.new_tokens)
        vocab_of = runner.model.config.vocab_size
    else:
        from luminal.references.baselines.ort_generate import open_ort_generate

        runner = open_ort_generate(req.model, conditions.threads, req.new_tokens)
        vocab_of = runner.vocab
    if vocab_of not in (None, plan.config.vocab):
        raise UsageError(
            f"--model {req.model}: vocabulary {vocab_of}, the artifact's is {plan.config.vocab}"
        )
    vocab = plan.config.vocab

    def candidate(feeds: Any) -> dict[str, np.ndarray]:
        rows = [list(map(int, r)) for r in feeds["input_ids"]]
        return {"tokens": np.asarray(session.generate(rows, req.new_tokens).tokens, np.int64)}

    if req.input_sets < 1:
        raise UsageError(f"--input-sets must be >= 1, got {req.input_sets}")
    sets = InputSets(
        tuple(_prompts(batch, req.prompt, vocab, req.seed + k) for k in range(req.input_sets)),
        "seeded",
        seed=req.seed,
    )
    fresh = [_prompts(batch, req.prompt, vocab, _FRESH_SEED + k) for k in range(FRESH_SETS)]
    scenario = Scenario(SCENARIO, batch, runner, candidate, sets)
    data = execute([scenario], fresh, req.method, {}, clock=clock, progress=progress)
    data["scenarios"][SCENARIO]["generation"] = _phases(session, runner, sets, req, progress)
    data["scenarios"][SCENARIO]["llm"] = {"prompt": req.prompt, "new_tokens": req.new_tokens}
    data.update(where_measured(conditions, load_start))
    manifest = session.manifest()
    data["software"] = {
        **versions(),
        "compiler_version": manifest.compiler_version,
        "toolchain": manifest.target.get("toolchain"),
        "flags": manifest.target.get("flags"),
    }
    model_digest = dir_sha256(req.model) if req.model.is_dir() else file_sha256(req.model)
    data["baseline"] = {
        "name": "transformers-generate" if req.baseline == "torch" else "onnxruntime-generate",
        "model": str(req.model),
        "model_sha256": model_digest,
        "settings": {},
        "info": dict(runner.info),
    }
    inner = [(f"{req.target}:{name}", digest) for name, digest in session.member_digests().items()]
    data["candidate"] = {
        "name": "luminal",
        "artifacts": [str(req.target)],
        "artifact_digests": [
            {"path": str(req.target), "sha256": file_sha256(req.target), "scenario": SCENARIO},
            *({"path": p, "sha256": d, "scenario": SCENARIO} for p, d in inner),
        ],
        "manifest": {  # the full-capacity step graph's; every graph was compiled alike
            "compiler_version": manifest.compiler_version,
            "target": dict(manifest.target),
            "inputs": [{"name": t.name, "shape": list(t.shape)} for t in manifest.inputs],
        },
        "decoder": plan.to_json(),
        "compiled_here": False,
    }
    data["inputs"] = sets.describe()
    data["request"] = {
        "scenarios": [SCENARIO],
        "baseline": req.baseline,
        "prompt": req.prompt,
        "new_tokens": req.new_tokens,
        "batch": batch,
        "seed": req.seed,
        "input_sets": req.input_sets,
        "threads": req.threads,
        "cpus": list(req.cpus) if req.cpus else None,
    }
    data["license"] = req.terms.license.to_json() if req.terms else None
    data["pricing"] = req.terms.pricing_json() if req.terms else None
    # every graph's digest is a subject: usage is metered per graph (each is an artifact)
    subjects = artifact_subjects(data["candidate"]["artifact_digests"])
    subjects.append(
        {"name": f"baseline-model:{req.model.name}", "digest": {"sha256": model_digest}}
    )
    subjects.append({"name": "inputs", "digest": {"sha256": sets.digest}})
    return BenchRun(data, subjects, [req.target])


def _phases(
    session: Any, runner: Any, sets: InputSets, req: LlmRequest, progress: Progress | None
) -> dict[str, Any]:
    """Time to first token and decode steps, PHASE_RUNS generations per arm alternating."""
    out: dict[str, dict[str, list[Any]]] = {
        arm: {"ttft_ns": [], "step_ns": []} for arm in (BASELINE, CANDIDATE)
    }
    for k in range(PHASE_RUNS):
        ids = sets.sets[k % len(sets.sets)]["input_ids"]
        rows = [list(map(int, r)) for r in ids]
        for arm in (BASELINE, CANDIDATE) if k % 2 == 0 else (CANDIDATE, BASELINE):
            if arm == CANDIDATE:
                g = session.generate(rows, req.new_tokens)
                ttft, steps = g.ttft_s, g.step_s
            else:
                _, t = runner.timed(ids)
                ttft, steps = t.ttft_s, t.step_s
            out[arm]["ttft_ns"].append(int(ttft * 1e9))
            out[arm]["step_ns"].append([int(s * 1e9) for s in steps])
        if progress:
            progress(
                "time to first token and decode",
                (k + 1) / PHASE_RUNS,
                f"{k + 1} generations per arm",
            )
    return out
