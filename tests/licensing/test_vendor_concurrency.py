"""`max_installs` under simultaneous activations, on SQLite and on PostgreSQL.

The service counts a licensee's installs and records the new one in one transaction that
holds the licensee's lock; read-then-insert without it let 8 simultaneous activations
against `max_installs=1` activate 2.  Here 16 requests from 16 installs are released at
once (a barrier) against a real uvicorn on 127.0.0.1 and exactly 2 may win.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn

from luminal.licensing.request import make_request
from luminal.licensing.timeutil import to_iso, utcnow
from luminal_vendor.app import ServiceConfig, create_app
from luminal_vendor.storage import Store
from tests.helpers.licensing_helpers import Vendor, free_port, make_terms, other_identity

CLIENTS = 16
MAX_INSTALLS = 2


@contextlib.contextmanager
def uvicorn_on_loopback(store: Store, vendor: Vendor) -> Iterator[str]:
    """The app served by uvicorn in a thread of this process; yields its base URL."""
    app = create_app(store, vendor.signer, ServiceConfig(rate_per_minute=600))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _activate_at_once(url: str, api_key: str) -> list[int]:
    bodies = [{"request": make_request(other_identity()).to_json()} for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS)

    def post(body: dict[str, object]) -> int:
        with httpx.Client(trust_env=False, timeout=30) as client:
            barrier.wait()
            return client.post(
                url + "/v1/activate", json=body, headers={"Authorization": f"Bearer {api_key}"}
            ).status_code

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(post, bodies))


def _check_limit_holds(store: Store, vendor: Vendor) -> None:
    api_key = store.add_licensee(
        "acme", "ACME", make_terms().to_json(), MAX_INSTALLS, to_iso(utcnow())
    )
    with uvicorn_on_loopback(store, vendor) as url:
        codes = _activate_at_once(url, api_key)
    assert sorted(codes) == [200] * MAX_INSTALLS + [403] * (CLIENTS - MAX_INSTALLS), codes
    assert len(store.installs("acme")) == MAX_INSTALLS
    assert store.licensees() == [("acme", "ACME", MAX_INSTALLS, MAX_INSTALLS)]


def test_sqlite_activates_exactly_max_installs(vendor: Vendor, tmp_path: Path) -> None:
    _check_limit_holds(Store(f"sqlite:///{tmp_path / 'vendor.db'}").init(), vendor)


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (as the `postgres` user when run as
    root, since initdb refuses root); yields its URL."""
    runas: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root and no runuser to start PostgreSQL as another user")
        runas = ["runuser", "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="luminal-pg-"))
    if runas:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run([*runas, *cmd], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {done.stdout}{done.stderr}")

    try:
        run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust")
        opts = f"-h 127.0.0.1 -p {port} -k {folder} -c max_connections=100"
        run("pg_ctl", "-D", str(data), "-o", opts, "-l", str(folder / "log"), "-w", "start")
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            run("pg_ctl", "-D", str(data), "-m", "immediate", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_postgresql_activates_exactly_max_installs(vendor: Vendor) -> None:
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed (pip install 'psycopg[binary]')")
    if shutil.which("pg_ctl") is None or shutil.which("initdb") is None:
        pytest.skip("no PostgreSQL server binaries (pg_ctl, initdb) on PATH")
    with postgres_server() as url:
        _check_limit_holds(Store(url).init(), vendor)
