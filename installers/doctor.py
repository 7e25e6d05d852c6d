"""`luminal doctor`: is this install ready?  One independent, typed check per concern.

    CHECKS = (Check(name, needed, fn), ...)      fn(DoctorContext) -> Finding
        python  packages  toolchain  devices  home  license  ledger  disk  tuning-db  quiet

A check never raises: what it cannot find is its Finding (FAIL when the check is `needed`
and the thing is missing, WARN when luminal works without it but less well).  Adding a
check is one function and one entry in CHECKS.  `run_checks` runs them in order, so the CLI
prints a line as each finishes.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from importlib import metadata
from pathlib import Path

from luminal._version import __version__
from luminal.licensing.home import Home

SCHEMA = "luminal-doctor/1"
#: Free disk below this fails (a compile's build folder and an artifact need room) ...
DISK_FAIL_BYTES = 256 * 2**20
#: ... and below this warns.
DISK_WARN_BYTES = 2 * 2**30
#: The 1-minute load per CPU above which a bench would likely be INVALID (noise).
QUIET_LOAD_PER_CPU = 0.5


class Status(Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """What one check found: a one-line summary, its facts, and what to do if not OK."""

    status: Status
    summary: str
    detail: Mapping[str, object] = field(default_factory=dict)
    fix: str = ""


@dataclass(frozen=True)
class DoctorContext:
    """What the checks look at: this install's home and the environment."""

    home: Home
    env: Mapping[str, str]

    @classmethod
    def current(cls) -> DoctorContext:
        return cls(Home.resolve(), dict(os.environ))


@dataclass(frozen=True)
class Check:
    name: str
    needed: bool  # False: a FAIL of this check is reported as a WARN (luminal still works)
    run: Callable[[DoctorContext], Finding]
    about: str


@dataclass(frozen=True)
class Result:
    name: str
    needed: bool
    finding: Finding

    def to_json(self) -> dict[str, object]:
        f = self.finding
        return {
            "name": self.name,
            "status": f.status.value,
            "needed": self.needed,
            "summary": f.summary,
            "fix": f.fix,
            "detail": dict(f.detail),
        }


@dataclass(frozen=True)
class DoctorReport:
    results: tuple[Result, ...]

    @property
    def failed(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.finding.status is Status.FAIL)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "luminal": __version__,
            "ok": self.ok,
            "failed": [r.name for r in self.failed],
            "checks": [r.to_json() for r in self.results],
        }


# ---- the checks ----------------------------------------------------------------------


def check_python(ctx: DoctorContext) -> Finding:
    version = platform.python_version()
    detail = {
        "version": version,
        "executable": sys.executable,
        "implementation": sys.implementation.name,
    }
    if sys.version_info[:2] != (3, 11):
        return Finding(
            Status.FAIL, f"Python {version}: luminal needs 3.11", detail, "install Python 3.11"
        )
    return Finding(Status.OK, f"Python {version} ({sys.executable})", detail)


def check_packages(ctx: DoctorContext) -> Finding:
    try:
        requires = metadata.requires("luminal") or []
        installed = metadata.version("luminal")
    except metadata.PackageNotFoundError:
        return Finding(
            Status.WARN,
            f"luminal {__version__} runs from a source tree, not an installed distribution",
            {"luminal": __version__},
            "install the bundle (installers/install.sh) or `pip install .`",
        )
    versions: dict[str, str | None] = {}
    missing, wrong, extras = [], [], {}
    for req in requires:
        name, spec, extra = _requirement(req)
        have = _version(name)
        if extra:
            extras.setdefault(extra, []).append(f"{name} {have or 'absent'}")
            continue
        versions[name] = have
        if have is None:
            missing.append(f"{name}{spec}")
        elif spec and not _satisfies(have, spec):
            wrong.append(f"{name} {have} (needs {spec})")
    detail = {"luminal": installed, "dependencies": versions, "extras": extras}
    if missing or wrong:
        what = "; ".join([*(f"{m} missing" for m in missing), *wrong])
        return Finding(Status.FAIL, what, detail, "reinstall from the bundle (install.sh)")
    return Finding(Status.OK, f"luminal {installed}, {len(versions)} dependencies present", detail)


def check_toolchain(ctx: DoctorContext) -> Finding:
    from luminal.compiler.backends.cpu.toolchain import find_toolchain
    from luminal.errors import CompilerError

    try:
        tc = find_toolchain(dict(ctx.env))
    except CompilerError as err:
        return Finding(
            Status.FAIL, str(err), {}, "install gcc or clang, or the bundle's `toolchain` extra"
        )
    return Finding(
        Status.OK,
        f"C compiler: {tc.describe()} ({' '.join(tc.command)})",
        {"command": list(tc.command), "openmp": tc.openmp},
    )


