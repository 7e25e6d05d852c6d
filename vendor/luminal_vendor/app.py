"""The vendor service (ASGI, starlette): online activation and usage upload.

    POST /v1/activate   Authorization: Bearer <licensee API key>
                        {"request": <activation request envelope>}  -> {"license": <envelope>}
    POST /v1/usage      Authorization: Bearer <licensee API key>
                        {"upload": <upload envelope signed by an activated install>}
    GET  /v1/health

Every POST is checked first for body size (413), rate (429 with Retry-After; per licensee,
or per client address for an unknown key) and licensee key (401); then for a well-formed,
signed body (400: JSON nested deeper than `max_depth`, in the body or in a signed payload,
is refused before it is parsed), replay (409: the signed timestamp must be inside the
window and the nonce unseen) and the licensee's limits (403: too many installs, install
not activated).  A usage export must be well formed and signed (400) and continue the
install's accepted ledger (409: a gap, a fork, a broken chain, an unregistered artifact;
`usage.py`), and is stored once however often it is re-wrapped.  Errors are JSON
`{"error": "..."}`.  Rate buckets live in the app instance (one process); install counts
and usage totals live in the store, decided in one transaction each (`storage.py`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from luminal.errors import IntegrityError, LuminalError
from luminal.licensing import dsse, keys
from luminal.licensing.chain import with_certificates
from luminal.licensing.keys import Keyring, decode_public
from luminal.licensing.request import read_request
from luminal.licensing.timeutil import from_iso, to_iso, utcnow
from luminal_vendor.bodies import MAX_DEPTH, BodyRejected, Limits, loads
from luminal_vendor.issuer import Signer, Terms, bind_to, issue
from luminal_vendor.storage import Activation, LicenseeRecord, Store
from luminal_vendor.usage import LedgerRejected, UsageRejected, check_licenses, parse_export


@dataclass(frozen=True)
class ServiceConfig:
    max_body: int = 64 * 1024
    rate_per_minute: int = 60
    replay_window: timedelta = timedelta(minutes=5)
    max_depth: int = MAX_DEPTH
    #: A usage upload carries a period's ledger records (a month: tens of thousands).
    max_usage_body: int = 32 * 2**20

    @property
    def limits(self) -> Limits:
        return Limits(self.max_body, self.max_depth)

    @property
    def usage_limits(self) -> Limits:
        return Limits(self.max_usage_body, self.max_depth)


class RateLimiter:
    """Token buckets by key: `per_minute` requests a minute, bursts up to `per_minute`."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(max(per_minute, 1))
        self.refill = self.capacity / 60.0
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def wait(self, key: str) -> float:
        """0 if a request under `key` may go now (and take a token), else seconds to wait."""
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.refill)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.refill


def vendor_roots() -> Keyring:
    """The keys a license in a usage record must chain to: the release roots only."""
    return with_certificates(keys.shipped_keyring(), ())


def _fail(status: int, message: str, headers: dict[str, str] | None = None) -> HTTPException:
    return HTTPException(status_code=status, detail=message, headers=headers)


