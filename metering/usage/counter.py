"""The in-process usage counter a Session keeps: calls and busy device-nanoseconds.

`add` is all the inference path pays, and it takes no lock: each thread adds to its own
cell (a `threading.local`), which only that thread writes.  A `Meter` reads every cell's
running totals on its own thread (`take`) and keeps what it has taken; a cell read between
a thread's two additions gives a call without its time, and the next `take` the time, so
nothing is lost or counted twice.  No I/O here.
"""

from __future__ import annotations

import threading
import time


class _Cell:
    __slots__ = ("busy_ns", "calls")

    def __init__(self) -> None:
        self.calls = 0
        self.busy_ns = 0


class UsageCounter:
    def __init__(self) -> None:
        self._local = threading.local()
        self._cells: list[_Cell] = []
        self._lock = threading.Lock()  # guards `_cells` and what was taken, never `add`
        self._taken = (0, 0)
        self._since_ns = time.monotonic_ns()

    def add(self, busy_ns: int) -> None:
        try:
            cell = self._local.cell
        except AttributeError:
            cell = self._new_cell()
        cell.calls += 1
        cell.busy_ns += busy_ns

    def _new_cell(self) -> _Cell:
        cell = _Cell()
        with self._lock:
            self._cells.append(cell)
        self._local.cell = cell
        return cell

    def take(self) -> tuple[int, int, int]:
        """(calls, busy ns, window ns) since the last take, and start a new window."""
        now = time.monotonic_ns()
        with self._lock:
            calls = sum(c.calls for c in self._cells)
            busy = sum(c.busy_ns for c in self._cells)
            out = (calls - self._taken[0], busy - self._taken[1], now - self._since_ns)
            self._taken, self._since_ns = (calls, busy), now
        return out

    def give_back(self, calls: int, busy_ns: int, window_ns: int) -> None:
        """Counts a failed flush could not write: they go into the next one."""
        with self._lock:
            self._taken = (self._taken[0] - calls, self._taken[1] - busy_ns)
            self._since_ns -= window_ns


__all__ = ["UsageCounter"]
