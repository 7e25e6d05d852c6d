"""`luminal-vendor serve` on 127.0.0.1: online activation, usage upload, and refusals."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import pytest

from luminal.errors import ActivationError
from luminal.licensing import activation, dsse
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity, load_or_create
from luminal.licensing.request import make_request
from luminal.licensing.timeutil import to_iso, utcnow
from luminal.metering.ledger import Ledger, RecordKind
from luminal.metering.ledger.export import make_export, sign_export
from luminal_vendor.app import ServiceConfig, create_app
from luminal_vendor.storage import Store
from tests.helpers.ledger_helpers import usage
from tests.helpers.licensing_helpers import Vendor, make_terms, other_identity, vendor_server

MAX_BODY = 8 * 1024


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Vendor, Store]]:
    folder = tmp_path_factory.mktemp("vendor-service")
    vendor = Vendor.create(folder)
    db = folder / "vendor.db"
    store = Store(f"sqlite:///{db}").init()
    with vendor_server(vendor.key_path, db, "--max-body", str(MAX_BODY), "--rate", "600") as url:
        yield url, vendor, store


def _licensee(store: Store, max_installs: int = 2) -> str:
    lid = f"acme-{secrets.token_hex(3)}"
    return store.add_licensee(
        lid, "ACME", make_terms(licensee=lid).to_json(), max_installs, to_iso(utcnow())
    )


def _post(url: str, path: str, key: str, body: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(url + path, json=body, headers=headers, timeout=10, trust_env=False)


def test_online_activation_round_trip(cli, service, tmp_path: Path) -> None:
    url, vendor, store = service
    key = _licensee(store)
    assert cli("license", "trust", vendor.pub_path, "--evaluation")[0] == 0
    rc, out, err = cli("license", "activate", "--server", url, "--key", key)
    assert rc == 0, err
    assert "activated license LIC-" in out and "NOT a production key" in out
    rc, out, err = cli("license", "check", "--feature", "meter", "--target", "cpu")
    assert rc == 0, err
    data = json.loads(cli("license", "show", "--json")[1])
    assert data["license"]["binding"]["install_keyid"] == data["install"]["keyid"]
    assert data["license"]["licensee"]["id"].startswith("acme-")
    assert data["license"]["evaluation"] is True


def test_unknown_licensee_is_refused(cli, service) -> None:
    url, _, _ = service
    rc, _, err = cli("license", "activate", "--server", url, "--key", "lk_not-a-real-key")
    assert rc == 3
    assert "the server refused (401): unknown licensee: missing or invalid API key" in err
    assert _post(url, "/v1/activate", "", {}).status_code == 401


def test_oversized_body_is_refused(service) -> None:
    url, _, store = service
    key = _licensee(store)
    resp = _post(url, "/v1/activate", key, {"request": "x" * (MAX_BODY + 1)})
    assert resp.status_code == 413 and resp.json()["error"] == f"body over {MAX_BODY} bytes"


def test_replayed_and_stale_requests_are_refused(service, home: Home) -> None:
    url, _, store = service
    key = _licensee(store)
    body = {"request": make_request(load_or_create(home)).to_json()}
    first = _post(url, "/v1/activate", key, body)
    assert first.status_code == 200 and first.json()["license"]["payloadType"] == dsse.LICENSE_TYPE
    again = _post(url, "/v1/activate", key, body)
    assert again.status_code == 409 and "nonce already used" in again.json()["error"]
    stale = make_request(load_or_create(home), now=utcnow() - timedelta(hours=1))
    resp = _post(url, "/v1/activate", key, {"request": stale.to_json()})
    assert resp.status_code == 409 and "outside the 300 s window" in resp.json()["error"]


def test_bad_signature_and_install_limit(service) -> None:
    url, _, store = service
    key = _licensee(store, max_installs=1)
    env = make_request(other_identity())
    claims = {**json.loads(env.payload), "fingerprint": "0" * 32}
    forged = dsse.Envelope(env.payload_type, json.dumps(claims).encode(), env.signatures)
    resp = _post(url, "/v1/activate", key, {"request": forged.to_json()})
    assert resp.status_code == 400 and "signature invalid" in resp.json()["error"]
    assert (
        _post(
            url, "/v1/activate", key, {"request": make_request(other_identity()).to_json()}
        ).status_code
        == 200
    )
    resp = _post(url, "/v1/activate", key, {"request": make_request(other_identity()).to_json()})
    assert resp.status_code == 403 and "has used all 1 installs" in resp.json()["error"]


ARTIFACT = "sha256:" + "ab" * 32
OTHER_ARTIFACT = "sha256:" + "cd" * 32


class _Site:
    """An install's ledger and the exports it makes (`luminal meter export`)."""

    def __init__(self, me: InstallIdentity, folder: Path) -> None:
        self.me = me
        self.ledger = Ledger(folder, durable=False)

    def export(self, *usages: dict[str, object]) -> dsse.Envelope:
        self.ledger.append_many([(RecordKind.USAGE, u) for u in usages])
        return make_export(self.ledger, self.me)[0]


