"""The vendor service's records: licensees and their keys, activations, nonces, usage.

`Store(url)` takes `sqlite:///path/vendor.db` (or a plain path; the default) or
`postgresql://user@host/db` (needs `psycopg`, installed separately).  SQL is written
once, with `?` placeholders, in the subset both databases share.  Each call opens and
closes its own connection, so the store is safe to use from the server's thread pool.

A decision that reads and then writes (is there an install left? is this total higher
than the last?) runs in one transaction that holds the licensee's lock (`_locked`):
`BEGIN IMMEDIATE` on SQLite (one writer at a time), `SELECT ... FOR UPDATE` on the
licensee's row on PostgreSQL, so simultaneous requests cannot both see room for one more.

API keys are shown once when a licensee is added; only their SHA-256 is stored.

Usage: every accepted ledger record is kept (`ledger_records`, by install and sequence
number) with each accepted checkpoint (`ledger_checkpoints`), so the next export is
checked against them (`usage.check_continues`) and the invoice is computed from them
(`metering.usage.statement`), as the customer's `luminal meter show` is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from luminal.errors import UsageError
from luminal.metering.ledger.records import Record, RecordKind, canonical, loads
from luminal.metering.usage.statement import NS_PER_HOUR
from luminal_vendor.usage import (
    Held,
    LedgerRejected,
    Rejection,
    UsageExport,
    check_continues,
    usage_artifacts,
)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS licensees (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, api_key_sha256 TEXT NOT NULL UNIQUE,
        terms TEXT NOT NULL, max_installs INTEGER NOT NULL, created_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS activations (
        license_id TEXT PRIMARY KEY, licensee_id TEXT NOT NULL, install_keyid TEXT NOT NULL,
        install_public_key TEXT NOT NULL, fingerprint TEXT NOT NULL, issued_at TEXT NOT NULL,
        license TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS nonces (
        nonce TEXT PRIMARY KEY, licensee_id TEXT NOT NULL, seen_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS usage_uploads (
        id TEXT PRIMARY KEY, licensee_id TEXT NOT NULL, install_keyid TEXT NOT NULL,
        received_at TEXT NOT NULL, export TEXT NOT NULL, export_sha256 TEXT)""",
    """CREATE TABLE IF NOT EXISTS artifacts (
        licensee_id TEXT NOT NULL, digest TEXT NOT NULL, name TEXT NOT NULL,
        added_at TEXT NOT NULL, PRIMARY KEY (licensee_id, digest))""",
    """CREATE TABLE IF NOT EXISTS usage_totals (
        licensee_id TEXT NOT NULL, install_keyid TEXT NOT NULL, artifact TEXT NOT NULL,
        device_hours TEXT NOT NULL, updated_at TEXT NOT NULL,
        PRIMARY KEY (licensee_id, install_keyid, artifact))""",
    """CREATE TABLE IF NOT EXISTS ledger_records (
        licensee_id TEXT NOT NULL, install_keyid TEXT NOT NULL, seq INTEGER NOT NULL,
        hash TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (install_keyid, seq))""",
    """CREATE TABLE IF NOT EXISTS ledger_checkpoints (
        licensee_id TEXT NOT NULL, install_keyid TEXT NOT NULL, tree_size INTEGER NOT NULL,
        root TEXT NOT NULL, export_sha256 TEXT NOT NULL, accepted_at TEXT NOT NULL,
        PRIMARY KEY (install_keyid, tree_size))""",
)
#: Run after SCHEMA (a database made before export digests gets the column first).
INDEXES = (
    """CREATE UNIQUE INDEX IF NOT EXISTS usage_uploads_export
        ON usage_uploads (licensee_id, export_sha256)""",
)


@dataclass(frozen=True)
class UsageReceipt:
    id: str
    duplicate: bool  # the same export was stored before: nothing was added


@dataclass(frozen=True)
class Activation:
    """An issued license to record, if the licensee has an install left for it."""

    license_id: str
    licensee_id: str
    install_keyid: str
    install_public_key: str
    fingerprint: str
    issued_at: str
    license_json: str


@dataclass(frozen=True)
class LicenseeRecord:
    id: str
    name: str
    terms: dict[str, Any]
    max_installs: int


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


