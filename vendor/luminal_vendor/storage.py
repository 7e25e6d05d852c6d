"""The vendor service's records: licensees and their keys, activations, nonces, usage.

`Store(url)` takes `sqlite:///path/vendor.db` (or a plain path; the default) or
`postgresql://user@host/db` (needs `psycopg`, installed separately).  SQL is written
once, with `?` placeholders, in the subset both databases share.  Each call opens and
closes its own connection, so the store is safe to use from the server's thread pool.

API keys are shown once when a licensee is added; only their SHA-256 is stored.
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
from pathlib import Path
from typing import Any

from luminal.errors import UsageError

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
        received_at TEXT NOT NULL, export TEXT NOT NULL)""",
)


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

    def init(self) -> Store:
        if self._path is not None:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise UsageError(f"--db {self._path}: {err.strerror}") from None
        with self._tx() as db:
            for statement in SCHEMA:
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
    def installs(self, licensee_id: str) -> set[str]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT DISTINCT install_keyid FROM activations WHERE licensee_id = ?",
                (licensee_id,),
            ).fetchall()
        return {r[0] for r in rows}

    def record_activation(
        self,
        license_id: str,
        licensee_id: str,
        install_keyid: str,
        install_public_key: str,
        fingerprint: str,
        issued_at: str,
        license_json: str,
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO activations VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    license_id,
                    licensee_id,
                    install_keyid,
                    install_public_key,
                    fingerprint,
                    issued_at,
                    license_json,
                ),
            )

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
    def record_usage(self, licensee_id: str, install_keyid: str, now: str, export: str) -> str:
        upload_id = str(uuid.uuid4())
        with self._tx() as db:
            db.execute(
                "INSERT INTO usage_uploads VALUES (?, ?, ?, ?, ?)",
                (upload_id, licensee_id, install_keyid, now, export),
            )
        return upload_id

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