def check_devices(ctx: DoctorContext) -> Finding:
    from luminal.compiler.hardware.machine import discover

    devices = discover()
    names = [f"{d.kind}: {d.name}" for d in devices]
    return Finding(
        Status.OK,
        f"{len(devices)} device(s): {', '.join(names)}",
        {"devices": [d.to_json() for d in devices]},
    )


def check_home(ctx: DoctorContext) -> Finding:
    root = ctx.home.root
    detail = {"path": str(root), "exists": root.exists()}
    if root.exists() and not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        return Finding(
            Status.FAIL,
            f"{root}: not readable and writable by this user",
            detail,
            f"fix the permissions of {root}, or set LUMINAL_HOME",
        )
    parent = _existing_parent(root)
    if not root.exists() and not os.access(parent, os.W_OK):
        return Finding(
            Status.FAIL,
            f"{root}: cannot be created ({parent} is not writable)",
            detail,
            "set LUMINAL_HOME to a writable folder",
        )
    return Finding(
        Status.OK,
        f"LUMINAL_HOME {root}{'' if root.exists() else ' (created on first use)'}",
        detail,
    )


def check_license(ctx: DoctorContext) -> Finding:
    from luminal.licensing.status import describe

    if not ctx.home.install_key.exists():  # describe() would create the identity: only look
        return Finding(
            Status.WARN,
            "no license installed (no install identity yet): running artifacts works, "
            "compiling and bench need one",
            {"state": "missing"},
            "`luminal license request -o request.json`, then `luminal license install FILE`",
        )
    doc = describe(ctx.home)
    detail = {k: doc.get(k) for k in ("state", "error", "warnings", "evaluation", "terms")}
    claims = doc.get("license") or {}
    if doc["state"] == "missing":
        return Finding(
            Status.WARN,
            "no license installed: running artifacts works, compiling and bench need one",
            detail,
            "`luminal license request -o request.json`, then `luminal license install FILE`",
        )
    if doc["error"]:
        return Finding(
            Status.WARN, f"license refused: {doc['error']}", detail, "see docs/licensing.md"
        )
    licensee = claims.get("licensee") if isinstance(claims, dict) else None
    who = licensee.get("name", "") if isinstance(licensee, dict) else str(licensee or "")
    kind = "evaluation" if doc.get("evaluation") else "production"
    return Finding(Status.OK, f"license {doc['state']} ({kind}) for {who}".rstrip(), detail)


def check_ledger(ctx: DoctorContext) -> Finding:
    """The usage ledger verifies (`luminal.metering.ledger.verify`, what `meter verify`
    runs): a record altered, removed or cut off is a FAIL naming it; a tail an append
    left unsealed (a crash) is pending, not a fault."""
    from luminal.errors import UsageError
    from luminal.metering.ledger import verify
    from luminal.metering.ledger.store import LEDGER

    folder = ctx.home.ledger
    if not (folder / LEDGER).exists():
        return Finding(Status.OK, "no ledger yet", {"ledger": str(folder)})
    try:
        verdict = verify(folder)
    except UsageError as err:
        return Finding(
            Status.FAIL, str(err), {"ledger": str(folder)}, "fix the ledger's permissions"
        )
    detail = verdict.to_json()
    if verdict.problem is not None:
        return Finding(
            Status.FAIL,
            verdict.problem.message,
            detail,
            "keep a copy of the ledger folder as it is, run `luminal meter verify --json`, "
            "and contact your vendor",
        )
    pending = (
        f"; {verdict.pending_bytes} bytes pending (an append cut short)"
        if verdict.pending_bytes
        else ""
    )
    return Finding(Status.OK, f"{verdict.records} records verify{pending}", detail)


def check_disk(ctx: DoctorContext) -> Finding:
    paths = {"home": _existing_parent(ctx.home.root), "tmp": Path(ctx.env.get("TMPDIR") or "/tmp")}
    free = {}
    for what, path in paths.items():
        try:
            free[what] = shutil.disk_usage(path).free
        except OSError:
            continue
    detail = {"free_bytes": free, "paths": {k: str(v) for k, v in paths.items()}}
    low = min(free.values()) if free else 0
    line = ", ".join(f"{k} {_gib(v)}" for k, v in free.items())
    if low < DISK_FAIL_BYTES:
        return Finding(Status.FAIL, f"free disk too low: {line}", detail, "free some disk")
    if low < DISK_WARN_BYTES:
        return Finding(Status.WARN, f"free disk low: {line}", detail, "free some disk")
    return Finding(Status.OK, f"free disk: {line}", detail)


