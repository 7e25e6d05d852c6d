"""The tuning database: what the search measured, so a second compile skips measuring.

One SQLite file (`$LUMINAL_HOME/tuning.db`, or `$LUMINAL_TUNING_DB`) with one row per
(kernel structure hash, device fingerprint, compiler version, variant):

    measurements(kernel, device, compiler, variant, seconds, estimate, ok, kind, shape,
                 measured_at)

The winner of a kernel is its fastest correct variant.  A fleet shares results with
`luminal tune-db export` / `import`: a JSON document with a format tag, so a file from
another tool or a damaged one is refused with one line.  Writes are transactions, so an
interrupted compile leaves every finished measurement in place and nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from luminal.compiler.schedule.variant import Variant
from luminal.compiler.search.tuner import Machine
from luminal.errors import UsageError

ENV_VAR = "LUMINAL_TUNING_DB"
FORMAT = "luminal-tuning-db"
FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    kernel TEXT NOT NULL,
    device TEXT NOT NULL,
    compiler TEXT NOT NULL,
    variant TEXT NOT NULL,
    seconds REAL NOT NULL,
    estimate REAL,
    ok INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    shape TEXT NOT NULL DEFAULT '',
    measured_at TEXT NOT NULL,
    PRIMARY KEY (kernel, device, compiler, variant)
);
CREATE TABLE IF NOT EXISTS machines (
    device TEXT PRIMARY KEY,
    peak_gflops REAL NOT NULL,
    bandwidth_gbs REAL NOT NULL,
    cores INTEGER NOT NULL,
    measured_at TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Measurement:
    kernel: str  # structure hash (`search.structure.kernel_hash`)
    device: str  # device fingerprint
    compiler: str  # luminal version
    variant: Variant
    seconds: float  # median seconds per call; inf when it was stopped early
    estimate: float | None  # the cost model's seconds, for rank agreement
    ok: bool  # matched the reference
    kind: str = ""  # kernel kind, for `show`
    shape: str = ""  # output shape, for `show`
    measured_at: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["variant"] = self.variant.to_json()
        data["seconds"] = self.seconds if self.seconds != float("inf") else None
        return data


def default_path() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    from luminal.licensing.home import Home

    return Home.resolve().root / "tuning.db"


class TuningDB:
    """A connection to one tuning database file; use as a context manager."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as err:
            raise UsageError(f"{self.path}: not a usable tuning database ({err})") from None
        except OSError as err:
            raise UsageError(
                f"{self.path}: cannot open the tuning database ({err.strerror})"
            ) from None

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # ---- writing ---------------------------------------------------------------------
    def record(self, rows: Iterable[Measurement]) -> int:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        values = [
            (
                m.kernel,
                m.device,
                m.compiler,
                json.dumps(m.variant.to_json(), sort_keys=True),
                m.seconds if m.seconds != float("inf") else 1e30,
                m.estimate,
                int(m.ok),
                m.kind,
                m.shape,
                m.measured_at or now,
            )
            for m in rows
        ]
        with self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?)", values
            )
        return len(values)

    def record_machine(self, device: str, machine: Machine) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO machines VALUES (?,?,?,?,?)",
                (device, machine.peak_gflops, machine.bandwidth_gbs, machine.cores, now),
            )

    def machine(self, device: str) -> Machine | None:
        """This device's calibration (cost model peak and bandwidth), if measured."""
        row = self._db.execute(
            "SELECT peak_gflops, bandwidth_gbs, cores FROM machines WHERE device = ?", (device,)
        ).fetchone()
        return None if row is None else Machine(float(row[0]), float(row[1]), int(row[2]))

    def clear(self, device: str | None = None) -> int:
        with self._transaction():
            if device is None:
                cur = self._db.execute("DELETE FROM measurements")
                self._db.execute("DELETE FROM machines")
            else:
                cur = self._db.execute("DELETE FROM measurements WHERE device = ?", (device,))
                self._db.execute("DELETE FROM machines WHERE device = ?", (device,))
        return cur.rowcount

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        try:
            with self._db:
                yield
        except sqlite3.DatabaseError as err:
            raise UsageError(f"{self.path}: tuning database write failed ({err})") from None

    # ---- reading ---------------------------------------------------------------------
    def measurements(
        self, kernel: str | None = None, device: str | None = None, compiler: str | None = None
    ) -> list[Measurement]:
        sql = "SELECT * FROM measurements"
        where, args = [], []
        for col, value in (("kernel", kernel), ("device", device), ("compiler", compiler)):
            if value is not None:
                where.append(f"{col} = ?")
                args.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY kernel, seconds"
        try:
            rows = self._db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as err:
            raise UsageError(f"{self.path}: not a usable tuning database ({err})") from None
        return [_row(r) for r in rows]

    def winner(self, kernel: str, device: str, compiler: str) -> Measurement | None:
        """The fastest correct measured variant of a kernel, if it was ever measured."""
        best = [m for m in self.measurements(kernel, device, compiler) if m.ok]
        return min(best, key=lambda m: m.seconds) if best else None

    def timing(self, kernel: str, device: str, compiler: str, variant: Variant) -> float | None:
        """One variant's stored median, if it was measured and correct."""
        for m in self.measurements(kernel, device, compiler):
            if m.variant == variant and m.ok and m.seconds != float("inf"):
                return m.seconds
        return None

    def summary(self) -> dict[str, object]:
        rows = self._db.execute(
            "SELECT device, compiler, COUNT(DISTINCT kernel), COUNT(*), MAX(measured_at) "
            "FROM measurements GROUP BY device, compiler ORDER BY device, compiler"
        ).fetchall()
        return {
            "path": str(self.path),
            "groups": [
                {"device": d, "compiler": c, "kernels": k, "measurements": n, "latest": t}
                for d, c, k, n, t in rows
            ],
        }

    # ---- sharing ---------------------------------------------------------------------
    def export(self, path: Path, device: str | None = None) -> int:
        rows = self.measurements(device=device)
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "measurements": [m.to_json() for m in rows],
        }
        _write_atomic(path, json.dumps(doc, indent=1, sort_keys=True).encode())
        return len(rows)

    def import_file(self, path: Path) -> int:
        return self.record(read_export(path))


