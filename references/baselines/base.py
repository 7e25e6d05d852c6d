"""What every baseline shares: the options it is opened with, the runner it returns, the
protocol a plug-in satisfies, and the customer's options file.

    BaselineOptions(threads, settings, config)   threads: luminal's thread count;
        settings: `--baseline-opt KEY=VALUE`; config: `--baseline-options FILE.json`
    Runner(run, info)                            feeds -> outputs, and what was timed
    read_options_file(path) -> OptionsFile       the file's JSON object and its digest

A baseline takes what it knows from `settings` and `config` and refuses the rest with one
line naming the field: an option silently ignored would time something other than what the
customer asked for.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from luminal.errors import UsageError

Feeds = Mapping[str, np.ndarray]
Outputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class BaselineOptions:
    """What every baseline is told: the thread count (same as luminal's; None leaves the
    runtime's own default, which is what a one-run oracle wants), free-form settings
    (`--baseline-opt KEY=VALUE`) and the customer's options file (`--baseline-options`),
    each interpreted or refused by the baseline."""

    threads: int | None
    settings: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)

    def take(self, known: tuple[str, ...], baseline: str) -> dict[str, str]:
        """The `--baseline-opt` settings, all of them among `known`."""
        unknown = sorted(set(self.settings) - set(known))
        if unknown:
            allowed = ", ".join(known) or "none"
            raise UsageError(f"baseline {baseline}: unknown option(s) {unknown} (known: {allowed})")
        return dict(self.settings)

    def take_config(self, known: tuple[str, ...], baseline: str) -> dict[str, Any]:
        """The options file's fields, all of them among `known`."""
        for name in self.config:
            if name not in known:
                allowed = ", ".join(known) or "none: it takes no options file"
                raise UsageError(
                    f"--baseline-options: unknown field '{name}' for baseline {baseline} "
                    f"(known: {allowed})"
                )
        return dict(self.config)


@dataclass(frozen=True)
class Runner:
    """An opened baseline: call it with the feeds, get the outputs.  `info` says exactly
    what is timed (object, mode, options, threads); it goes into the report."""

    run: Callable[[Feeds], Outputs]
    info: Mapping[str, object]

    def __call__(self, feeds: Feeds) -> Outputs:
        return self.run(feeds)


@runtime_checkable
class Baseline(Protocol):
    name: str
    formats: tuple[str, ...]  # model file suffixes it runs, e.g. (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner: ...


@dataclass(frozen=True)
class OptionsFile:
    """`--baseline-options FILE.json`: its fields and digest (the report names both, so the
    vendor can rerun the baseline exactly as the customer configured it)."""

    path: Path
    config: Mapping[str, Any]
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {"path": str(self.path), "sha256": self.sha256, "fields": dict(self.config)}


def read_options_file(path: Path) -> OptionsFile:
    """The JSON object in `path`; anything else is a one-line UsageError."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise UsageError(f"--baseline-options {path}: {err.strerror or err}") from None
    try:
        config = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise UsageError(f"--baseline-options {path}: not JSON ({err})") from None
    if not isinstance(config, dict):
        raise UsageError(f"--baseline-options {path}: expected a JSON object of option fields")
    return OptionsFile(path, config, hashlib.sha256(data).hexdigest())


def expect(value: object, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` if it is a `kind` (bool is not an int here), else a UsageError naming `where`."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    else:
        ok = isinstance(value, kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds)
        raise UsageError(f"--baseline-options: field '{where}' must be {names}, not {value!r}")
    return value


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def one_line(err: BaseException, limit: int = 300) -> str:
    """A foreign runtime's error message on one line, cut to `limit` characters."""
    return " ".join(str(err).split())[:limit]
