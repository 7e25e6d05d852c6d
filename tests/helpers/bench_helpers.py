"""Fakes for the benchmark tests: a clock that only moves when an arm runs, arms with set
latencies (honest, caching, wrong), and a whole report made from them without any model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal.compiler.ir import DType, TensorSpec
from luminal.licensing.terms import BillingTerms, license_terms
from luminal.metering.bench import inputs
from luminal.metering.bench.method import MethodSettings
from luminal.metering.bench.run import (
    BenchRequest,
    BenchRun,
    Scenario,
    Skipped,
    execute,
    reproduction,
)
from luminal.references.parity import Tolerance

SPECS = (TensorSpec("x", (2, 4), DType.F32),)


@dataclass
class FakeClock:
    """Moves only when an arm runs.  `drift(now)` is how much slower the whole machine is
    at time `now` (1.0: not at all): a load that every arm running then suffers alike."""

    now: int = 0
    drift: Callable[[int], float] | None = None

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: float) -> None:
        factor = self.drift(self.now) if self.drift else 1.0
        self.now += max(1, int(ns * factor))


def model(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What every fake computes: y = 2x + 1."""
    return {"y": feeds["x"] * np.float32(2) + np.float32(1)}


@dataclass
class FakeArm:
    """Takes `latency_ns` (times a lognormal noise factor, and a per-round factor shared
    with other arms when `shared` is given) on the fake clock and returns `model(feeds)`."""

    clock: FakeClock
    latency_ns: float
    sigma: float = 0.0
    seed: int = 0
    warmup_calls: int = 0  # the first calls are slower: 5x at first, falling to 1x
    calls: int = 0
    seen: list[int] = field(default_factory=list)  # ids of the feeds it was given
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def cost(self, feeds: Mapping[str, np.ndarray]) -> float:
        slow = (
            1.0 + 4.0 * max(0.0, 1.0 - self.calls / self.warmup_calls) if self.warmup_calls else 1.0
        )
        noise = float(np.exp(self.rng.normal(0.0, self.sigma))) if self.sigma else 1.0
        return self.latency_ns * slow * noise

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.clock.advance(self.cost(feeds))
        self.calls += 1
        self.seen.append(id(feeds))
        return self.outputs(feeds)

    def outputs(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return model(feeds)


@dataclass
class CachingArm(FakeArm):
    """A 'compiled model' that memoizes: an input it has seen returns at once."""

    cache: dict[bytes, dict[str, np.ndarray]] = field(default_factory=dict)

    def cost(self, feeds: Mapping[str, np.ndarray]) -> float:
        key = feeds["x"].tobytes()
        return 0.02 * self.latency_ns if key in self.cache else self.latency_ns

    def outputs(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        key = feeds["x"].tobytes()
        if key not in self.cache:
            self.cache[key] = model(feeds)
        return self.cache[key]


@dataclass
class WrongArm(FakeArm):
    """Off by 0.1 on every element (a model compiled from something else)."""

    def outputs(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": model(feeds)["y"] + np.float32(0.1)}


@dataclass
class LazyArm(FakeArm):
    """Right while checked for parity, then returns zeros (skips the work) once timed."""

    honest_calls: int = 20

    def outputs(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.calls > self.honest_calls:
            return {"y": np.zeros_like(feeds["x"])}
        return model(feeds)


FAST = MethodSettings(
    duration_s=0.5,
    min_runs=50,
    min_blocks=20,
    block_s=0.01,
    settle_s=0.0,
    warmup_max_s=0.5,
    audit_samples=8,
    audit_runs=40,
)


def fake_run(
    candidate: Callable[[FakeClock], FakeArm],
    *,
    baseline_ns: float = 1_000_000,
    sigma: float = 0.0,
    method: MethodSettings = FAST,
    pricing: Mapping[str, str] | None = None,
    terms: BillingTerms | None = None,
    fingerprint: str = "0" * 32,
    baseline_seed: int = 1,
    drift: Callable[[int], float] | None = None,
) -> BenchRun:
    """A complete benchmark run on fake arms and a fake clock, shaped like `run_bench`'s;
    `terms` (from a license: `licensed_terms`) replace `pricing` and name the license."""
    clock = FakeClock(drift=drift)
    base = FakeArm(clock, baseline_ns, sigma=sigma, seed=baseline_seed)
    sets = inputs.seeded(SPECS, 0, 4)
    scenarios = [
        Scenario("latency", 2, base, candidate(clock), sets),
        Skipped("throughput", "the model's batch is fixed at 2"),
    ]
    data: dict[str, Any] = execute(
        scenarios, inputs.fresh(SPECS, method.audit_runs), method, dict(_TOL), clock=clock
    )
    data.update(
        conditions={"threads": 2, "affinity": [0, 1], "OMP_NUM_THREADS": "2", "omp_max_threads": 2},
        machine={
            "cpu": {"model": "Fake CPU", "arch": "x86_64", "logical_cores": 2},
            "fingerprint": fingerprint,
            "os": "Linux",
            "load_average": {"start": [0.1], "end": [0.1]},
        },
        software={"numpy": np.__version__, "compiler_version": "0.1.0"},
        baseline={
            "name": "fake",
            "model": "model.onnx",
            "model_sha256": "b" * 64,
            "settings": {},
            "info": {"version": "1"},
        },
        candidate={
            "name": "luminal",
            "artifacts": ["model.lmnl"],
            "artifact_digests": [{"path": "model.lmnl", "sha256": "a" * 64, "scenario": "latency"}],
            "manifest": {"compiler_version": "0.1.0", "target": {"kind": "cpu"}},
            "source": None,
        },
        inputs=sets.describe(),
        request=reproduction(BenchRequest(Path("model.lmnl"), scenarios=("latency",))),
        license=terms.license.to_json() if terms else None,
        pricing=terms.pricing_json() if terms else dict(pricing) if pricing else None,
    )
    subjects = [
        {"name": "artifact:model.lmnl", "digest": {"sha256": "a" * 64}},
        {"name": "baseline-model:model.onnx", "digest": {"sha256": "b" * 64}},
        {"name": "inputs", "digest": {"sha256": sets.digest}},
    ]
    return BenchRun(data, subjects, [Path("model.lmnl")])


PRICING = {
    "price_per_hour": "1.50",
    "share": "1/3",
    "currency": "USD",
    "device_class": "cpu",
    "source": "test",
}

_TOL = {"f32": Tolerance(1e-4, 1e-5), "f64": Tolerance(1e-7, 1e-10)}


def honest(
    speedup: float = 2.0, sigma: float = 0.0, seed: int = 2
) -> Callable[[FakeClock], FakeArm]:
    return lambda clock: FakeArm(clock, 1_000_000 / speedup, sigma=sigma, seed=seed)


def licensed_terms(price_per_hour: str | None = None) -> BillingTerms:
    """The terms `luminal bench` would write under the license installed in LUMINAL_HOME."""
    from luminal import licensing

    status = licensing.check("bench", "cpu")
    return license_terms(
        status.claims,
        evaluation=status.evaluation,
        sha256=status.digest,
        device_class="cpu",
        price_per_hour=price_per_hour,
    )
