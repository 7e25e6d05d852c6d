"""`luminal-vendor verify-usage`: a usage export signed by the install a license binds,
checked alone (records in sequence, checkpoint, consistency proof)."""

from __future__ import annotations

import json
from pathlib import Path

from luminal.licensing import dsse
from luminal.metering.ledger import Ledger, RecordKind
from luminal.metering.ledger.export import make_export, sign_export
from tests.helpers.ledger_helpers import usage
from tests.helpers.licensing_helpers import other_identity, vendor_cli
from tests.vendor.conftest import Customer


def test_a_usage_export_of_the_bound_install(customer: Customer, tmp_path: Path) -> None:
    me = customer.identity
    ledger = Ledger(tmp_path / "ledger", durable=False)
    ledger.append_many([(RecordKind.USAGE, usage()), (RecordKind.USAGE, usage())])
    envelope, made = make_export(ledger, me)
    export = tmp_path / "usage.json"
    export.write_bytes(envelope.dumps())
    rc, out, err = vendor_cli("verify-usage", export, "--license", customer.license, "--json")
    assert rc == 0, err
    assert json.loads(out) == {
        "ok": True,
        "keyid": me.keyid,
        "from": 0,
        "tree_size": 2,
        "root": made.checkpoint.root,
        "records": 2,
        "digest": made.digest,
    }
    stranger = other_identity()
    export.write_bytes(sign_export(ledger.records(), 0, stranger).dumps())
    rc, _, err = vendor_cli("verify-usage", export, "--license", customer.license)
    assert rc == 4 and "signed by unknown key" in err
    rc, _, err = vendor_cli("verify-usage", customer.report, "--license", customer.license)
    assert rc == 4 and "is not a usage export" in err


def test_a_broken_consistency_proof_is_refused(customer: Customer, tmp_path: Path) -> None:
    me = customer.identity
    ledger = Ledger(tmp_path / "ledger", durable=False)
    for _ in range(5):
        ledger.append(RecordKind.USAGE, usage())
    envelope = sign_export(ledger.records(), 3, me)
    payload = json.loads(envelope.payload)
    payload["since"]["root"] = "0" * 64  # claims another history before record 3
    forged = tmp_path / "forged.json"
    forged.write_bytes(me.sign(dsse.USAGE_TYPE, json.dumps(payload).encode()).dumps())
    rc, _, err = vendor_cli("verify-usage", forged, "--license", customer.license)
    assert rc == 4 and "the consistency proof from tree size 3 to 5 does not verify" in err
