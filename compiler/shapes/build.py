"""`compile_profiled`: one artifact serving a shape profile, one specialization per bucket.

    for each bucket point (the opt point first):
        load the model with its dims bound to the point -> pad_graph -> compile_model
    check padding on the reference interpreter at a padded size
    write the opt point's artifact with the others inside it and the ProfileSpec

The opt point is built twice: the model itself, unmasked, for calls at exactly the opt
shape (a static compile's code), with the whole search budget; and masked, for the sizes
padded up to it.  The other builds share the same budget again, so a profile compiles in
about twice a static compile's search time (and the tuning database keeps every point's
winners for the next compile).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from luminal.compiler.artifact import read_artifact, write_artifact
from luminal.compiler.backends.target import Target
from luminal.compiler.frontend import load_model
from luminal.compiler.frontend.dims import dim_names, symbolic_axes
from luminal.compiler.frontend.model import LoadedModel
from luminal.compiler.inputs import random_inputs
from luminal.compiler.ir import interpreter as reference
from luminal.compiler.options import CompileOptions
from luminal.compiler.pipeline import CompileResult, Progress, compile_model
from luminal.compiler.shapes.padding import PaddedGraph, pad_feeds, pad_graph, unpad
from luminal.compiler.shapes.profile import ShapeProfile
from luminal.compiler.shapes.record import SPECIALIZATION_PREFIX, ProfileSpec, Specialization
from luminal.errors import UnsupportedOp, UsageError
from luminal.licensing.gate import LicenseHook
from luminal.references.parity import agrees

#: The model loaded with the profile's dims at these sizes.
PointLoader = Callable[[Mapping[str, int]], LoadedModel]
#: One build: its point, the model it compiles, its record, its masked reductions.
Job = tuple[Mapping[str, int], LoadedModel, Specialization, int]


@dataclass(frozen=True)
class PointResult:
    point: Mapping[str, int]
    result: CompileResult
    masks: int  # reductions reading through a padding mask
    exact: bool = False  # the opt point's unmasked build, for that shape only


@dataclass(frozen=True)
class ProfiledResult:
    path: Path
    spec: ProfileSpec
    points: tuple[PointResult, ...]  # the opt point's first
    checked_at: Mapping[str, int] | None  # the padded sizes the reference check ran at
    check_error: float  # its largest absolute difference
    seconds: float
    artifact_bytes: int

    @property
    def opt(self) -> CompileResult:
        return self.points[0].result

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "profile": self.spec.to_json(),
            "points": [
                {"point": dict(p.point), "exact": p.exact, "masks": p.masks, **p.result.to_json()}
                for p in self.points
            ],
            "padding_check": None
            if self.checked_at is None
            else {"sizes": dict(self.checked_at), "max_abs_error": self.check_error},
            "seconds": self.seconds,
            "artifact_bytes": self.artifact_bytes,
        }


def profile_axes(
    model: Path, profile: ShapeProfile, fixed: Mapping[str, int]
) -> dict[str, dict[int, str]]:
    """input -> axis -> dim for the profile's dims (UsageError for a dim the model lacks)."""
    found = symbolic_axes(model)
    axes = {name: {k: d for k, d in ax.items() if d in profile.names} for name, ax in found.items()}
    axes = {name: ax for name, ax in axes.items() if ax}
    named = dim_names(axes)
    missing = [d for d in profile.names if d not in named]
    if missing:
        known = sorted(dim_names(found))
        raise UsageError(
            f"--profile names dim(s) {missing} that no input of {model} has "
            f"(its symbolic dims: {', '.join(known) or 'none'})"
        )
    clash = sorted(set(fixed) & set(profile.names))
    if clash:
        raise UsageError(f"dim(s) {clash} are both fixed (--dim/--shapes) and in --profile")
    return axes


@dataclass(frozen=True)
class Hooks:
    """What a caller hears while a profile compiles: each build's start (its point, its
    number, how many), and `compile_model`'s own stage, progress and license hooks."""

    on_point: Callable[[Mapping[str, int], int, int], None] | None = None
    on_step: Callable[[str], None] | None = None
    on_progress: Progress | None = None
    on_license: LicenseHook | None = None


def compile_profiled(
    model: Path,
    output: Path,
    profile: ShapeProfile,
    fixed: Mapping[str, int],
    options: CompileOptions,
    target: Target | None = None,
    hooks: Hooks = Hooks(),
) -> ProfiledResult:
    """Compile the ONNX model at `model` for `profile` (its other symbolic dims bound by
    `fixed`) into the artifact `output`."""

    def load(point: Mapping[str, int]) -> LoadedModel:
        return load_model(model, {**fixed, **point})

    axes = profile_axes(model, profile, fixed)
    return compile_points(load, axes, output, profile, options, target, hooks)