def create_app(
    store: Store,
    signer: Signer,
    config: ServiceConfig = ServiceConfig(),
    *,
    now: Callable[[], datetime] = utcnow,
) -> Starlette:
    limiter = RateLimiter(config.rate_per_minute)
    seen = [0]  # requests since the last prune of old nonces

    async def authenticate(request: Request, max_body: int = config.max_body) -> LicenseeRecord:
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_body:
            raise _fail(413, f"body over {max_body} bytes")
        auth = request.headers.get("authorization", "")
        scheme, _, key = auth.partition(" ")
        record = None
        if scheme.lower() == "bearer" and key.strip():
            record = await run_in_threadpool(store.licensee_for_key, key.strip())
        bucket = record.id if record else f"ip:{request.client.host if request.client else '?'}"
        wait = limiter.wait(bucket)
        if wait:
            raise _fail(429, "rate limit exceeded", {"Retry-After": str(int(wait) + 1)})
        if record is None:
            raise _fail(401, "unknown licensee: missing or invalid API key")
        return record

    async def read_json(request: Request, limits: Limits = config.limits) -> dict[str, Any]:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_bytes:
                raise _fail(413, f"body over {limits.max_bytes} bytes")
        data = parse(bytes(body), "body", limits)
        if not isinstance(data, dict):
            raise _fail(400, "body must be a JSON object")
        return data

    def parse(data: bytes, what: str, limits: Limits = config.limits) -> object:
        try:
            return loads(data, limits, what)
        except BodyRejected as err:
            raise _fail(err.status, err.message) from None

    def envelope(data: object, what: str, limits: Limits = config.limits) -> dsse.Envelope:
        """A signed envelope from the body whose payload is JSON within the limits (so
        that parsing it later cannot recurse without bound)."""
        try:
            env = dsse.Envelope.from_json(data)
        except LuminalError as err:
            raise _fail(400, f"{what}: {err}") from None
        parse(env.payload, f"{what} payload", limits)
        return env

    async def fresh(licensee: LicenseeRecord, nonce: str, created_at: datetime) -> datetime:
        t = now()
        if abs(t - created_at) > config.replay_window:
            raise _fail(
                409,
                f"replayed or stale request: created {to_iso(created_at)}, "
                f"outside the {int(config.replay_window.total_seconds())} s window",
            )
        if not await run_in_threadpool(store.use_nonce, nonce, licensee.id, to_iso(t)):
            raise _fail(409, "replayed request: nonce already used")
        seen[0] += 1
        if seen[0] % 1000 == 0:  # a nonce older than twice the window can no longer pass
            await run_in_threadpool(store.prune_nonces, to_iso(t - 2 * config.replay_window))
        return t

    async def activate(request: Request) -> Response:
        licensee = await authenticate(request)
        body = await read_json(request)
        env = envelope(body.get("request"), "activation request")
        try:
            req = read_request(env, "in body")
        except (LuminalError, IntegrityError) as err:
            raise _fail(400, str(err)) from None
        t = await fresh(licensee, req.nonce, req.created_at)
        try:
            terms = Terms.from_json(licensee.terms, f"terms of {licensee.id}")
        except LuminalError as err:
            raise _fail(500, str(err)) from None
        # Issued first, recorded (or thrown away) in one transaction with the install count.
        claims, license_env = issue(terms, signer, bind_to(req), now=t)
        record = Activation(
            claims.license_id,
            licensee.id,
            req.install_keyid,
            req.install_public_key,
            req.fingerprint,
            to_iso(t),
            json.dumps(license_env.to_json()),
        )
        if not await run_in_threadpool(store.activate, record):
            raise _fail(
                403, f"licensee {licensee.id} has used all {licensee.max_installs} installs"
            )
        return JSONResponse({"license": license_env.to_json(), "license_id": claims.license_id})

    async def usage(request: Request) -> Response:
        licensee = await authenticate(request, config.max_usage_body)
        body = await read_json(request, config.usage_limits)
        upload = envelope(body.get("upload"), "usage upload", config.usage_limits)
        try:
            if upload.payload_type != dsse.UPLOAD_TYPE:
                raise IntegrityError(f"payload type {upload.payload_type!r} is not a usage upload")
            payload = upload.payload_json()
            if not isinstance(payload, dict):
                raise IntegrityError("upload payload must be an object")
            keyid = str(payload.get("install_keyid", ""))
            created = from_iso(payload.get("created_at"), "created_at")
            nonce = str(payload.get("nonce", ""))
        except LuminalError as err:
            raise _fail(400, str(err)) from None
        pub = await run_in_threadpool(store.install_public_key, licensee.id, keyid)
        if pub is None:
            raise _fail(403, f"install {keyid} is not activated for licensee {licensee.id}")
        public = decode_public(pub)
        key = {keyid: public}
        try:
            dsse.verify(upload, key)
            export = dsse.Envelope.from_json(payload.get("export"))
            if export.payload_type != dsse.USAGE_TYPE:
                raise IntegrityError(f"export payload type {export.payload_type!r} is not usage")
            dsse.verify(export, key)
        except LuminalError as err:
            raise _fail(400, f"upload rejected: {err}") from None
        if not nonce:
            raise _fail(400, "upload has no nonce")
        try:
            records = parse_export(export, config.usage_limits, public)
        except UsageRejected as err:
            raise _fail(400, str(err)) from None
        t = await fresh(licensee, nonce, created)
        try:
            check_licenses(records, vendor_roots(), keyid)
            receipt = await run_in_threadpool(
                store.record_usage,
                licensee.id,
                keyid,
                to_iso(t),
                records,
                json.dumps(export.to_json()),
            )
        except LedgerRejected as err:
            raise _fail(409, str(err)) from None
        return JSONResponse({"accepted": True, "id": receipt.id, "duplicate": receipt.duplicate})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "keyid": signer.keyid})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, exc.status_code, headers=exc.headers)

    return Starlette(
        routes=[
            Route("/v1/activate", activate, methods=["POST"]),
            Route("/v1/usage", usage, methods=["POST"]),
            Route("/v1/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
    )
