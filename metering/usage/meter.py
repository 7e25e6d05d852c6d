"""A Session's meter: its counter flushed to the ledger every `interval_s`, at exit, on close.

    Session.run --add--> UsageCounter   (in memory: no I/O on the inference path)
                              |
    Meter thread, every interval_s; atexit; Session.close(); the Session collected
                              v  take()
    Ledger.append_many: [license-installed, when the license changed] + usage

A crash loses at most the counts of one interval.  A flush that cannot write (disk full,
a ledger that does not verify) logs a warning and keeps the counts for the next one:
metering never stops inference.  The device entitlement is checked on this thread too
(`devices`), from the installed license, re-read only when its file changes.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from luminal.errors import LuminalError
from luminal.licensing.home import Home
from luminal.metering.ledger.records import RecordKind
from luminal.metering.ledger.store import Ledger, backwards
from luminal.metering.usage.counter import UsageCounter
from luminal.metering.usage.devices import device_use

log = logging.getLogger("luminal.metering")

DEFAULT_INTERVAL_S = 60.0


@dataclass(frozen=True)
class MeterConfig:
    interval_s: float = DEFAULT_INTERVAL_S
    home: Home | None = None  # default: $LUMINAL_HOME when the artifact is loaded


@dataclass(frozen=True)
class _License:
    digest: str
    body: dict[str, Any] | None  # the license-installed record body; None: not valid here
    license_id: str
    devices: int | None


class Meter:
    """Flushes one artifact's counter; `close()` flushes the last counts and stops."""

    def __init__(
        self, artifact: str, device_kind: str, counter: UsageCounter, config: MeterConfig
    ) -> None:
        self.artifact = artifact
        self.device_kind = device_kind
        self.counter = counter
        self.config = config
        self._lock = threading.Lock()  # one flush at a time
        self._stop = threading.Event()
        self._license: _License | None = None
        self._recorded_license: str | None = None
        self._device: str | None = None
        self._home = config.home or Home.resolve()  # the install the artifact was loaded in
        self._thread = threading.Thread(target=self._loop, name="luminal-meter", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def ledger(self) -> Ledger:
        return Ledger.of(self._home)

    def _loop(self) -> None:
        while not self._stop.wait(self.config.interval_s):
            self.flush()

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        atexit.unregister(self.close)
        self.flush()

    def flush(self) -> None:
        with self._lock:
            calls, busy, window = self.counter.take()
            if calls == 0:
                return
            try:
                self._write(calls, busy, window)
            except Exception as err:  # a flush never takes inference down, whatever failed
                self.counter.give_back(calls, busy, window)
                log.warning("usage not recorded yet (kept for the next flush): %s", err)

    def _write(self, calls: int, busy: int, window: int) -> None:
        home = self._home
        ledger = Ledger.of(home)
        lic = self._license_state(home)
        items: list[tuple[RecordKind, dict[str, Any]]] = []
        if lic.body is not None and lic.digest != self._last_license(ledger):
            items.append((RecordKind.LICENSE_INSTALLED, lic.body))
        device = self._device_id(home)
        use = device_use(backwards(ledger), device, lic.devices, time.time_ns())
        if use.over:
            log.warning("%s", use.warning(lic.license_id))
        items.append(
            (
                RecordKind.USAGE,
                {
                    "artifact": self.artifact,
                    "device": device,
                    "calls": calls,
                    "busy_ns": busy,
                    "window_ns": window,
                    "over_entitlement": use.over,
                },
            )
        )
        ledger.append_many(items)
        if lic.body is not None:
            self._recorded_license = lic.digest

    def _last_license(self, ledger: Ledger) -> str | None:
        if self._recorded_license is None:
            for r in backwards(ledger):
                if r.kind is RecordKind.LICENSE_INSTALLED:
                    self._recorded_license = str(r.body.get("sha256"))
                    break
        return self._recorded_license

    def _license_state(self, home: Home) -> _License:
        try:
            raw = home.license.read_bytes()
        except OSError:
            return _License("", None, "", None)
        digest = hashlib.sha256(raw).hexdigest()
        if self._license is None or self._license.digest != digest:
            self._license = license_state(raw, digest, home)
        return self._license

    def _device_id(self, home: Home) -> str:
        if self._device is None:
            from luminal.licensing.identity import existing, machine_fingerprint

            try:
                ident = existing(home)
            except LuminalError:
                ident = None
            self._device = (
                f"{self.device_kind}:{ident.fingerprint if ident else machine_fingerprint()}"
            )
        return self._device


def license_state(raw: bytes, digest: str, home: Home) -> _License:
    """The installed license as a ledger record body, if it verifies here."""
    from luminal.licensing.enforce import check

    try:
        status = check(None, home=home)
    except LuminalError as err:  # any refusal: usage is still recorded, without terms
        log.warning("usage is recorded without license terms: %s", err)
        return _License(digest, None, "", None)
    body = {"license": json.loads(raw), "sha256": digest}
    return _License(digest, body, status.claims.license_id, status.claims.entitlements.devices)


def license_record(home: Home) -> dict[str, Any] | None:
    """The license-installed body for the license in `home`, if it verifies there."""
    try:
        raw = home.license.read_bytes()
    except OSError:
        return None
    return license_state(raw, hashlib.sha256(raw).hexdigest(), home).body


__all__ = ["DEFAULT_INTERVAL_S", "Meter", "MeterConfig", "license_record"]
