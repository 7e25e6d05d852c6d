"""The vendor keyring: shipped public keys, local trust, validity windows, revocation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources

from luminal.licensing.keys import (
    Revocation,
    load_keyring,
    local_keyring,
    revoke_locally,
    shipped_keyring,
    trust_locally,
)
from tests.helpers.licensing_helpers import Vendor


def test_shipped_keyring_holds_only_public_root_keys() -> None:
    text = resources.files("luminal.licensing").joinpath("keyring.json").read_text()
    data = json.loads(text)
    assert "PRIVATE" not in text and "private" not in data["roots"][0]
    ring = shipped_keyring()
    # roots certify signing keys; they are never license signers themselves
    assert ring.roots and all(k.production for k in ring.roots) and ring.keys == ()
    key = ring.roots[0]
    assert key.valid_at(datetime(2026, 1, 1, tzinfo=UTC))
    assert not key.valid_at(datetime(2024, 1, 1, tzinfo=UTC))


def test_local_trust_adds_non_production_keys_and_revocations(home, vendor: Vendor) -> None:
    home.ensure()
    assert local_keyring(home.trusted_keys).keys == ()
    trust_locally(home.trusted_keys, vendor.public)
    ring = load_keyring(home.trusted_keys)
    key = ring.get(vendor.public.keyid)
    assert key is not None and not key.production
    assert home.trusted_keys.stat().st_mode & 0o777 == 0o600
    assert vendor.public.keyid in ring.public_keys()

    shipped = shipped_keyring().roots[0].keyid
    revoke_locally(home.trusted_keys, Revocation(shipped, "2026-01-01", "rotated"))
    ring = load_keyring(home.trusted_keys)
    assert ring.revocation(shipped) is not None
    assert shipped not in ring.public_keys()
