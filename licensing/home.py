"""Where an install keeps its licensing state, and how files there are written.

`$LUMINAL_HOME` (default `~/.local/share/luminal`) holds::

    install.key          the install's Ed25519 private key (PEM, 0600)
    install.json         its public key, key id and machine fingerprint (0600)
    license.json         the installed license (a DSSE envelope)
    clock.json           the last time this install has seen (rollback detection)
    trusted-keys.json    keys trusted by explicit local setting (evaluation, NOT production)
                         and local revocations
    ledger/              the usage ledger (`luminal.metering.ledger`): appended, never rewritten

Every write goes to a temporary file in the same folder and is renamed over the target,
so a crash leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from luminal.errors import UsageError

ENV_VAR = "LUMINAL_HOME"


@dataclass(frozen=True)
class Home:
    """The licensing files of one install."""

    root: Path

    @classmethod
    def resolve(cls, root: Path | str | None = None) -> Home:
        """`root`, else `$LUMINAL_HOME`, else `~/.local/share/luminal`."""
        if root is None:
            env = os.environ.get(ENV_VAR)
            root = Path(env) if env else Path.home() / ".local" / "share" / "luminal"
        return cls(Path(root).expanduser().absolute())

    @property
    def install_key(self) -> Path:
        return self.root / "install.key"

    @property
    def install_info(self) -> Path:
        return self.root / "install.json"

    @property
    def license(self) -> Path:
        return self.root / "license.json"

    @property
    def clock(self) -> Path:
        return self.root / "clock.json"

    @property
    def trusted_keys(self) -> Path:
        return self.root / "trusted-keys.json"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger"

    def ensure(self) -> Path:
        """Create the folder (0700) if needed and return it."""
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as err:
            raise UsageError(f"{ENV_VAR} {self.root}: cannot create: {err.strerror}") from err
        return self.root


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write `data` to `path` through a temp file and a rename; `mode` is set before."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def create_exclusive(path: Path, data: bytes, mode: int = 0o600) -> bool:
    """Write `data` to `path` only if it does not exist yet (atomic); False if it did."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def read_file(path: Path, what: str) -> bytes:
    """Bytes of a file the user named; a missing or unreadable one is a usage error."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot read: {err.strerror}") from err