def check_tuning_db(ctx: DoctorContext) -> Finding:
    env = ctx.env.get("LUMINAL_TUNING_DB")
    path = Path(env) if env else ctx.home.root / "tuning.db"
    if not path.exists():
        return Finding(
            Status.OK, f"no tuning database yet ({path})", {"path": str(path), "bytes": 0}
        )
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT COUNT(*), COUNT(DISTINCT kernel) FROM measurements"
            ).fetchone()
    except sqlite3.Error as err:
        return Finding(
            Status.WARN,
            f"{path}: unreadable tuning database ({err})",
            {"path": str(path)},
            "`luminal tune-db clear --yes` starts it afresh",
        )
    size = path.stat().st_size
    detail = {"path": str(path), "bytes": size, "measurements": rows[0], "kernels": rows[1]}
    return Finding(
        Status.OK,
        f"tuning database {_mib(size)}: {rows[0]} measurements of {rows[1]} kernels",
        detail,
    )


def check_quiet(ctx: DoctorContext) -> Finding:
    cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()
    except OSError:
        return Finding(Status.WARN, "no load average on this system", {})
    governor = _read(Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))
    detail = {"load_average": [round(x, 2) for x in load], "cpus": cpus, "governor": governor}
    per_cpu = load[0] / cpus
    if per_cpu > QUIET_LOAD_PER_CPU:
        return Finding(
            Status.WARN,
            f"busy: load {load[0]:.2f} on {cpus} CPUs; a bench now would likely be noisy (INVALID)",
            detail,
            "bench when the machine is idle, or pin with `luminal bench --cpus`",
        )
    return Finding(Status.OK, f"quiet enough to bench: load {load[0]:.2f} on {cpus} CPUs", detail)


CHECKS: tuple[Check, ...] = (
    Check("python", True, check_python, "Python version"),
    Check("packages", True, check_packages, "luminal and every dependency installed"),
    Check("toolchain", True, check_toolchain, "a C compiler for the CPU backend"),
    Check("devices", False, check_devices, "the CPU, GPUs and accelerators luminal sees"),
    Check("home", True, check_home, "LUMINAL_HOME readable and writable"),
    Check("license", False, check_license, "license status"),
    Check("ledger", True, check_ledger, "usage ledger integrity"),
    Check("disk", True, check_disk, "free disk for builds and artifacts"),
    Check("tuning-db", False, check_tuning_db, "tuning database size"),
    Check("quiet", False, check_quiet, "whether the machine is quiet enough to bench"),
)


def iter_checks(ctx: DoctorContext, checks: tuple[Check, ...] = CHECKS) -> Iterator[Result]:
    """Each check's result as it finishes; an exception inside a check is its FAIL."""
    for check in checks:
        try:
            finding = check.run(ctx)
        except Exception as err:  # a check must not take doctor down with it
            finding = Finding(Status.FAIL, f"the check itself failed: {type(err).__name__}: {err}")
        if finding.status is Status.FAIL and not check.needed:
            finding = Finding(Status.WARN, finding.summary, finding.detail, finding.fix)
        yield Result(check.name, check.needed, finding)


def run_checks(ctx: DoctorContext, checks: tuple[Check, ...] = CHECKS) -> DoctorReport:
    return DoctorReport(tuple(iter_checks(ctx, checks)))


# ---- helpers ---------------------------------------------------------------------------


def _requirement(text: str) -> tuple[str, str, str]:
    """('name', 'specifier', 'extra' or '') of a Requires-Dist line."""
    req, _, marker = text.partition(";")
    extra = ""
    if "extra" in marker:
        extra = marker.split("extra", 1)[1].strip(" =\"'")
        extra = extra.split('"')[0].split("'")[0].strip()
    req = req.strip()
    i = 0
    while i < len(req) and (req[i].isalnum() or req[i] in "-_."):
        i += 1
    name, spec = req[:i], req[i:].strip()
    if spec.startswith("["):
        spec = spec[spec.index("]") + 1 :].strip()
    return name, spec.strip("() "), extra


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _satisfies(version: str, spec: str) -> bool:
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging is not a dependency: presence is all we can check
        return True
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidVersion, ValueError):
        return True


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
