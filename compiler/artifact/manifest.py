"""`Manifest`: what an artifact says about itself, as one typed record.

Written by the pipeline's last stage for every target, read back (and checked field by
field) by `read_artifact`, so every reader gets attributes rather than dict keys, and a
hand-edited manifest with a missing or mistyped field is one `IntegrityError` naming
the field, never a KeyError deep inside a loader.

    compiler_version, created   who built it, when
    target                      the backend's own record; always "kind" and "backend"
                                (how `luminal.load` finds the backend again), the rest is
                                the backend's (CPU features, GPU arch, toolchain, ...)
    source                      the model file it came from, and its format
    inputs, outputs             names, shapes, dtypes of the compiled graph
    memory                      the static memory plan's sizes
    options                     the `CompileOptions` it was compiled with
    schedule                    the schedule's figures (kernels by kind, fusions)
    variants                    the kernel variants the search chose, by kernel name
    notes                       what the backend wants `luminal compile` to show
    profile                     only for a shape profile: its dims and specializations
                                (compiler/shapes/record.py)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from luminal.compiler.ir import DType, TensorSpec
from luminal.compiler.schedule.variant import Variant
from luminal.compiler.shapes.record import ProfileSpec
from luminal.errors import IntegrityError


@dataclass(frozen=True)
class SourceModel:
    path: str
    format: str  # "onnx" | "pt2" | "torch" (an in-memory module)


@dataclass(frozen=True)
class Memory:
    arena_bytes: int  # the one static arena every run uses
    intermediate_bytes: int  # what the arena's buffers would take without reuse
    weights_bytes: int


@dataclass(frozen=True)
class Manifest:
    compiler_version: str
    created: str
    target: Mapping[str, Any]
    source: SourceModel
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    memory: Memory
    options: Mapping[str, Any] = field(default_factory=dict)
    schedule: Mapping[str, Any] = field(default_factory=dict)
    variants: Mapping[str, Variant] = field(default_factory=dict)
    notes: Mapping[str, Any] = field(default_factory=dict)
    #: set when the artifact serves a shape profile (compiler/shapes/record.py)
    profile: ProfileSpec | None = None

    @property
    def kind(self) -> str:
        return str(self.target["kind"])

    @property
    def backend(self) -> str:
        return str(self.target["backend"])

    def to_json(self) -> dict[str, Any]:
        return {
            "compiler_version": self.compiler_version,
            "created": self.created,
            "target": dict(self.target),
            "source": {"path": self.source.path, "format": self.source.format},
            "inputs": [_tensor_json(s) for s in self.inputs],
            "outputs": [_tensor_json(s) for s in self.outputs],
            "memory": {
                "arena_bytes": self.memory.arena_bytes,
                "intermediate_bytes": self.memory.intermediate_bytes,
                "weights_bytes": self.memory.weights_bytes,
            },
            "options": dict(self.options),
            "schedule": dict(self.schedule),
            "variants": {name: v.to_json() for name, v in self.variants.items()},
            "notes": dict(self.notes),
            **({"profile": self.profile.to_json()} if self.profile is not None else {}),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str) -> Manifest:
        """The manifest of `where` (a path, for messages), every field checked."""
        r = _Reader(data, where)
        target = r.mapping("target")
        for key in ("kind", "backend"):
            if not isinstance(target.get(key), str) or not target[key]:
                raise IntegrityError(f"{where}: manifest field 'target.{key}' is missing")
        source = r.mapping("source")
        memory = r.mapping("memory")
        return Manifest(
            compiler_version=r.text("compiler_version"),
            created=r.text("created"),
            target=target,
            source=SourceModel(
                _Reader(source, where, "source.").text("path"),
                _Reader(source, where, "source.").text("format"),
            ),
            inputs=r.tensors("inputs"),
            outputs=r.tensors("outputs"),
            memory=Memory(
                *(
                    _Reader(memory, where, "memory.").count(k)
                    for k in ("arena_bytes", "intermediate_bytes", "weights_bytes")
                )
            ),
            options=r.mapping("options", optional=True),
            schedule=r.mapping("schedule", optional=True),
            variants=r.variants("variants"),
            notes=r.mapping("notes", optional=True),
            profile=ProfileSpec.from_json(data["profile"], where) if "profile" in data else None,
        )


def _tensor_json(s: TensorSpec) -> dict[str, object]:
    return {"name": s.name, "shape": list(s.shape), "dtype": s.dtype.value}


@dataclass(frozen=True)
class _Reader:
    data: Mapping[str, Any]
    where: str
    prefix: str = ""

    def _bad(self, key: str, what: str) -> IntegrityError:
        return IntegrityError(f"{self.where}: manifest field '{self.prefix}{key}' {what}")

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str):
            raise self._bad(key, "is missing or not a string")
        return value

    def count(self, key: str) -> int:
        value = self.data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self._bad(key, "is missing or not a non-negative integer")
        return value

    def mapping(self, key: str, optional: bool = False) -> dict[str, Any]:
        value = self.data.get(key, {} if optional else None)
        if not isinstance(value, dict):
            raise self._bad(key, "is missing or not an object")
        return value

    def tensors(self, key: str) -> tuple[TensorSpec, ...]:
        value = self.data.get(key)
        if not isinstance(value, list):
            raise self._bad(key, "is missing or not a list")
        out = []
        for n, item in enumerate(value):
            try:
                shape = tuple(item["shape"])
                if not isinstance(item["name"], str) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
                ):
                    raise TypeError
                out.append(TensorSpec(item["name"], shape, DType(item["dtype"])))
            except (KeyError, TypeError, ValueError):
                raise self._bad(f"{key}[{n}]", "is not a {name, shape, dtype} record") from None
        return tuple(out)

    def variants(self, key: str) -> dict[str, Variant]:
        value = self.mapping(key, optional=True)
        try:
            return {str(name): Variant.from_json(v) for name, v in value.items()}
        except (TypeError, AttributeError):
            raise self._bad(key, "holds a variant that is not a variant record") from None
