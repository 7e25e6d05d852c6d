"""The improvement report: an in-toto Statement in a DSSE envelope signed by this install.

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "artifact:model.lmnl", "digest": {"sha256": ...}},
                 {"name": "baseline-model:model.onnx", "digest": {"sha256": ...}},
                 {"name": "inputs", "digest": {"sha256": ...}}],
     "predicateType": PREDICATE_TYPE,
     "predicate": {raw data ..., "license": {"id", "sha256"}, "pricing": {terms},
                   "request": {what was asked}, "signer": {...}, "results": derive(raw)}}

The terms are the license's (`licensing.terms`), never the report's own; `verify` checks
them against the license, and the signer against the install key the license binds.

The envelope's payload type is `application/vnd.in-toto+json`; the signature is Ed25519
over DSSE's pre-authentication encoding, by the install key in `$LUMINAL_HOME` (made on
first use, mode 0600).  Files are written atomically (temp file, then rename).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from luminal.errors import IntegrityError, UsageError
from luminal.licensing import dsse
from luminal.licensing.home import Home, read_file, write_atomic
from luminal.licensing.identity import InstallIdentity, load_or_create
from luminal.licensing.keys import encode_public
from luminal.licensing.timeutil import to_iso, utcnow
from luminal.metering.bench.results import derive
from luminal.metering.bench.run import BenchRun

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://luminal.dev/attestations/bench/v1"
SCHEMA = "luminal.bench-report/v2"


def build(run: BenchRun, identity: InstallIdentity) -> dict[str, Any]:
    """The Statement: the run's raw data, who signs it, and every derived number."""
    predicate = {
        "schema": SCHEMA,
        "created": to_iso(utcnow()),
        **run.predicate,
        "signer": {"keyid": identity.keyid, "public_key": encode_public(identity.public_key)},
    }
    predicate["results"] = derive(predicate)
    return {
        "_type": STATEMENT_TYPE,
        "subject": run.subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def sign(statement: Mapping[str, Any], identity: InstallIdentity) -> dsse.Envelope:
    payload = json.dumps(statement, separators=(",", ":"), allow_nan=False).encode()
    return identity.sign(dsse.REPORT_TYPE, payload)


def sign_and_write(run: BenchRun, path: Path, home: Home | None = None) -> dict[str, Any]:
    """Build, sign with this install's key and write the report, and register it in this
    install's usage ledger (what the artifact's usage is billed on); returns the Statement."""
    from luminal.metering.ledger import Ledger
    from luminal.metering.usage.register import register_report

    home = home or Home.resolve()
    identity = load_or_create(home)
    statement = build(run, identity)
    envelope = sign(statement, identity)
    write(path, envelope)
    register_report(Ledger.of(home), statement, envelope.dumps())
    return statement


def write(path: Path, envelope: dsse.Envelope) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, envelope.dumps(), mode=0o644)
    except OSError as err:
        raise UsageError(f"{path}: cannot write the report ({err.strerror})") from None


def read(path: Path) -> tuple[dsse.Envelope, dict[str, Any]]:
    """The envelope and its Statement (not verified: see `verify`)."""
    envelope = dsse.Envelope.loads(read_file(path, "report"))
    if envelope.payload_type != dsse.REPORT_TYPE:
        raise IntegrityError(
            f"report {path}: payload type {envelope.payload_type!r} is not an in-toto Statement"
        )
    statement = envelope.payload_json()
    if (
        not isinstance(statement, dict)
        or statement.get("_type") != STATEMENT_TYPE
        or statement.get("predicateType") != PREDICATE_TYPE
        or not isinstance(statement.get("predicate"), dict)
    ):
        raise IntegrityError(f"report {path}: not a luminal benchmark Statement")
    return envelope, statement
