"""JSON the service parses from strangers: bounded in size and nesting depth.

Python's `json` recurses once per nested array or object, so a 30,000-deep `[[[...]]]`
(60 KB, under any sensible size limit) ends in a RecursionError: a 500 and a traceback in
the log rather than a refusal.  `loads` measures the nesting first, with a flat scan that
skips strings, and refuses anything deeper than `max_depth` before `json` sees it.  The
same bound applies to the JSON inside signed envelopes (requests, uploads, usage exports),
whose base64 payloads the outer scan cannot look into.

    loads(data, limits) -> object        BodyRejected(status, message): 400 or 413
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: Deep enough for every document luminal sends (an upload is 6 levels), shallow enough
#: that `json` never comes near the interpreter's recursion limit.
MAX_DEPTH = 32
_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 * 1024
    max_depth: int = MAX_DEPTH


class BodyRejected(Exception):
    """A body the service will not parse, with the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def nesting_depth(data: bytes, stop_above: int) -> int:
    """How deep arrays and objects nest in `data` (strings skipped), counting no further
    than `stop_above + 1`; malformed input is left for `json` to describe."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_above:
                    return deepest
        elif byte in _CLOSE:
            depth -= 1
    return deepest


def loads(data: bytes, limits: Limits, what: str = "body") -> object:
    """`data` parsed as JSON, or BodyRejected: 413 over the size limit, 400 too deep or
    not JSON."""
    if len(data) > limits.max_bytes:
        raise BodyRejected(413, f"{what} over {limits.max_bytes} bytes")
    if nesting_depth(data, limits.max_depth) > limits.max_depth:
        raise BodyRejected(400, f"{what} nests JSON deeper than {limits.max_depth} levels")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise BodyRejected(400, f"{what} is not JSON") from None


__all__ = ["MAX_DEPTH", "BodyRejected", "Limits", "loads", "nesting_depth"]