class Store:
    def __init__(self, url: str | Path) -> None:
        text = str(url)
        self.url = text
        if text.startswith(("postgresql://", "postgres://")):
            try:
                import psycopg  # type: ignore[import-not-found]
            except ImportError:
                raise UsageError(
                    "--db: a PostgreSQL URL needs the psycopg package (pip install 'psycopg[binary]')"
                ) from None
            self._pg: Any = psycopg
            self._path: Path | None = None
            self._unique: type[Exception] = psycopg.IntegrityError
        else:
            path = text.removeprefix("sqlite:///") if text.startswith("sqlite:///") else text
            self._pg = None
            self._path = Path(path.removeprefix("sqlite:"))
            self._unique = sqlite3.IntegrityError

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        if self._pg is not None:
            with self._pg.connect(self.url) as conn, conn.cursor() as cur:
                yield _PgCursor(cur)
            return
        assert self._path is not None
        conn = sqlite3.connect(self._path, timeout=10)
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _locked(self, licensee_id: str) -> Iterator[tuple[Any, int | None]]:
        """One transaction holding the licensee's lock; yields (cursor, max_installs), the
        latter None for an unknown licensee.  Commits on success, rolls back on error."""
        lock = "SELECT max_installs FROM licensees WHERE id = ?"
        if self._pg is not None:
            with self._pg.connect(self.url) as conn, conn.cursor() as cur:
                db = _PgCursor(cur)
                rows = db.execute(lock + " FOR UPDATE", (licensee_id,)).fetchall()
                yield db, int(rows[0][0]) if rows else None
            return
        assert self._path is not None
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first write
            try:
                rows = conn.execute(lock, (licensee_id,)).fetchall()
                yield conn, int(rows[0][0]) if rows else None
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def init(self) -> Store:
        if self._path is not None:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise UsageError(f"--db {self._path}: {err.strerror}") from None
        with self._tx() as db:
            for statement in SCHEMA:
                db.execute(statement)
        try:
            with self._tx() as db:
                db.execute("SELECT export_sha256 FROM usage_uploads WHERE 1 = 0").fetchall()
        except Exception:  # a database from before export digests: sqlite3 or psycopg error
            with self._tx() as db:
                db.execute("ALTER TABLE usage_uploads ADD COLUMN export_sha256 TEXT")
        with self._tx() as db:
            for statement in INDEXES:
                db.execute(statement)
        return self

    # licensees ---------------------------------------------------------------------------
    def add_licensee(
        self, licensee_id: str, name: str, terms: dict[str, Any], max_installs: int, now: str
    ) -> str:
        """Create a licensee and return its API key (shown once, stored hashed)."""
        api_key = "lk_" + secrets.token_urlsafe(32)
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT INTO licensees VALUES (?, ?, ?, ?, ?, ?)",
                    (licensee_id, name, hash_key(api_key), json.dumps(terms), max_installs, now),
                )
        except self._unique:
            raise UsageError(f"licensee {licensee_id!r} already exists") from None
        return api_key

    def licensee_for_key(self, api_key: str) -> LicenseeRecord | None:
        with self._tx() as db:
            rows = db.execute(
                "SELECT id, name, terms, max_installs FROM licensees WHERE api_key_sha256 = ?",
                (hash_key(api_key),),
            ).fetchall()
        if not rows:
            return None
        lid, name, terms, max_installs = rows[0]
        return LicenseeRecord(lid, name, json.loads(terms), int(max_installs))

    def licensees(self) -> list[tuple[str, str, int, int]]:
        """(id, name, max installs, installs activated) for every licensee."""
        with self._tx() as db:
            return [
                tuple(r)
                for r in db.execute(
                    "SELECT l.id, l.name, l.max_installs, COUNT(DISTINCT a.install_keyid) "
                    "FROM licensees l LEFT JOIN activations a ON a.licensee_id = l.id "
                    "GROUP BY l.id, l.name, l.max_installs ORDER BY l.id"
                ).fetchall()
            ]

    # replay protection -------------------------------------------------------------------
    def use_nonce(self, nonce: str, licensee_id: str, now: str) -> bool:
        """Record `nonce`; False if it was seen before (a replay)."""
        try:
            with self._tx() as db:
                db.execute("INSERT INTO nonces VALUES (?, ?, ?)", (nonce, licensee_id, now))
        except self._unique:
            return False
        return True

    def prune_nonces(self, before: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM nonces WHERE seen_at < ?", (before,))

    # activations -------------------------------------------------------------------------
    def activate(self, activation: Activation) -> bool:
        """Record `activation` unless it would be one install more than the licensee's
        `max_installs` (False then, nothing written).  Count and insert are one locked
        transaction; an install already activated may activate again."""
        a = activation
        with self._locked(a.licensee_id) as (db, max_installs):
            if max_installs is None:
                return False
            rows = db.execute(
                "SELECT DISTINCT install_keyid FROM activations WHERE licensee_id = ?",
                (a.licensee_id,),
            ).fetchall()
            installs = {r[0] for r in rows}
            if a.install_keyid not in installs and len(installs) >= max_installs:
                return False
            db.execute(
                "INSERT INTO activations VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    a.license_id,
                    a.licensee_id,
                    a.install_keyid,
                    a.install_public_key,
                    a.fingerprint,
                    a.issued_at,
                    a.license_json,
                ),
            )
        return True

    def installs(self, licensee_id: str) -> set[str]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT DISTINCT install_keyid FROM activations WHERE licensee_id = ?",
                (licensee_id,),
            ).fetchall()
        return {r[0] for r in rows}

    def install_public_key(self, licensee_id: str, install_keyid: str) -> str | None:
        """The public key of an install activated for this licensee, or None."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT install_public_key FROM activations "
                "WHERE licensee_id = ? AND install_keyid = ?",
                (licensee_id, install_keyid),
            ).fetchall()
        return rows[0][0] if rows else None

    # usage -------------------------------------------------------------------------------
    def add_artifact(self, licensee_id: str, digest: str, name: str, now: str) -> None:
        """Make an artifact ("sha256:<hex>" of its file) known: usage may be billed on it."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO artifacts VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (licensee_id, digest, name, now),
            )

    def record_usage(
        self, licensee_id: str, install_keyid: str, now: str, export: UsageExport, raw: str
    ) -> UsageReceipt:
        """Store a verified export once (by its digest; again: the first receipt, marked
        duplicate) if it continues what this install had accepted, or LedgerRejected
        (gap, fork, chain, an artifact the licensee has not registered)."""
        with self._locked(licensee_id) as (db, _):
            rows = db.execute(
                "SELECT id FROM usage_uploads WHERE licensee_id = ? AND export_sha256 = ?",
                (licensee_id, export.digest),
            ).fetchall()
            if rows:
                return UsageReceipt(rows[0][0], duplicate=True)
            check_continues(export, self._held(db, install_keyid))
            known = {
                r[0]
                for r in db.execute(
                    "SELECT digest FROM artifacts WHERE licensee_id = ?", (licensee_id,)
                ).fetchall()
            }
            unknown = sorted(usage_artifacts(export.records) - known)
            if unknown:
                raise LedgerRejected(
                    Rejection.ARTIFACT,
                    f"usage of artifact(s) unknown to licensee {licensee_id}: "
                    f"{', '.join(unknown)} (`luminal-vendor artifact add`)",
                )
            upload_id = str(uuid.uuid4())
            db.execute(
                "INSERT INTO usage_uploads VALUES (?, ?, ?, ?, ?, ?)",
                (upload_id, licensee_id, install_keyid, now, raw, export.digest),
            )
            for r in export.records:
                db.execute(
                    "INSERT INTO ledger_records VALUES (?, ?, ?, ?, ?)",
                    (licensee_id, install_keyid, r.seq, r.hash, canonical(r.to_json()).decode()),
                )
            cp = export.checkpoint
            db.execute(
                "INSERT INTO ledger_checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                (licensee_id, install_keyid, cp.tree_size, cp.root, export.digest, now),
            )
            self._add_totals(db, licensee_id, install_keyid, export.records, now)
        return UsageReceipt(upload_id, duplicate=False)

    def _held(self, db: Any, install_keyid: str) -> Held:
        rows = db.execute(
            "SELECT hash, record FROM ledger_records WHERE install_keyid = ? ORDER BY seq",
            (install_keyid,),
        ).fetchall()
        last = loads(rows[-1][1].encode()) if rows else None
        return Held(tuple(r[0] for r in rows), last)

    def _add_totals(
        self, db: Any, licensee_id: str, install_keyid: str, records: tuple[Record, ...], now: str
    ) -> None:
        """Running device-hours per artifact (what `usage_totals` has always held)."""
        added: dict[str, int] = {}
        for r in records:
            if r.kind is RecordKind.USAGE:
                added[str(r.body["artifact"])] = added.get(str(r.body["artifact"]), 0) + int(
                    r.body["busy_ns"]
                )
        for artifact, busy in added.items():
            rows = db.execute(
                "SELECT device_hours FROM usage_totals "
                "WHERE licensee_id = ? AND install_keyid = ? AND artifact = ?",
                (licensee_id, install_keyid, artifact),
            ).fetchall()
            total = (Decimal(rows[0][0]) if rows else Decimal(0)) + Decimal(busy) / NS_PER_HOUR
            db.execute(
                "INSERT INTO usage_totals VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (licensee_id, install_keyid, artifact) DO UPDATE "
                "SET device_hours = excluded.device_hours, updated_at = excluded.updated_at",
                (licensee_id, install_keyid, artifact, str(total), now),
            )

    def ledger(self, install_keyid: str) -> tuple[Record, ...]:
        """Every accepted record of an install, in order."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT record FROM ledger_records WHERE install_keyid = ? ORDER BY seq",
                (install_keyid,),
            ).fetchall()
        return tuple(loads(r[0].encode()) for r in rows)

    def ledger_installs(self, licensee_id: str) -> list[str]:
        """Installs of a licensee with accepted usage."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT DISTINCT install_keyid FROM ledger_checkpoints WHERE licensee_id = ? "
                "ORDER BY install_keyid",
                (licensee_id,),
            ).fetchall()
        return [r[0] for r in rows]

    def licensee(self, licensee_id: str) -> bool:
        with self._tx() as db:
            return bool(
                db.execute("SELECT 1 FROM licensees WHERE id = ?", (licensee_id,)).fetchall()
            )

    def usage_count(self, licensee_id: str) -> int:
        with self._tx() as db:
            return int(
                db.execute(
                    "SELECT COUNT(*) FROM usage_uploads WHERE licensee_id = ?", (licensee_id,)
                ).fetchall()[0][0]
            )


class _PgCursor:
    """A psycopg cursor that takes `?` placeholders, like sqlite3."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        self._cur.execute(sql.replace("?", "%s"), params)
        return self

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())
