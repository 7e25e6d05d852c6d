"""`Probe`: the machine that discovery looks at, passed in rather than assumed.

Discovery reads files under /proc and /sys, runs vendor tools (`nvidia-smi`, `rocm-smi`)
and imports vendor libraries (`pynvml`, `amdsmi`).  A probe names where each comes from,
so a test (or an operator looking at a mounted host from a container) can point all of
it at another tree:

    root     the file-system root that /proc, /sys and the tools are read from
    tools    the folders searched for vendor tools; on a real root, $PATH plus the
             vendors' install folders; under a fake root, that root's own bin folders
    modules  vendor Python modules to use instead of importing them (tests give fakes);
             a vendor library talks to the running kernel, so it is only imported when
             `root` is the real "/"

`Probe.from_env()` reads `LUMINAL_HARDWARE_ROOT` (default "/"): `luminal devices` run with
it set to a recorded tree lists that machine.  A missing file, tool or library is normal
and reads as "nothing there", never as an error.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

ROOT_ENV = "LUMINAL_HARDWARE_ROOT"
#: Where vendors install their tools when they are not on $PATH.
VENDOR_BIN = ("/opt/rocm/bin", "/usr/local/cuda/bin")
#: How long a vendor tool may take before it counts as absent (a hung driver must not hang
#: `luminal compile`).
TOOL_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Probe:
    root: Path = Path("/")
    tools: tuple[str, ...] = ()
    modules: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    timeout_s: float = TOOL_TIMEOUT_S

    @staticmethod
    def from_env(environ: Mapping[str, str] | None = None) -> Probe:
        env = os.environ if environ is None else environ
        return Probe.at(Path(env.get(ROOT_ENV) or "/"), env.get("PATH", ""))

    @staticmethod
    def at(root: Path, path: str = "", modules: Mapping[str, Any] | None = None) -> Probe:
        """A probe of the machine rooted at `root`; `path` is $PATH, used only for "/"."""
        if root == Path("/"):
            tools = tuple(p for p in path.split(os.pathsep) if p) + VENDOR_BIN
        else:
            tools = tuple(str(root / d) for d in ("usr/bin", "bin", "opt/rocm/bin"))
        return Probe(root, tools, MappingProxyType(dict(modules or {})))

    @property
    def is_host(self) -> bool:
        return self.root == Path("/")

    def path(self, absolute: str) -> Path:
        """`absolute` (e.g. "/sys/bus/pci/devices") under this probe's root."""
        return self.root / absolute.lstrip("/")

    def read(self, absolute: str | Path) -> str | None:
        """A text file's content, stripped; None when it is absent or unreadable."""
        p = absolute if isinstance(absolute, Path) else self.path(absolute)
        try:
            return p.read_text(errors="replace").strip()
        except OSError:
            return None

    def module(self, name: str) -> Any | None:
        """A vendor Python module, or None when it is not installed (or not the host)."""
        if name in self.modules:
            return self.modules[name]
        if not self.is_host:
            return None
        try:
            return importlib.import_module(name)
        except Exception:  # an installed binding without its driver library raises anything
            return None

    def which(self, tool: str) -> str | None:
        return shutil.which(tool, path=os.pathsep.join(self.tools)) if self.tools else None

    def run(self, tool: str, args: Sequence[str]) -> str | None:
        """A tool's standard output; None when the tool is absent, fails or hangs."""
        exe = self.which(tool)
        if exe is None:
            return None
        try:
            done = subprocess.run(
                [exe, *args],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None
