"""A customer install under a production license bound to it, and a report it signed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from luminal.licensing import dsse, keys
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity, load_or_create
from luminal.metering.bench.results import derive
from luminal.metering.report import sign_and_write
from tests.helpers.bench_helpers import fake_run, honest, licensed_terms
from tests.helpers.licensing_helpers import Vendor, make_terms


@dataclass(frozen=True)
class Customer:
    home: Home
    identity: InstallIdentity
    vendor: Vendor
    license: Path
    report: Path


@pytest.fixture
def customer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> Customer:  # type: ignore[no-untyped-def]
    """A home with a production license (the vendor's root stands in for the shipped
    keyring) bound to its install key, and a VALID report bench would have written."""
    home = Home(tmp_path / "home")
    monkeypatch.setenv("LUMINAL_HOME", str(home.root))
    vendor = Vendor.create(tmp_path / "vendor")
    monkeypatch.setattr(keys, "shipped_keyring", vendor.release_keyring)
    me = load_or_create(home)
    lic = vendor.write_license(tmp_path / "license.json", me, terms=make_terms(evaluation=False))
    rc, _, err = cli("license", "install", lic)
    assert rc == 0, err
    report = tmp_path / "report.json"
    run = fake_run(
        honest(2.0, 0.02), sigma=0.02, terms=licensed_terms(), fingerprint=me.fingerprint
    )
    sign_and_write(run, report)
    return Customer(home, me, vendor, lic, report)


def forge(
    path: Path,
    change: Callable[[dict[str, Any]], None],
    signer: InstallIdentity,
    out: Path | None = None,
) -> Path:
    """What a forger holding `signer` writes: the Statement changed, every derived number
    re-derived from the (changed) raw data, signed again."""
    statement = json.loads(dsse.Envelope.loads(path.read_bytes()).payload)
    change(statement)
    predicate = statement["predicate"]
    predicate["results"] = json.loads(json.dumps(derive(predicate)))
    env = signer.sign(dsse.REPORT_TYPE, json.dumps(statement).encode())
    target = out or path.with_name(f"forged-{path.name}")
    target.write_bytes(env.dumps())
    return target
