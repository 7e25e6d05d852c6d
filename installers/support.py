"""`luminal doctor --support-bundle out.tar.gz`: what support needs, with secrets redacted.

    doctor.json          every check (as `luminal doctor --json`)
    environment.json     LUMINAL_*, PIP_*, proxy, compiler and thread variables; values of
                         secret-looking names and the credentials inside URLs redacted
    packages.txt         every installed distribution, name==version
    home/                install.json (public key), license.json (the signed license),
                         trusted-keys.json, clock.json: public documents only

Never included: the install's private key (install.key), any file of LUMINAL_HOME not in
that list, the tuning database or the ledger (their sizes are in doctor.json).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from luminal.errors import UsageError
from luminal.installers.doctor import DoctorContext, DoctorReport
from luminal.licensing.home import write_atomic

REDACTED = "<redacted>"
#: Environment variables kept (by prefix or name); everything else is left out.
ENV_PREFIXES = ("LUMINAL_", "PIP_", "OMP_", "TRITON_", "CUDA_", "ROCR_", "HIP_")
ENV_NAMES = ("PATH", "CC", "CXX", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
#: A kept variable whose name looks like this has its value replaced.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
#: user:password@ inside a URL.
URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")
#: The home files that are public documents.
HOME_FILES = ("install.json", "license.json", "trusted-keys.json", "clock.json")


def redact_environment(env: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in sorted(env.items()):
        upper = name.upper()
        if not (upper.startswith(ENV_PREFIXES) or upper in ENV_NAMES):
            continue
        if SECRET_NAME.search(upper):
            out[name] = REDACTED
        else:
            out[name] = URL_CREDENTIALS.sub(f"{REDACTED}@", value)
    return out


def write_support_bundle(path: Path, ctx: DoctorContext, report: DoctorReport) -> list[str]:
    """Write the tar.gz atomically; returns its member names."""
    members: dict[str, bytes] = {
        "doctor.json": _json(report.to_json()),
        "environment.json": _json(redact_environment(ctx.env)),
        "packages.txt": "".join(
            f"{d.metadata['Name']}=={d.version}\n"
            for d in sorted(metadata.distributions(), key=lambda d: str(d.metadata["Name"]).lower())
        ).encode(),
    }
    for name in HOME_FILES:
        file = ctx.home.root / name
        if file.is_file():
            try:
                members[f"home/{name}"] = file.read_bytes()
            except OSError:
                continue
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"luminal-support/{name}")
            info.size, info.mtime, info.mode = len(data), int(now), 0o644
            tar.addfile(info, io.BytesIO(data))
    try:
        write_atomic(path, buf.getvalue(), mode=0o600)
    except OSError as err:
        raise UsageError(f"--support-bundle {path}: cannot write ({err.strerror})") from None
    return list(members)


def _json(data: object) -> bytes:
    return (json.dumps(data, indent=2, default=str) + "\n").encode()