def compile_points(
    load: PointLoader,
    axes: Mapping[str, Mapping[int, str]],
    output: Path,
    profile: ShapeProfile,
    options: CompileOptions,
    target: Target | None = None,
    hooks: Hooks = Hooks(),
) -> ProfiledResult:
    """The profile compile for any frontend: `load(point)` is the model at one point's
    sizes, `axes` where the profile's dims sit in its inputs."""
    started = time.monotonic()
    points = profile.points()
    results: list[PointResult] = []
    checking = padding_check_point(profile)  # the one point whose padding is checked
    checked_graph: list[PaddedGraph] = []  # that point's, kept from its build
    members: dict[str, bytes] = {}
    specs: list[Specialization] = []
    with tempfile.TemporaryDirectory(prefix="luminal-profile-") as tmp:

        def prepare(point: Mapping[str, int], first: bool) -> list[Job]:
            loaded = load(point)  # one point's graph and weights in memory at a time
            pg = pad_graph(loaded.graph, axes)
            if checking is not None and point == checking[0]:
                checked_graph.append(pg)
            return _jobs(profile, point, loaded, pg, first)

        opt_jobs = prepare(points[0], True)
        total = len(opt_jobs) + len(points) - 1
        jobs = itertools.chain(opt_jobs, (j for p in points[1:] for j in prepare(p, False)))
        for n, (point, model, spec, masks) in enumerate(jobs):
            if hooks.on_point:
                hooks.on_point(point, n, total)
            budget = options.budget_seconds
            if n and budget is not None:
                budget = budget / (total - 1)  # the first build gets the whole budget
            path = Path(tmp) / f"{n}.lmnl"
            result = compile_model(
                model,
                path,
                dataclasses.replace(options, budget_seconds=budget),
                on_step=hooks.on_step,
                on_progress=hooks.on_progress,
                target=target,
                on_license=hooks.on_license,
            )
            results.append(PointResult(point, result, masks, spec.exact))
            if n:
                spec = dataclasses.replace(
                    spec, member=f"{SPECIALIZATION_PREFIX}{_member_name(point, spec.exact)}.lmnl"
                )
                members[spec.member] = path.read_bytes()
            specs.append(spec)
            if result.interrupted:
                break  # Ctrl-C: no partial profile is written
        if results[-1].result.interrupted:
            raise KeyboardInterrupt
        checked, error = None, 0.0
        if checking is not None:
            (pg,) = checked_graph
            checked, error = check_padding(load, checking[0], checking[1], axes, pg)
        spec = ProfileSpec(profile, axes, tuple(specs))
        opt = read_artifact(Path(tmp) / "0.lmnl", trust_unsigned=True)
        manifest = dataclasses.replace(opt.manifest, profile=spec)
        write_artifact(output, manifest, {**opt.members, **members})
    return ProfiledResult(
        output,
        spec,
        tuple(results),
        checked,
        error,
        time.monotonic() - started,
        output.stat().st_size,
    )


def padding_check_point(profile: ShapeProfile) -> tuple[dict[str, int], dict[str, int]] | None:
    """The smallest point that pads, and the smallest sizes it serves (None: no size in
    the profile is padded)."""
    candidates = []
    for point in profile.points():
        sizes = profile.smallest_served(point)
        if sizes != point:
            candidates.append((math.prod(point.values()), point, sizes))
    if not candidates:
        return None
    _, point, sizes = min(candidates, key=lambda c: c[0])
    return point, sizes


def check_padding(
    load: PointLoader,
    point: Mapping[str, int],
    sizes: Mapping[str, int],
    axes: Mapping[str, Mapping[int, str]],
    pg: PaddedGraph,
) -> tuple[dict[str, int], float]:
    """Run the point's padded graph on the reference interpreter at `sizes` and compare
    with the model loaded at those sizes: what the static analysis takes on trust
    (constants along a padded axis) is measured here."""
    exact = load(sizes).graph
    feeds = random_inputs(exact.input_specs(), seed=2)
    want = reference.run(exact, feeds)
    got = reference.run(pg.graph, pad_feeds(feeds, axes, point, pg.dims, sizes))
    worst = 0.0
    for name, value in want.items():
        cut = unpad(got[name], pg.outputs[name], sizes)
        ok, err = agrees(cut, value) if cut.shape == value.shape else (False, math.inf)
        worst = max(worst, err)
        if not ok:
            raise UnsupportedOp(
                f"padding {_point_name(sizes)} up to {_point_name(point)} changes output "
                f"'{name}' (max abs error {err:.3g}): the model computes with the size of a "
                "profiled dim itself; fix that dim with --shapes or --dim"
            )
    return dict(sizes), float(worst)


def _jobs(
    profile: ShapeProfile,
    point: Mapping[str, int],
    loaded: LoadedModel,
    pg: PaddedGraph,
    first: bool,
) -> list[Job]:
    """The builds for one point: its masked graph, which serves every size the bucket
    covers; for the opt point (`first`) also the model itself, unmasked, which serves the
    opt shape exactly (a static compile's code: the masks cost nothing there)."""
    masked = dataclasses.replace(loaded, graph=pg.graph)
    padding = Specialization(point, "", pg.dims, pg.outputs)
    if not first:
        return [(point, masked, padding, pg.masks)]
    paddable = profile.smallest_served(point) != point
    exact = Specialization(point, "", (), pg.outputs, exact=True)
    if not paddable:
        return [(point, loaded, exact, 0)]
    if not pg.masks:
        return [(point, masked, padding, 0)]
    return [(point, loaded, exact, 0), (point, masked, padding, pg.masks)]


def _member_name(point: Mapping[str, int], exact: bool = False) -> str:
    return ".".join(f"{d}{n}" for d, n in sorted(point.items())) + (".exact" if exact else "")


def _point_name(point: Mapping[str, int]) -> str:
    return ",".join(f"{d}={n}" for d, n in sorted(point.items()))
