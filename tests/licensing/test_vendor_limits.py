"""The service's JSON limits: depth (400, never a RecursionError) and size (413), in the
body and inside signed payloads; the depth scan against `json` itself."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from luminal.licensing import dsse
from luminal.licensing.request import make_request
from luminal.licensing.timeutil import to_iso, utcnow
from luminal_vendor.app import ServiceConfig, create_app
from luminal_vendor.bodies import MAX_DEPTH, BodyRejected, Limits, loads, nesting_depth
from luminal_vendor.storage import Store
from tests.helpers.licensing_helpers import Vendor, make_terms, other_identity


@pytest.fixture
def client(vendor: Vendor, tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    store = Store(tmp_path / "vendor.db").init()
    key = store.add_licensee("acme", "ACME", make_terms().to_json(), 2, to_iso(utcnow()))
    # 64 KiB bodies (usage uploads: 256 KiB here, 32 MiB by default), depth 32
    app = create_app(store, vendor.signer, ServiceConfig(max_usage_body=256 * 1024))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, {"Authorization": f"Bearer {key}"}


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


@pytest.mark.parametrize("path", ["/v1/activate", "/v1/usage"])
def test_a_30000_deep_array_is_a_clear_400(client, path: str) -> None:  # type: ignore[no-untyped-def]
    c, auth = client
    for body in (_deep(30_000), b'{"request": ' + _deep(30_000) + b"}"):
        assert len(body) < ServiceConfig().max_body  # the size limit does not catch it
        resp = c.post(path, content=body, headers={**auth, "content-type": "application/json"})
        assert resp.status_code == 400
        assert resp.json() == {"error": f"body nests JSON deeper than {MAX_DEPTH} levels"}


def test_deep_json_inside_a_signed_payload_is_a_400(client) -> None:  # type: ignore[no-untyped-def]
    c, auth = client
    me = other_identity()
    deep = me.sign(dsse.REQUEST_TYPE, _deep(20_000))
    resp = c.post("/v1/activate", json={"request": deep.to_json()}, headers=auth)
    assert resp.status_code == 400
    assert resp.json()["error"] == (
        f"activation request payload nests JSON deeper than {MAX_DEPTH} levels"
    )
    upload = me.sign(dsse.UPLOAD_TYPE, _deep(20_000))
    resp = c.post("/v1/usage", json={"upload": upload.to_json()}, headers=auth)
    assert resp.status_code == 400 and "usage upload payload nests JSON deeper" in resp.text
    # an ordinary request still goes through
    ok = c.post("/v1/activate", json={"request": make_request(me).to_json()}, headers=auth)
    assert ok.status_code == 200, ok.text


def test_bodies_over_the_limit_are_413_declared_or_streamed(client) -> None:  # type: ignore[no-untyped-def]
    c, auth = client
    limit = ServiceConfig().max_body
    big = json.dumps({"request": "x" * limit}).encode()
    resp = c.post("/v1/activate", content=big, headers=auth)
    assert resp.status_code == 413 and resp.json()["error"] == f"body over {limit} bytes"

    usage_limit = 256 * 1024  # a usage upload carries ledger records: its own, larger limit

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(usage_limit // 1024 + 2):
            yield b" " * 1024

    resp = c.post("/v1/usage", content=chunks(), headers=auth)
    assert resp.status_code == 413 and resp.json()["error"] == f"body over {usage_limit} bytes"


def test_malformed_envelopes_are_400_not_500(client) -> None:  # type: ignore[no-untyped-def]
    c, auth = client
    payload = base64.b64encode(b"{").decode()
    for body in (
        b"hello",
        b'"hello"',
        b'{"request": "hello"}',
        json.dumps({"request": {"payloadType": dsse.REQUEST_TYPE, "payload": payload}}).encode(),
        json.dumps({"upload": {"payloadType": dsse.UPLOAD_TYPE, "payload": payload}}).encode(),
    ):
        for path in ("/v1/activate", "/v1/usage"):
            resp = c.post(path, content=body, headers=auth)
            assert resp.status_code == 400, (path, body, resp.text)
            assert set(resp.json()) == {"error"}


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"a": [1, {"b": "[[[[["}]}',
        '"\\\\"',
        '["\\"[[[", [[]]]',
        '{"a": {"b": {"c": []}}}',
        "[" * 40 + "]" * 40,
    ],
)
def test_the_depth_scan_agrees_with_json(text: str) -> None:
    def depth(value: object) -> int:
        if isinstance(value, list):
            return 1 + max(map(depth, value), default=0)
        if isinstance(value, dict):
            return 1 + max(map(depth, value.values()), default=0)
        return 0

    assert nesting_depth(text.encode(), sys.maxsize) == depth(json.loads(text))


def test_loads_limits() -> None:
    limits = Limits(max_bytes=100, max_depth=3)
    assert loads(b"[[[1]]]", limits) == [[[1]]]
    with pytest.raises(BodyRejected) as err:
        loads(b"[[[[1]]]]", limits)
    assert (err.value.status, err.value.message) == (400, "body nests JSON deeper than 3 levels")
    with pytest.raises(BodyRejected) as err:
        loads(b" " * 101, limits)
    assert err.value.status == 413
