"""Errors a user can act on.

Every error carries the exit code the CLI returns for it (documented in docs/cli.md)::

    LuminalError                 exit 1  (base; never raised directly)
    ├── UsageError               exit 2  bad arguments, missing or unreadable input file
    ├── LicenseError             exit 3  a license is missing, invalid or does not allow this
    │   ├── LicenseMissing              no license installed
    │   ├── LicenseInvalid              a license or request file that is not well formed
    │   ├── SignatureInvalid            a license changed after signing, or an untrusted signer
    │   ├── KeyRevoked                  signed by a vendor key on the revocation list
    │   ├── LicenseExpired              expired, and the grace period is over
    │   ├── LicenseNotYetValid          before the license's not-before time
    │   ├── WrongInstall                bound to another install (key or fingerprint)
    │   ├── NotEntitled                 feature, target or device count not licensed
    │   ├── ClockRollback               the clock reads earlier than the last time seen
    │   └── ActivationError             online activation refused or unreachable
    ├── IntegrityError           exit 4  a signature or hash does not verify
    ├── InvalidResult            exit 5  outputs disagree with the oracle
    ├── CompilerError            exit 6  the model cannot be taken
    │   ├── ModelLoadError              unreadable, corrupt or unsafe model file
    │   ├── FrontendError               a node the frontend cannot lower as given
    │   │   └── UnsupportedOp           an op, attribute or opset we do not support
    │   ├── GraphError                  an IR graph that breaks the spec (a compiler bug)
    │   └── ArtifactIncompatible        an artifact built for another CPU, format or platform
    └── SetupIncomplete          exit 7  this machine lacks something luminal needs (doctor)

Exit 1 is otherwise an internal error (a bug), and the CI gate's code (`--fail-below`);
130 is Ctrl-C.  `EXIT_CODES` is that table, as `luminal --help` prints it.

Foreign exceptions (protobuf, onnx, torch, numpy) are converted where they enter, so a
caller catches `LuminalError` and gets one clear line from `str(err)`.
"""

from __future__ import annotations

__all__ = [
    "ActivationError",
    "ArtifactIncompatible",
    "ClockRollback",
    "CompilerError",
    "FrontendError",
    "GraphError",
    "IntegrityError",
    "InvalidResult",
    "KeyRevoked",
    "LicenseError",
    "LicenseExpired",
    "LicenseInvalid",
    "LicenseMissing",
    "LicenseNotYetValid",
    "LuminalError",
    "ModelLoadError",
    "NotEntitled",
    "SetupIncomplete",
    "SignatureInvalid",
    "UnsupportedOp",
    "UsageError",
    "WrongInstall",
]


class LuminalError(Exception):
    """Root of every error luminal raises on purpose."""

    exit_code: int = 1


class UsageError(LuminalError):
    """The command was given something it cannot use (argument, path, input array)."""

    exit_code = 2


class LicenseError(LuminalError):
    """A license is missing, expired or does not allow the requested feature."""

    exit_code = 3


class LicenseMissing(LicenseError):
    """No license is installed in this install's home."""


class LicenseInvalid(LicenseError):
    """A license, request or keyring document is not well formed."""


class SignatureInvalid(LicenseError):
    """A license does not verify: changed after signing, or not signed by a trusted key."""


class KeyRevoked(LicenseError):
    """The license was signed by a vendor key that has been revoked."""


class LicenseExpired(LicenseError):
    """The license expired and its grace period is over."""


class LicenseNotYetValid(LicenseError):
    """The license's not-before time has not come."""


class WrongInstall(LicenseError):
    """The license is bound to another install (key or machine fingerprint)."""


class NotEntitled(LicenseError):
    """The license does not cover the requested feature, target or device count."""


class ClockRollback(LicenseError):
    """The system clock reads earlier than the last time this install has seen."""


class ActivationError(LicenseError):
    """Online activation was refused by the server or could not reach it."""


class IntegrityError(LuminalError):
    """A signature, hash or artifact check failed."""

    exit_code = 4


class InvalidResult(LuminalError):
    """Results disagree with the reference beyond tolerance."""

    exit_code = 5


class CompilerError(LuminalError):
    """The model cannot be loaded, lowered or compiled."""

    exit_code = 6


class ModelLoadError(CompilerError):
    """The model file is unreadable, corrupt, invalid or unsafe to load."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class FrontendError(CompilerError):
    """A node of the source model cannot be lowered as written."""

    def __init__(self, message: str, *, op: str = "", node: str = "", opset: int | None = None):
        self.message = message  # without the op/node/opset prefix
        self.op = op
        self.node = node
        self.opset = opset
        where = []
        if op:
            where.append(f"op {op}")
        if node:
            where.append(f"node '{node}'")
        if opset is not None:
            where.append(f"opset {opset}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class UnsupportedOp(FrontendError):
    """An op, attribute value or opset version the frontend does not support."""


class GraphError(CompilerError):
    """An IR graph breaks the IR spec; this is a compiler bug, please report it."""


class ArtifactIncompatible(CompilerError):
    """A compiled artifact that this machine or this luminal cannot run (CPU features,
    architecture, format version)."""


class SetupIncomplete(LuminalError):
    """`luminal doctor` found something this install needs missing or broken."""

    exit_code = 7


#: Every exit code of the `luminal` command and what it means (docs/cli.md, `--help`).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (1, "internal error (a bug: rerun with -v), or the CI gate: --fail-below not met"),
    (UsageError.exit_code, "usage: bad option or argument, missing or unreadable input file"),
    (LicenseError.exit_code, "license: missing, expired, not entitled, untrusted signer"),
    (IntegrityError.exit_code, "integrity: a signature or hash does not verify"),
    (InvalidResult.exit_code, "invalid result: outputs off the oracle, or an INVALID bench run"),
    (CompilerError.exit_code, "unsupported model: unreadable, unsupported op, dtype or CPU"),
    (SetupIncomplete.exit_code, "setup incomplete: `luminal doctor` found something missing"),
    (130, "interrupted (Ctrl-C)"),
)


def one_line(err: BaseException, first_line: bool = False) -> str:
    """A foreign exception as one line for a LuminalError message: all of its text with
    whitespace collapsed (or only its first line), at most 300 characters."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = (
        (lines[0] if first_line else " ".join(" ".join(lines).split()))
        if lines
        else type(err).__name__
    )
    return text[:300] + ("..." if len(text) > 300 else "")
