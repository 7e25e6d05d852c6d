"""`luminal-vendor artifact`: the compiled artifacts a licensee's usage may be billed on.

The service refuses a usage upload that names an artifact its licensee has not
registered (`usage.py`, `storage.record_usage`), so the vendor registers each artifact it
bills on by the SHA-256 of its file, as `luminal artifact` and usage exports name it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated

import typer

from luminal.errors import UsageError
from luminal.licensing.timeutil import to_iso, utcnow

artifact_app = typer.Typer(help="Artifacts a licensee's usage may be billed on.")

Db = Annotated[
    str, typer.Option("--db", envvar="LUMINAL_VENDOR_DB", help="sqlite:///FILE or postgresql://...")
]
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@artifact_app.command("add")
def artifact_add(
    licensee_id: Annotated[str, typer.Argument(help="Licensee id.")],
    artifact: Annotated[str, typer.Argument(help="An .lmnl file, or its digest sha256:<hex>.")],
    name: Annotated[str, typer.Option(help="What to call it in listings.")] = "",
    db: Db = "sqlite:///vendor.db",
) -> None:
    """Register an artifact for a licensee (idempotent).

    Example: luminal-vendor artifact add acme model.lmnl --name resnet50-v3
    """
    from luminal_vendor.storage import Store

    digest = _digest(artifact)
    store = Store(db).init()
    if licensee_id not in {row[0] for row in store.licensees()}:
        raise UsageError(f"unknown licensee {licensee_id!r} (luminal-vendor licensee list)")
    store.add_artifact(licensee_id, digest, name or Path(artifact).name, to_iso(utcnow()))
    typer.echo(f"{licensee_id}\t{digest}")


def _digest(artifact: str) -> str:
    if DIGEST.fullmatch(artifact):
        return artifact
    path = Path(artifact)
    if not path.is_file():
        raise UsageError(f"{artifact}: neither an artifact file nor a digest sha256:<64 hex>")
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
