"""A profiled artifact's executable: each call runs in the bucket that covers its shape.

The sizes of the profile's dims are read off the inputs (every input naming a dim must
agree), the smallest bucket covering them is chosen, the inputs are zero-padded to it and
the outputs cut back (compiler/shapes/padding.py says why that is exact).  The opt
point's executable is loaded with the artifact; the others when a call first needs them,
from the signed artifacts the outer one carries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import numpy as np

from luminal.compiler.artifact import Artifact, Manifest
from luminal.compiler.backends.protocol import Executable
from luminal.compiler.ir import TensorSpec
from luminal.compiler.ir.graph import check_feeds
from luminal.compiler.shapes.padding import LENGTH_PREFIX, pad_feeds, unpad
from luminal.compiler.shapes.record import ProfileSpec, Specialization
from luminal.errors import UsageError

#: Loads a specialization's inner artifact (its member's bytes) into an executable.
Loader = Callable[[Specialization], Executable]


def public_specs(specs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
    """A profiled graph's inputs as the caller sees them: without the length inputs."""
    return tuple(s for s in specs if not s.name.startswith(LENGTH_PREFIX))


def base_members(art: Artifact) -> dict[str, bytes]:
    """The opt point's own members (the backend's), without the inner artifacts."""
    inner = (
        {s.member for s in art.manifest.profile.specializations} if art.manifest.profile else set()
    )
    return {k: v for k, v in art.members.items() if k not in inner}


class ProfiledExecutable:
    def __init__(self, manifest: Manifest, opt: Executable, loader: Loader) -> None:
        assert manifest.profile is not None
        self.spec: ProfileSpec = manifest.profile
        self.inputs = public_specs(manifest.inputs)
        self._names = frozenset(s.name for s in self.inputs)
        # per input: its fixed sizes (None where a profile dim sits) and the dims it holds
        self._layout = [
            (
                s.name,
                tuple(
                    None if k in self.spec.axes.get(s.name, {}) else d
                    for k, d in enumerate(s.shape)
                ),
                self.spec.axes.get(s.name, {}),
            )
            for s in self.inputs
        ]
        self._by_point = {s.key(): s for s in self.spec.specializations}
        self._loaded: dict[tuple[tuple[tuple[str, int], ...], bool], Executable] = {
            self.spec.specializations[0].key(): opt
        }
        self._loader = loader
        self._lock = threading.Lock()

    def sizes(self, inputs: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Each profile dim's size in these inputs; a UsageError names the input whose
        shape does not fit (a fixed axis, the rank, or two inputs disagreeing)."""
        sizes: dict[str, int] = {}
        for name, fixed, dims in self._layout:
            if name not in inputs:
                continue  # check_feeds names what is missing
            shape = np.shape(inputs[name])
            if len(shape) != len(fixed) or any(
                f is not None and f != s for f, s in zip(fixed, shape, strict=False)
            ):
                want = "x".join(str(f) if f is not None else dims[k] for k, f in enumerate(fixed))
                raise UsageError(f"input '{name}' has shape {list(shape)}; expected {want}")
            for k, dim in dims.items():
                if sizes.setdefault(dim, shape[k]) != shape[k]:
                    raise UsageError(
                        f"input '{name}' gives dim '{dim}' size {shape[k]}, "
                        f"another input gave {sizes[dim]}"
                    )
        return sizes

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not self._names <= inputs.keys():
            check_feeds(self.inputs, inputs)  # names what is missing
        sizes = self.sizes(inputs)
        point = self.spec.profile.point_for(sizes)
        key = tuple(sorted(point.items()))
        chosen = (point == sizes and self._by_point.get((key, True))) or self._by_point[
            (key, False)
        ]
        exe = self._executable(chosen)
        feeds = pad_feeds(
            {name: np.asarray(inputs[name]) for name in self._names},
            self.spec.axes,
            point,
            chosen.padded,
            sizes,
        )
        out = exe.run(feeds)
        return {name: unpad(value, chosen.outputs[name], sizes) for name, value in out.items()}

    def _executable(self, chosen: Specialization) -> Executable:
        key = chosen.key()
        exe = self._loaded.get(key)
        if exe is None:
            with self._lock:
                exe = self._loaded.get(key)
                if exe is None:
                    exe = self._loaded[key] = self._loader(chosen)
        return exe
