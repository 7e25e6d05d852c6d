"""Shape profiles: the range each symbolic dim may take, and the sizes compiled for it.

`luminal compile --profile 'batch=1..32:8'` says the dim `batch` takes any size from 1 to
32 and is served fastest at 8.  The compiler builds one specialization per *bucket*: the
opt size, the max, and sizes between them a factor `ratio` apart (2, or the smallest power
of 2 that keeps the product of every dim's buckets within `MAX_BUCKETS`), so an input is
padded by less than that factor; `--buckets batch=1,4,8` names them instead.  A
shape is served by the smallest bucket covering it in every dim; a size outside the
range is a UsageError (exit 2).

`--shapes x=1x3x224x224` fixes an input's whole shape (trtexec's `--shapes`, ONNX
Runtime's free-dimension override): it binds the input's symbolic dims and compiles one
static specialization.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from luminal.errors import UsageError

#: Default buckets are at most this factor apart (a padded input wastes less than it) ...
BUCKET_RATIO = 2
#: ... unless that makes more specializations than this; `--buckets` may name more.
MAX_BUCKETS = 8

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True, order=True)
class DimRange:
    """A symbolic dim's sizes: min..max, tuned at opt, compiled at `buckets`."""

    name: str
    lo: int
    hi: int
    opt: int
    buckets: tuple[int, ...]

    def covers(self, size: int) -> bool:
        return self.lo <= size <= self.hi

    def bucket_for(self, size: int) -> int:
        return min(b for b in self.buckets if b >= size)

    def describe(self) -> str:
        return f"{self.name}={self.lo}..{self.hi}:{self.opt}"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "min": self.lo,
            "max": self.hi,
            "opt": self.opt,
            "buckets": list(self.buckets),
        }

    @staticmethod
    def from_json(data: Mapping[str, object]) -> DimRange:
        buckets = data["buckets"]
        assert isinstance(buckets, list)
        return make_range(
            str(data["name"]),
            int(data["min"]),  # type: ignore[call-overload]
            int(data["max"]),  # type: ignore[call-overload]
            int(data["opt"]),  # type: ignore[call-overload]
            [int(b) for b in buckets],
        )


