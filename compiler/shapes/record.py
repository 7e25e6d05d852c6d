"""What an artifact records of its profile: the dims, where they sit, its specializations.

A profiled artifact is the opt point's artifact (its manifest, library and weights, so
every tool that reads a static artifact reads it as the opt shape) plus, for each other
bucket, a whole signed artifact as a member (`SPECIALIZATION_PREFIX` + the point).  Its
manifest's `profile` field is a `ProfileSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from luminal.compiler.shapes.padding import NodeTags, Tag
from luminal.compiler.shapes.profile import ShapeProfile
from luminal.errors import IntegrityError, UsageError

SPECIALIZATION_PREFIX = "profile."


@dataclass(frozen=True)
class Specialization:
    point: Mapping[str, int]  # each profile dim's compiled (bucket) size
    member: str  # the inner artifact's member name; "" for the artifact's own library
    padded: tuple[str, ...]  # the dims it takes a length input for
    outputs: Mapping[str, NodeTags]  # where each output holds padded positions
    exact: bool = False  # unmasked: serves only sizes equal to its point

    def key(self) -> tuple[tuple[tuple[str, int], ...], bool]:
        return tuple(sorted(self.point.items())), self.exact

    def to_json(self) -> dict[str, Any]:
        return {
            "point": dict(self.point),
            "member": self.member,
            "padded": list(self.padded),
            "exact": self.exact,
            "outputs": {
                name: [[[t.dim, t.size, t.inner] for t in axis] for axis in tags]
                for name, tags in self.outputs.items()
            },
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Specialization:
        return Specialization(
            point={str(k): _count(v) for k, v in data["point"].items()},
            member=str(data["member"]),
            padded=tuple(str(d) for d in data["padded"]),
            exact=_flag(data.get("exact", False)),
            outputs={
                str(name): tuple(
                    tuple(Tag(str(d), _count(s), _count(i)) for d, s, i in axis) for axis in tags
                )
                for name, tags in data["outputs"].items()
            },
        )


@dataclass(frozen=True)
class ProfileSpec:
    profile: ShapeProfile
    axes: Mapping[str, Mapping[int, str]]  # input -> axis -> profile dim
    #: the opt point's first; every point has a masked (padding) one, the opt point an
    #: exact one too when padding needs masks
    specializations: tuple[Specialization, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "dims": self.profile.to_json(),
            "axes": {name: {str(k): d for k, d in ax.items()} for name, ax in self.axes.items()},
            "specializations": [s.to_json() for s in self.specializations],
        }

    @staticmethod
    def from_json(data: Any, where: str) -> ProfileSpec:
        """The manifest's `profile` field, every part checked (IntegrityError if not)."""
        try:
            profile = ShapeProfile.from_json(data["dims"])
            axes = {
                str(name): {_count(k): str(d) for k, d in ax.items()}
                for name, ax in data["axes"].items()
            }
            specs = tuple(Specialization.from_json(s) for s in data["specializations"])
            names = set(profile.names)
            points = {tuple(sorted(p.items())) for p in profile.points()}
            keys = [s.key() for s in specs]
            if (
                not specs
                or len(set(keys)) != len(keys)
                or {k for k, exact in keys} != points
                or any(exact and s.padded for (_, exact), s in zip(keys, specs, strict=True))
                or specs[0].point != profile.points()[0]
                or any(d not in names for ax in axes.values() for d in ax.values())
                or any(not set(s.padded) <= names for s in specs)
                or specs[0].member != ""
                or any(
                    t.size < 1 or t.inner < 1
                    for sp in specs
                    for tags in sp.outputs.values()
                    for axis in tags
                    for t in axis
                )
                or any(not s.member.startswith(SPECIALIZATION_PREFIX) for s in specs[1:])
            ):
                raise ValueError
        except (KeyError, TypeError, ValueError, AttributeError, AssertionError, UsageError):
            raise IntegrityError(
                f"{where}: manifest field 'profile' is not a profile record"
            ) from None
        return ProfileSpec(profile, axes, specs)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError
    n = int(value)
    if n < 0 or (not isinstance(value, int) and str(n) != value):
        raise ValueError
    return n
