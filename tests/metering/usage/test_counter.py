"""The lock-free counter: threads adding at once lose nothing, takes never count twice."""

from __future__ import annotations

import threading

from luminal.metering.usage.counter import UsageCounter


def test_eight_threads_adding_while_the_meter_takes() -> None:
    counter = UsageCounter()
    taken = [0, 0]
    done = threading.Event()

    def meter() -> None:
        while not done.is_set():
            calls, busy, _ = counter.take()
            taken[0] += calls
            taken[1] += busy

    def worker() -> None:
        for _ in range(20_000):
            counter.add(3)

    flusher = threading.Thread(target=meter)
    flusher.start()
    workers = [threading.Thread(target=worker) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    flusher.join()
    calls, busy, _ = counter.take()
    assert (taken[0] + calls, taken[1] + busy) == (160_000, 480_000)


def test_counts_given_back_come_out_in_the_next_take() -> None:
    counter = UsageCounter()
    counter.add(5)
    counter.add(7)
    calls, busy, window = counter.take()
    assert (calls, busy) == (2, 12) and window >= 0
    counter.give_back(calls, busy, window)
    counter.add(1)
    assert counter.take()[:2] == (3, 13)
    assert counter.take()[:2] == (0, 0)