@dataclass(frozen=True)
class ShapeProfile:
    """The symbolic dims a compile covers, in the order the user gave them."""

    dims: tuple[DimRange, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def points(self) -> list[dict[str, int]]:
        """Every specialization's dim sizes, the opt point first."""
        opt = {d.name: d.opt for d in self.dims}
        grid = [
            dict(zip(self.names, sizes, strict=True))
            for sizes in itertools.product(*(d.buckets for d in self.dims))
        ]
        return [opt] + [p for p in grid if p != opt]

    def smallest_served(self, point: Mapping[str, int]) -> dict[str, int]:
        """The smallest sizes the bucket `point` serves (the point itself: it pads none)."""
        out = {}
        for d in self.dims:
            below = [b for b in d.buckets if b < point[d.name]]
            out[d.name] = max(below) + 1 if below else d.lo
        return out

    def point_for(self, sizes: Mapping[str, int]) -> dict[str, int]:
        """The bucket serving these sizes (UsageError naming the dim out of range)."""
        point = {}
        for d in self.dims:
            n = sizes[d.name]
            if not d.covers(n):
                raise UsageError(
                    f"dim '{d.name}' = {n} is outside the compiled profile {d.describe()}; "
                    f"recompile with a wider --profile"
                )
            point[d.name] = d.bucket_for(n)
        return point

    def to_json(self) -> list[dict[str, object]]:
        return [d.to_json() for d in self.dims]

    @staticmethod
    def from_json(data: Iterable[Mapping[str, object]]) -> ShapeProfile:
        return ShapeProfile(tuple(DimRange.from_json(d) for d in data))


def make_range(
    name: str, lo: int, hi: int, opt: int, buckets: Sequence[int] | None = None, ratio: int = 2
) -> DimRange:
    """A DimRange with its buckets (default: `default_buckets`), every rule checked."""
    where = f"--profile '{name}={lo}..{hi}:{opt}'"
    if not _NAME.match(name):
        raise UsageError(f"{where}: '{name}' is not a dim name")
    if not 1 <= lo <= opt <= hi:
        raise UsageError(f"{where}: expected 1 <= min <= opt <= max")
    chosen = sorted(set(buckets)) if buckets else default_buckets(lo, hi, opt, ratio)
    if chosen[-1] != hi or opt not in chosen or any(not lo <= b <= hi for b in chosen):
        raise UsageError(
            f"{where}: buckets {chosen} must lie in {lo}..{hi} and include opt and max"
        )
    return DimRange(name, lo, hi, opt, tuple(chosen))


def default_buckets(lo: int, hi: int, opt: int, ratio: int = BUCKET_RATIO) -> list[int]:
    """opt, max, and sizes a factor `ratio` apart from opt down to min and up to max, so
    no input is padded by `ratio` or more."""
    sizes = {opt, hi}
    b = opt
    while b > lo:
        b = max(lo, math.ceil(b / ratio))
        sizes.add(b)
    b = opt
    while b * ratio < hi:
        b *= ratio
        sizes.add(b)
    return sorted(sizes)


def parse_profile(specs: Sequence[str], buckets: Sequence[str] = ()) -> ShapeProfile | None:
    """`--profile NAME=MIN..MAX[:OPT]` (opt defaults to max) and `--buckets NAME=A,B,C`."""
    if not specs:
        if buckets:
            raise UsageError("--buckets needs a --profile for the same dim")
        return None
    chosen: dict[str, list[int]] = {}
    for text in buckets:
        name, sep, rest = text.partition("=")
        try:
            chosen[name] = [int(v) for v in rest.split(",")] if sep else []
        except ValueError:
            chosen[name] = []
        if not chosen[name] or any(v <= 0 for v in chosen[name]):
            raise UsageError(f"--buckets '{text}': expected NAME=A,B,... positive integers")
    parsed = []
    for text in specs:
        m = re.fullmatch(r"\s*([^=\s]+)\s*=\s*(\d+)\s*\.\.\s*(\d+)\s*(?::\s*(\d+))?\s*", text)
        if not m:
            raise UsageError(f"--profile '{text}': expected NAME=MIN..MAX or NAME=MIN..MAX:OPT")
        name, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
        parsed.append((name, lo, hi, int(m.group(4)) if m.group(4) else hi))
    names = [p[0] for p in parsed]
    if len(set(names)) != len(names):
        raise UsageError(f"--profile names a dim twice: {names}")
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise UsageError(f"--buckets names dims with no --profile: {unknown}")
    return fit_profile(parsed, chosen)


def fit_profile(
    ranges: Sequence[tuple[str, int, int, int]], chosen: Mapping[str, Sequence[int]] = {}
) -> ShapeProfile:
    """(name, min, max, opt) per dim, with default buckets BUCKET_RATIO apart, or the
    smallest power-of-2 ratio that keeps the specializations within MAX_BUCKETS, down to
    min, opt and max alone (dims in `chosen` keep the buckets named there)."""
    ratio = BUCKET_RATIO
    largest = max((r[2] for r in ranges), default=1)
    while True:
        profile = ShapeProfile(tuple(make_range(*r, chosen.get(r[0]), ratio) for r in ranges))
        if len(profile.points()) <= MAX_BUCKETS or ratio > largest:
            return profile  # the coarsest: each dim at min, opt and max
        ratio *= 2


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`--shapes NAME=1x3x224x224` (repeatable, or comma-separated)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in (s for spec in specs for s in spec.split(",") if s.strip()):
        name, sep, dims = text.strip().rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split("x")) if sep and name else ()
        except ValueError:
            shape = ()
        if not shape or any(d <= 0 for d in shape):
            raise UsageError(f"--shapes '{text}': expected NAME=D0xD1x... positive integers")
        shapes[name] = shape
    return shapes
