"""The one license gate on compiling: `authorize_compile(target)`.

Compiling is the licensed act, so the check sits where compiling happens
(`compiler/pipeline.compile_model` calls this before its first stage) rather than in each
caller: the CLI, `InferenceSession`, `torch.compile(backend="luminal")` and a direct
`compile_model` call are all refused with the same LicenseError (exit 3), and a new way of
compiling cannot forget the check.  Loading and running an existing artifact never pass
through here.

The status's warnings (grace period, near expiry) go to whoever asked to hear them (the CLI
prints them before its progress bar); a library caller gets them on the
`luminal.licensing` logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from luminal.licensing.enforce import LicenseStatus, check

log = logging.getLogger("luminal.licensing")

#: Hears the status of a license that allowed a compile (to print its warnings).
LicenseHook = Callable[[LicenseStatus], None]

#: The feature every compile needs.
COMPILE = "compile"


def log_warnings(status: LicenseStatus) -> None:
    """The default hook: each warning once, on the `luminal.licensing` logger."""
    for warning in status.warnings:
        log.warning("%s", warning)


def authorize_compile(target: str, on_license: LicenseHook | None = None) -> LicenseStatus:
    """The license status allowing `compile` on `target` (a `Target.license_target`), or
    the LicenseError that says why not."""
    status = check(COMPILE, target)
    (on_license or log_warnings)(status)
    return status


__all__ = ["COMPILE", "LicenseHook", "authorize_compile", "log_warnings"]
