"""The in-process usage counter a Session keeps: calls and busy device-nanoseconds.

`add` is all the inference path pays: two integer additions under a lock (several threads
may run one Session).  No I/O: a `Meter` takes the counts off (`take`) on its own thread.
"""

from __future__ import annotations

import threading
import time


class UsageCounter:
    __slots__ = ("_lock", "busy_ns", "calls", "since_ns")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.busy_ns = 0
        self.since_ns = time.monotonic_ns()

    def add(self, busy_ns: int) -> None:
        with self._lock:
            self.calls += 1
            self.busy_ns += busy_ns

    def take(self) -> tuple[int, int, int]:
        """(calls, busy ns, window ns) since the last take, and start a new window."""
        now = time.monotonic_ns()
        with self._lock:
            out = (self.calls, self.busy_ns, now - self.since_ns)
            self.calls, self.busy_ns, self.since_ns = 0, 0, now
        return out

    def give_back(self, calls: int, busy_ns: int, window_ns: int) -> None:
        """Counts a failed flush could not write: they go into the next one."""
        with self._lock:
            self.calls += calls
            self.busy_ns += busy_ns
            self.since_ns -= window_ns


__all__ = ["UsageCounter"]