def _activated(url: str, store: Store, home: Home, tmp_path: Path) -> tuple[str, str, _Site]:
    """(licensee id, API key, this install activated for it), ARTIFACT registered."""
    key = _licensee(store)
    lid = store.licensee_for_key(key).id  # type: ignore[union-attr]
    store.add_artifact(lid, ARTIFACT, "model.lmnl", to_iso(utcnow()))
    me = load_or_create(home)
    resp = _post(url, "/v1/activate", key, {"request": make_request(me).to_json()})
    assert resp.status_code == 200, resp.text
    return lid, key, _Site(me, tmp_path / "ledger")


def test_usage_upload(service, home: Home, tmp_path: Path) -> None:
    url, _, store = service
    lid, key, site = _activated(url, store, home, tmp_path)
    me = site.me
    result = activation.upload_usage(url, key, site.export(usage()), me)
    assert result["accepted"] is True and result["duplicate"] is False
    assert store.usage_count(lid) == 1
    assert [r.seq for r in store.ledger(me.keyid)] == [0]
    # an install that never activated for this licensee
    stranger = other_identity()
    with pytest.raises(ActivationError, match=r"refused \(403\): install .* is not activated"):
        activation.upload_usage(url, key, _Site(stranger, tmp_path / "s").export(usage()), stranger)
    # a usage export signed by someone else inside a genuine upload
    foreign = other_identity().sign(dsse.USAGE_TYPE, b"{}")
    with pytest.raises(
        ActivationError, match=r"refused \(400\): upload rejected: signed by unknown key"
    ):
        activation.upload_usage(url, key, foreign, me)
    assert store.usage_count(lid) == 1


def test_the_same_export_rewrapped_is_stored_once(service, home: Home, tmp_path: Path) -> None:
    url, _, store = service
    lid, key, site = _activated(url, store, home, tmp_path)
    export = site.export(usage(calls=3))
    first = activation.upload_usage(url, key, export, site.me)
    again = activation.upload_usage(url, key, export, site.me)  # a new upload: fresh nonce, time
    assert (again["id"], again["duplicate"]) == (first["id"], True)
    assert store.usage_count(lid) == 1
    later = activation.upload_usage(url, key, site.export(usage(calls=4)), site.me)
    assert later["duplicate"] is False and store.usage_count(lid) == 2
    assert [r.seq for r in store.ledger(site.me.keyid)] == [0, 1, 2]  # usage, export-made, usage


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        (b"hello", 400, "usage export is not JSON"),
        (b'"hello"', 400, "usage export must be a JSON object"),
        (b'{"version": 2}', 400, "usage export: missing checkpoint, consistency, created_at"),
        (usage(busy_ns=-5), 409, "rejected (chain): record 0 (usage): busy_ns -5 is negative"),
        (usage(calls=10**15), 409, "rejected (chain): record 0 (usage): calls 1000000000000000"),
        (usage(artifact="sha256:" + "0" * 63), 409, "artifact must be 'sha256:' and 64 hex"),
    ],
)
def test_usage_that_breaks_the_schema_or_the_chain_is_refused(
    service, home: Home, tmp_path: Path, payload: object, status: int, message: str
) -> None:
    url, _, store = service
    lid, key, site = _activated(url, store, home, tmp_path)
    if isinstance(payload, bytes):
        export = site.me.sign(dsse.USAGE_TYPE, payload)
    else:  # a forged record, signed by the install itself (its key is on the customer's disk)
        records = site.ledger.append_many([(RecordKind.USAGE, payload)])  # type: ignore[list-item]
        export = sign_export(records, 0, site.me)
    with pytest.raises(ActivationError, match=rf"refused \({status}\): ") as err:
        activation.upload_usage(url, key, export, site.me)
    assert message in str(err.value)
    assert store.usage_count(lid) == 0


def test_usage_must_name_known_artifacts_and_continue_the_ledger(
    service, home: Home, tmp_path: Path
) -> None:
    url, _, store = service
    lid, key, site = _activated(url, store, home, tmp_path)
    me = site.me
    with pytest.raises(ActivationError, match=f"artifact\\(s\\) unknown to licensee {lid}"):
        activation.upload_usage(url, key, site.export(usage(artifact=OTHER_ARTIFACT)), me)
    store.add_artifact(lid, OTHER_ARTIFACT, "other.lmnl", to_iso(utcnow()))
    replay = make_export(site.ledger, me, 0)[0]  # the refused records, exported again
    assert activation.upload_usage(url, key, replay, me)["accepted"]
    skipped = site.export(usage())  # never sent
    with pytest.raises(ActivationError, match=r"refused \(409\): usage export rejected \(gap\)"):
        activation.upload_usage(url, key, site.export(usage()), me)
    assert activation.upload_usage(url, key, skipped, me)["accepted"]
    assert store.usage_count(lid) == 2
    # ledgers are per install: another install of the licensee starts from zero
    other = other_identity()
    assert (
        _post(url, "/v1/activate", key, {"request": make_request(other).to_json()}).status_code
        == 200
    )
    assert activation.upload_usage(url, key, _Site(other, tmp_path / "o").export(usage()), other)
    # an install's export that claims to be another install's is refused
    claims_me = _Site(other, tmp_path / "p").export(usage())
    with pytest.raises(ActivationError, match=r"refused \(400\): upload rejected: signed by"):
        activation.upload_usage(url, key, claims_me, me)


