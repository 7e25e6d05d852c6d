"""The backend registry: target names mapped to lazy loaders, built-ins and plugins alike.

Built-in backends are listed here by import path; a plugin package declares one in its
own metadata under the entry-point group `luminal.backends`::

    [project.entry-points."luminal.backends"]
    systolic = "luminal_systolic.backend:SystolicBackend"

Nothing is imported until a backend is asked for, so a broken or missing one (Triton not
installed, a plugin that fails to import) costs nothing until it is chosen, and then it
is one clear line.  A plugin may not take a built-in's name, and two plugins that claim
one name are both refused: which one ran would depend on install order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from luminal.compiler.backends.protocol import ENTRY_POINT_GROUP, Backend
from luminal.errors import UsageError, one_line

#: name -> "module:attribute"; the attribute is a Backend or a callable returning one.
BUILTIN: Mapping[str, str] = {
    "cpu": "luminal.compiler.backends.cpu.backend:CpuBackend",
    "cuda": "luminal.compiler.backends.triton.backend:CudaBackend",
    "rocm": "luminal.compiler.backends.triton.backend:RocmBackend",
}


@dataclass(frozen=True)
class BackendEntry:
    name: str
    value: str  # "module:attribute", as written in the entry point
    origin: str  # "built-in" or "plugin <distribution> <version>"
    loader: Callable[[], Any]


class Registry:
    """Target names and their loaders; `get` imports a backend once and checks it."""

    def __init__(
        self,
        entries: Sequence[BackendEntry],
        conflicts: Mapping[str, Sequence[str]] | None = None,
        pending: Callable[[], Iterable[metadata.EntryPoint]] | None = None,
    ) -> None:
        """`pending`: plugin entry points not read yet (reading every installed
        distribution's metadata takes milliseconds, most of `luminal.load`); they are read
        the first time a name that is not already here, the list of names, or the
        conflicts are asked for.  A built-in needs no scan: it wins any clash."""
        self._entries = {e.name: e for e in entries}
        self._conflicts = {k: tuple(v) for k, v in (conflicts or {}).items()}
        self._pending = pending
        self._loaded: dict[str, Backend] = {}  # this registry's own cache, not global state

    @staticmethod
    def installed(entry_points: Iterable[metadata.EntryPoint] | None = None) -> Registry:
        """Built-ins plus every plugin installed in this environment (or those given)."""
        builtins = [BackendEntry(n, v, "built-in", _importer(v)) for n, v in BUILTIN.items()]
        if entry_points is not None:
            return Registry.of(builtins, entry_points)
        return Registry(builtins, pending=lambda: metadata.entry_points(group=ENTRY_POINT_GROUP))

    def _read_plugins(self) -> None:
        if self._pending is not None:
            points, self._pending = self._pending(), None
            full = Registry.of(list(self._entries.values()), points)
            self._entries, self._conflicts = full._entries, full._conflicts

    @staticmethod
    def of(builtins: Sequence[BackendEntry], points: Iterable[metadata.EntryPoint]) -> Registry:
        entries = {e.name: e for e in builtins}
        claims: dict[str, list[BackendEntry]] = {}
        for ep in points:
            entry = BackendEntry(ep.name, ep.value, _origin(ep), ep.load)
            same = [c for c in claims.get(ep.name, []) if c.value == entry.value]
            if not same:  # one distribution seen twice on sys.path is one plugin
                claims.setdefault(ep.name, []).append(entry)
        conflicts: dict[str, list[str]] = {}
        for name, claimants in claims.items():
            if name in entries:
                conflicts[name] = [entries[name].origin, *(c.origin for c in claimants)]
            elif len(claimants) > 1:
                conflicts[name] = [c.origin for c in claimants]
            else:
                entries[name] = claimants[0]
        return Registry(list(entries.values()), conflicts)

    def names(self) -> tuple[str, ...]:
        self._read_plugins()
        return tuple(self._entries)

    def entry(self, name: str) -> BackendEntry:
        if name not in self._entries:
            self._read_plugins()
        if name in self._conflicts and name not in self._entries:
            raise UsageError(
                f"target '{name}' is claimed by more than one plugin "
                f"({', '.join(self._conflicts[name])}); uninstall all but one"
            )
        if name not in self._entries:
            raise UsageError(
                f"unknown target '{name}'; known targets: auto, {', '.join(self.names())}"
            )
        return self._entries[name]

    def get(self, name: str) -> Backend:
        """The backend named `name`, imported now; UsageError when it cannot be."""
        if name in self._loaded:
            return self._loaded[name]
        entry = self.entry(name)
        try:
            obj = entry.loader()
            # A class or a factory is called; an instance is used as it is.
            factory = isinstance(obj, type) or (callable(obj) and not isinstance(obj, Backend))
            backend = obj() if factory else obj
        except Exception as err:
            raise UsageError(
                f"target '{name}' is not available: {entry.value} ({entry.origin}) failed to "
                f"load: {one_line(err)}"
            ) from None
        if not isinstance(backend, Backend):
            raise UsageError(
                f"target '{name}': {entry.value} ({entry.origin}) is not a luminal backend "
                "(see docs/plugins.md for the methods it must have)"
            )
        if backend.name != name:
            raise UsageError(
                f"target '{name}': the backend at {entry.value} calls itself '{backend.name}'"
            )
        self._loaded[name] = backend
        return backend

    def problems(self) -> list[str]:
        """One line per plugin refused for a clashing name."""
        self._read_plugins()
        return [
            f"target '{n}' is claimed by {', '.join(origins)}; "
            + ("the built-in is used" if n in BUILTIN else "none of them is used")
            for n, origins in self._conflicts.items()
        ]


def _importer(value: str) -> Callable[[], Any]:
    def load() -> Any:
        module, _, attr = value.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
        return obj

    return load


def _origin(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "plugin"
    return f"plugin {dist.metadata['Name']} {dist.version}"
