"""`luminal-vendor verify-usage`: a usage export signed by the install a license binds."""

from __future__ import annotations

import json
from pathlib import Path

from luminal.licensing import dsse
from tests.helpers.licensing_helpers import other_identity, vendor_cli
from tests.vendor.conftest import Customer


def _export(signer, keyid: str) -> bytes:  # type: ignore[no-untyped-def]
    payload = {
        "version": 1,
        "install_keyid": keyid,
        "created_at": "2026-12-01T10:00:00Z",
        "records": [{"artifact": "sha256:" + "ab" * 32, "device_hours": "12.5"}],
    }
    return signer.sign(dsse.USAGE_TYPE, json.dumps(payload).encode()).dumps()


def test_a_usage_export_of_the_bound_install(customer: Customer, tmp_path: Path) -> None:
    me = customer.identity
    export = tmp_path / "usage.json"
    export.write_bytes(_export(me, me.keyid))
    rc, out, err = vendor_cli("verify-usage", export, "--license", customer.license, "--json")
    assert rc == 0, err
    assert json.loads(out) == {
        "ok": True,
        "keyid": me.keyid,
        "records": {"sha256:" + "ab" * 32: "12.5"},
    }
    stranger = other_identity()
    export.write_bytes(_export(stranger, stranger.keyid))
    rc, _, err = vendor_cli("verify-usage", export, "--license", customer.license)
    assert rc == 4 and "signed by unknown key" in err
    rc, _, err = vendor_cli("verify-usage", customer.report, "--license", customer.license)
    assert rc == 4 and "is not a usage export" in err
    export.write_bytes(_export(me, "0" * 16))  # names another install
    rc, _, err = vendor_cli("verify-usage", export, "--license", customer.license)
    assert rc == 4 and "names install" in err
