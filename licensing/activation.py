"""Getting a license onto an install: from a file (air-gapped) or from the vendor service.

Air-gapped::

    luminal license request -o request.json      # signed by the install key
    (vendor)  luminal-vendor activate request.json -k vendor.key --terms terms.json -o license.json
    luminal license install license.json

Online, `activate_online` sends the same signed request to `POST {server}/v1/activate`
with the licensee's key in the Authorization header, over HTTPS (TLS verified; a custom
CA bundle may be given), honouring HTTP(S)_PROXY / NO_PROXY from the environment, with
timeouts and retries with exponential backoff on network errors, 429 and 5xx.  Each try
is a fresh request (new nonce), since the service refuses a nonce it has seen.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import ssl
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from luminal.errors import ActivationError, LicenseError, UsageError
from luminal.licensing import dsse
from luminal.licensing.clockreset import fresh_activation
from luminal.licensing.enforce import LicenseStatus, evaluate, verify_license
from luminal.licensing.home import Home, write_atomic
from luminal.licensing.identity import InstallIdentity, load_or_create
from luminal.licensing.keys import Keyring, load_keyring
from luminal.licensing.request import make_request
from luminal.licensing.timeutil import aware, to_iso, utcnow

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 30.0


def install(
    raw: bytes,
    where: str,
    *,
    home: Home | None = None,
    keyring: Keyring | None = None,
    now: datetime | None = None,
) -> LicenseStatus:
    """Verify a license file (signature, dates, binding) and make it this install's license.

    A freshly issued license bound to this install also ends a recorded clock excursion
    (`clockreset.fresh_activation`): the vendor's signature vouches for the time.
    """
    home = home or Home.resolve()
    keyring = keyring if keyring is not None else load_keyring(home.trusted_keys)
    claims, signer = verify_license(raw, keyring, where)
    fresh_activation(claims, signer, load_or_create(home), home, aware(now) if now else utcnow())
    status = evaluate(claims, signer, now, home=home)
    home.ensure()
    write_atomic(home.license, raw)
    return status


def check_server_url(server: str) -> str:
    """`server` without a trailing slash; plain HTTP only to a loopback address."""
    parts = urlsplit(server)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UsageError(f"--server {server!r}: expected an https:// URL")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise UsageError(f"--server {server!r}: plain http is allowed only to localhost; use https")
    return server.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_client(
    *, ca_bundle: Path | None = None, timeout: float = 10.0, transport: Any = None
) -> httpx.Client:
    """An httpx client: TLS verified (system CAs or `ca_bundle`), proxies from the env."""
    verify: ssl.SSLContext | bool = True
    if ca_bundle is not None:
        try:
            verify = ssl.create_default_context(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as err:
            raise UsageError(f"--ca-bundle {ca_bundle}: {err}") from None
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        verify=verify,
        trust_env=True,
        follow_redirects=False,
        transport=transport,
    )


def post_with_retries(
    client: httpx.Client,
    url: str,
    body: Callable[[], dict[str, object]],
    headers: dict[str, str],
    *,
    attempts: int = 4,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> httpx.Response:
    """POST a fresh `body()` up to `attempts` times; the first answer that is not a retry."""
    last = ""
    for attempt in range(attempts):
        delay = backoff * 2**attempt
        try:
            resp = client.post(url, json=body(), headers=headers)
        except httpx.TransportError as err:
            last = f"{type(err).__name__}: {err}"
        else:
            if resp.status_code not in RETRY_STATUS:
                return resp
            last = f"HTTP {resp.status_code} {_detail(resp)}"
            retry_after = resp.headers.get("retry-after", "")
            if retry_after.isdigit():
                delay = min(float(retry_after), MAX_RETRY_AFTER)
        if attempt + 1 < attempts:
            sleep(delay)
    raise ActivationError(f"{url}: no answer after {attempts} attempts (last: {last})")


def _detail(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("error", ""))
    except (ValueError, AttributeError):
        return resp.text[:200]


def _refused(url: str, resp: httpx.Response) -> ActivationError:
    return ActivationError(f"{url}: the server refused ({resp.status_code}): {_detail(resp)}")


def activate_online(
    server: str,
    api_key: str,
    *,
    home: Home | None = None,
    keyring: Keyring | None = None,
    ca_bundle: Path | None = None,
    timeout: float = 10.0,
    attempts: int = 4,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    transport: Any = None,
) -> LicenseStatus:
    """Ask the vendor service for a license bound to this install, verify and install it."""
    if not api_key:
        raise UsageError("--key: the activation key is empty")
    home = home or Home.resolve()
    identity = load_or_create(home)
    url = check_server_url(server) + "/v1/activate"
    headers = {"Authorization": f"Bearer {api_key}"}
    with http_client(ca_bundle=ca_bundle, timeout=timeout, transport=transport) as client:
        resp = post_with_retries(
            client,
            url,
            lambda: {"request": make_request(identity).to_json()},
            headers,
            attempts=attempts,
            backoff=backoff,
            sleep=sleep,
        )
    if resp.status_code != 200:
        raise _refused(url, resp)
    try:
        raw = json.dumps(resp.json()["license"], indent=2).encode() + b"\n"
    except (ValueError, KeyError, TypeError):
        raise ActivationError(f"{url}: the answer holds no license") from None
    try:
        return install(raw, f"from {server}", home=home, keyring=keyring)
    except LicenseError as err:
        raise type(err)(f"{err} (license received from {server})") from None


def upload_usage(
    server: str,
    api_key: str,
    export: dsse.Envelope,
    identity: InstallIdentity,
    *,
    ca_bundle: Path | None = None,
    timeout: float = 10.0,
    attempts: int = 4,
    sleep: Callable[[float], None] = time.sleep,
    transport: Any = None,
) -> dict[str, object]:
    """Send a signed usage export to `POST {server}/v1/usage`, wrapped in a signed upload."""
    url = check_server_url(server) + "/v1/usage"

    def body() -> dict[str, object]:
        upload = {
            "install_keyid": identity.keyid,
            "nonce": secrets.token_hex(16),
            "created_at": to_iso(utcnow()),
            "export": export.to_json(),
        }
        env = identity.sign(dsse.UPLOAD_TYPE, json.dumps(upload).encode())
        return {"upload": env.to_json()}

    headers = {"Authorization": f"Bearer {api_key}"}
    with http_client(ca_bundle=ca_bundle, timeout=timeout, transport=transport) as client:
        resp = post_with_retries(client, url, body, headers, attempts=attempts, sleep=sleep)
    if resp.status_code != 200:
        raise _refused(url, resp)
    return dict(resp.json())
