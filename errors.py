"""Errors a user can act on.

Every error carries the exit code the CLI returns for it (documented in docs/cli.md)::

    LuminalError                 exit 1  (base; never raised directly)
    ├── UsageError               exit 2  bad arguments, missing or unreadable input file
    ├── LicenseError             exit 3  (licensing issues fill this branch)
    ├── IntegrityError           exit 4  a signature or hash does not verify
    ├── InvalidResult            exit 5  outputs disagree with the oracle
    └── CompilerError            exit 6  the model cannot be taken
        ├── ModelLoadError              unreadable, corrupt or unsafe model file
        ├── FrontendError               a node the frontend cannot lower as given
        │   └── UnsupportedOp           an op, attribute or opset we do not support
        └── GraphError                  an IR graph that breaks the spec (a compiler bug)

Foreign exceptions (protobuf, onnx, torch, numpy) are converted where they enter, so a
caller catches `LuminalError` and gets one clear line from `str(err)`.
"""

from __future__ import annotations

__all__ = [
    "CompilerError",
    "FrontendError",
    "GraphError",
    "IntegrityError",
    "InvalidResult",
    "LicenseError",
    "LuminalError",
    "ModelLoadError",
    "UnsupportedOp",
    "UsageError",
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