def read_export(path: Path) -> list[Measurement]:
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: not a tuning-db export ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UsageError(f"{path}: not a tuning-db export (no '{FORMAT}' format tag)")
    if doc.get("format_version") != FORMAT_VERSION:
        raise UsageError(
            f"{path}: tuning-db export format {doc.get('format_version')} is not supported "
            f"(this luminal reads format {FORMAT_VERSION})"
        )
    out = []
    for n, item in enumerate(doc.get("measurements", [])):
        try:
            seconds = item["seconds"]
            out.append(
                Measurement(
                    kernel=str(item["kernel"]),
                    device=str(item["device"]),
                    compiler=str(item["compiler"]),
                    variant=Variant.from_json(item["variant"]),
                    seconds=float("inf") if seconds is None else float(seconds),
                    estimate=None if item.get("estimate") is None else float(item["estimate"]),
                    ok=bool(item["ok"]),
                    kind=str(item.get("kind", "")),
                    shape=str(item.get("shape", "")),
                    measured_at=str(item.get("measured_at", "")),
                )
            )
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"{path}: measurement #{n} is malformed ({err!r})") from None
    return out


def _row(r: Sequence[object]) -> Measurement:
    kernel, device, compiler, variant, seconds, estimate, ok, kind, shape, at = r
    secs = float(seconds)  # type: ignore[arg-type]
    return Measurement(
        str(kernel),
        str(device),
        str(compiler),
        Variant.from_json(json.loads(str(variant))),
        float("inf") if secs >= 1e30 else secs,
        None if estimate is None else float(estimate),  # type: ignore[arg-type]
        bool(ok),
        str(kind),
        str(shape),
        str(at),
    )


def _write_atomic(path: Path, data: bytes) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
