"""End to end: a production install runs a compiled model 10,000 times through
`luminal.load`, exports its usage, the vendor ingests it, and `luminal-vendor invoice` prints
what `luminal meter show` prints.  Then what the vendor refuses: a replay, a gap, a fork
(a ledger restored from an old backup)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

import luminal
from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.compiler.pipeline import compile_model
from luminal.compiler.runtime.session import artifact_id
from luminal.licensing import keys
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity, load_or_create
from luminal.licensing.timeutil import to_iso, utcnow
from luminal.metering.ledger import Ledger, RecordKind
from luminal.metering.report import sign_and_write
from luminal.metering.usage import MeterConfig, Period
from luminal_vendor.storage import Store
from tests.helpers.bench_helpers import fake_run, honest, licensed_terms
from tests.helpers.licensing_helpers import Vendor, make_terms, vendor_cli
from tests.helpers.onnx_cases import node_model

RUNS = 10_000
HOUR = MeterConfig(interval_s=3600.0)  # only close() flushes, so counts are exact


@dataclass(frozen=True)
class Site:
    home: Home
    identity: InstallIdentity
    license: Path
    artifact: Path
    feeds: dict[str, np.ndarray]
    db: str
    period: str


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> Site:  # type: ignore[no-untyped-def]
    home = Home(tmp_path / "home")
    monkeypatch.setenv("LUMINAL_HOME", str(home.root))
    vendor = Vendor.create(tmp_path / "vendor")
    monkeypatch.setattr(keys, "shipped_keyring", vendor.release_keyring)
    me = load_or_create(home)
    lic = vendor.write_license(tmp_path / "license.json", me, terms=make_terms(evaluation=False))
    rc, _, err = cli("license", "install", lic)
    assert rc == 0, err
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(s).astype(np.float32) for s in ((3, 8), (8, 5), (5,))]
    src = tmp_path / "gemm.onnx"
    onnx.save(node_model("Gemm", weights, consts=(1, 2)), src)
    artifact = tmp_path / "gemm.lmnl"
    compile_model(load_onnx(src), artifact)
    digest = artifact_id(artifact).removeprefix("sha256:")
    run = fake_run(
        honest(2.0, 0.02), sigma=0.02, terms=licensed_terms(), fingerprint=me.fingerprint
    )
    run = dataclasses.replace(
        run,
        subjects=[{"name": "artifact:gemm.lmnl", "digest": {"sha256": digest}}, *run.subjects[1:]],
    )
    sign_and_write(run, tmp_path / "report.json")  # registers the report in the ledger
    db = f"sqlite:///{tmp_path / 'vendor.db'}"
    store = Store(db).init()
    store.add_licensee("acme", "ACME Corp", make_terms().to_json(), 1, to_iso(utcnow()))
    store.add_artifact("acme", "sha256:" + digest, "gemm.lmnl", to_iso(utcnow()))
    feeds = {"in0": rng.standard_normal((3, 8)).astype(np.float32)}
    return Site(home, me, lic, artifact, feeds, db, Period.containing(utcnow()).name)


def _run(site: Site, n: int) -> None:
    with luminal.load(site.artifact, meter=HOUR) as session:
        for _ in range(n):
            session.run(site.feeds)


def _export(cli, out: Path) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = cli("meter", "export", "--since-last", "-o", out)
    assert rc == 0, err


def _ingest(site: Site, export: Path) -> tuple[int, str, str]:
    return vendor_cli("ingest-usage", export, "--license", site.license, "--db", site.db)


def test_10000_runs_exported_ingested_and_invoiced_as_shown(
    site: Site, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _run(site, RUNS)
    rc, out, err = cli("meter", "verify")
    assert rc == 0 and "OK" in out, err
    rc, shown, err = cli("meter", "show", "--period", site.period, "--json")
    assert rc == 0, err
    statement = json.loads(shown)
    (line,) = statement["lines"]
    assert line["calls"] == RUNS and line["billed"] is True
    assert statement["terms"] == "production" and statement["share"] == "1/3"
    assert float(line["speedup_lower"]) > 1.5 and line["price_per_hour"] == "0.10"
    usage = [r for r in Ledger.of(site.home).records() if r.kind is RecordKind.USAGE]
    assert sum(int(r.body["calls"]) for r in usage) == RUNS

    _export(cli, tmp_path / "usage-1.json")
    rc, out, err = _ingest(site, tmp_path / "usage-1.json")
    assert rc == 0 and "accepted records 0.." in out, err
    rc, invoiced, err = vendor_cli(
        "invoice", "--period", site.period, "--licensee", "acme", "--db", site.db, "--json"
    )
    assert rc == 0, err
    assert json.loads(invoiced) == statement
    rc, table, _ = cli("meter", "show", "--period", site.period)
    rc2, vendor_table, _ = vendor_cli(
        "invoice", "--period", site.period, "--licensee", "acme", "--db", site.db
    )
    assert rc == rc2 == 0 and table == vendor_table and str(RUNS) in table

    # the same export again: a replay, refused and counted once
    rc, _, err = _ingest(site, tmp_path / "usage-1.json")
    assert rc == 4 and "rejected (replay)" in err
    assert Store(site.db).usage_count("acme") == 1


def test_a_gap_and_a_fork_are_refused(site: Site, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _run(site, 10)
    _export(cli, tmp_path / "usage-1.json")
    assert _ingest(site, tmp_path / "usage-1.json")[0] == 0
    backup = tmp_path / "backup"
    shutil.copytree(site.home.root / "ledger", backup)  # a backup after the first export

    _run(site, 20)
    _export(cli, tmp_path / "usage-2.json")
    _run(site, 30)
    _export(cli, tmp_path / "usage-3.json")  # usage-2 never reaches the vendor
    rc, _, err = _ingest(site, tmp_path / "usage-3.json")
    assert rc == 4 and "rejected (gap)" in err and "an export in between is missing" in err
    assert _ingest(site, tmp_path / "usage-2.json")[0] == 0
    assert _ingest(site, tmp_path / "usage-3.json")[0] == 0

    shutil.rmtree(site.home.root / "ledger")
    shutil.copytree(backup, site.home.root / "ledger")  # restored from the old backup
    _run(site, 5)
    _export(cli, tmp_path / "usage-forked.json")
    rc, _, err = _ingest(site, tmp_path / "usage-forked.json")
    assert rc == 4 and "rejected (fork)" in err and "restored from an older copy" in err
    rc, out, _ = vendor_cli(
        "invoice", "--period", site.period, "--licensee", "acme", "--db", site.db, "--json"
    )
    assert json.loads(out)["totals"]["calls"] == 60  # the forked 5 were never counted