def test_rate_limit_per_licensee(vendor: Vendor, tmp_path: Path, home: Home) -> None:
    store = Store(tmp_path / "rl.db").init()
    key = store.add_licensee("acme", "ACME", make_terms().to_json(), 10, to_iso(utcnow()))
    app = create_app(store, vendor.signer, ServiceConfig(rate_per_minute=3))
    me = load_or_create(home)

    async def four_requests() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Authorization": f"Bearer {key}"}
            return [
                await client.post(
                    "/v1/activate", json={"request": make_request(me).to_json()}, headers=headers
                )
                for _ in range(4)
            ]

    codes = anyio.run(four_requests)
    assert [r.status_code for r in codes] == [200, 200, 200, 429]
    assert codes[-1].json()["error"] == "rate limit exceeded"
    assert int(codes[-1].headers["retry-after"]) >= 1


def test_client_retries_with_backoff_then_gives_up(home: Home, vendor: Vendor) -> None:
    seen: list[int] = []
    sleeps: list[float] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        if len(seen) < 3:
            return httpx.Response(503, json={"error": "busy"})
        raise httpx.ConnectError("down", request=request)

    with pytest.raises(
        ActivationError, match=r"no answer after 4 attempts \(last: ConnectError: down\)"
    ):
        activation.activate_online(
            "https://license.example.com",
            "lk_x",
            transport=httpx.MockTransport(flaky),
            sleep=sleeps.append,
        )
    assert len(seen) == 4 and sleeps == [0.5, 1.0, 2.0]


def test_client_accepts_a_license_after_a_retry(home: Home, vendor: Vendor) -> None:
    from luminal.licensing.request import read_request
    from luminal_vendor.issuer import bind_to, issue

    nonces: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        env = dsse.Envelope.from_json(json.loads(request.content)["request"])
        req = read_request(env, "mock")
        nonces.append(req.nonce)
        if len(nonces) == 1:
            return httpx.Response(429, headers={"Retry-After": "1"}, json={"error": "slow down"})
        assert request.headers["authorization"] == "Bearer lk_x"
        _, lic = issue(make_terms(), vendor.signer, bind_to(req))
        return httpx.Response(200, json={"license": lic.to_json()})

    sleeps: list[float] = []
    status = activation.activate_online(
        "https://license.example.com",
        "lk_x",
        keyring=vendor.keyring(),
        transport=httpx.MockTransport(server),
        sleep=sleeps.append,
    )
    assert status.state == "valid" and sleeps == [1.0]
    assert len(set(nonces)) == 2  # every try is a fresh request
    assert home.license.exists()


def test_plain_http_only_to_loopback(cli) -> None:
    rc, _, err = cli("license", "activate", "--server", "http://license.example.com", "--key", "k")
    assert rc == 2 and "plain http is allowed only to localhost" in err


def test_meter_sync_uploads_once_and_records_the_answer(
    cli, service, home: Home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    url, _, store = service
    lid, key, _ = _activated(url, store, home, tmp_path)
    ledger = Ledger.of(home)
    ledger.append(RecordKind.USAGE, usage())
    rc, out, err = cli("meter", "export", "-o", tmp_path / "usage.json", "--json")
    assert rc == 0, err
    for expected in (False, True):  # the same export twice: stored once
        rc, out, err = cli(
            "meter", "sync", tmp_path / "usage.json", "--server", url, "--key", key, "--json"
        )
        assert rc == 0, err
        assert json.loads(out)["duplicate"] is expected
    assert store.usage_count(lid) == 1
    acks = [r for r in ledger.records() if r.kind is RecordKind.VENDOR_ACK]
    assert len(acks) == 2 and acks[0].body["receipt"] == acks[1].body["receipt"]
    # without a file: a new export since the last, sent
    rc, out, err = cli("meter", "sync", "--server", url, "--key", key)
    assert rc == 0 and "sent records 1..3" in out, err  # export-made and both acks
    assert store.usage_count(lid) == 2
    rc, _, err = cli("meter", "sync", "--server", url, "--key", "lk_wrong")
    assert rc == 3 and "refused (401)" in err
