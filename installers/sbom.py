"""The bundle's SBOM: CycloneDX 1.6 JSON, from the metadata inside the wheels themselves.

One `library` component per wheel (name, version, purl `pkg:pypi/NAME@VERSION`, SHA-256 of
the wheel file, licenses as declared), luminal as the `metadata.component`, and the
dependency graph from each wheel's Requires-Dist restricted to what the bundle holds.
"""

from __future__ import annotations

import re
import uuid
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from luminal.errors import UsageError

SPEC_VERSION = "1.6"


@dataclass(frozen=True)
class Wheel:
    """One wheel of the bundle, as its file name and METADATA describe it."""

    file: str
    name: str  # normalized (PEP 503)
    version: str
    sha256: str
    license: str
    summary: str
    requires: tuple[str, ...]  # normalized names of unconditional and extra requirements


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_wheel(path: Path, sha256: str) -> Wheel:
    try:
        with zipfile.ZipFile(path) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(meta).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, StopIteration) as err:
        raise UsageError(f"{path.name}: not a wheel with METADATA ({err})") from None
    headers = HeaderParser().parsestr(text)
    requires = tuple(
        normalize(re.split(r"[\s<>=!~;\[(]", r.strip(), maxsplit=1)[0])
        for r in headers.get_all("Requires-Dist") or []
    )
    lic = headers.get("License-Expression") or headers.get("License") or ""
    return Wheel(
        file=path.name,
        name=normalize(headers["Name"]),
        version=headers["Version"],
        sha256=sha256,
        license=lic.splitlines()[0][:200] if lic else "",
        summary=headers.get("Summary") or "",
        requires=requires,
    )


def cyclonedx(wheels: list[Wheel], root: str, created: str) -> dict[str, object]:
    by_name = {w.name: w for w in wheels}

    def component(w: Wheel) -> dict[str, object]:
        out: dict[str, object] = {
            "type": "library",
            "bom-ref": f"pkg:pypi/{w.name}@{w.version}",
            "name": w.name,
            "version": w.version,
            "purl": f"pkg:pypi/{w.name}@{w.version}",
            "description": w.summary,
            "hashes": [{"alg": "SHA-256", "content": w.sha256}],
            "properties": [{"name": "luminal:bundle:file", "value": f"wheels/{w.file}"}],
        }
        if w.license:
            out["licenses"] = [{"license": {"name": w.license}}]
        return out

    top = by_name[root]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": created,
            "tools": {"components": [{"type": "application", "name": "luminal bundle"}]},
            "component": {**component(top), "type": "application"},
        },
        "components": [component(w) for w in wheels if w.name != root],
        "dependencies": [
            {
                "ref": f"pkg:pypi/{w.name}@{w.version}",
                "dependsOn": sorted(
                    {
                        f"pkg:pypi/{d}@{by_name[d].version}"
                        for d in w.requires
                        if d in by_name and d != w.name
                    }
                ),
            }
            for w in wheels
        ],
    }
