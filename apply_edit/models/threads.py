"""How many torch threads the one model gets: the cores other processes left idle, looked at per request.

Measured on a 2-core CPU (default model, bf16 without AMX, 12-02; README, "Threads"): idle, 2 threads
prefill 1,024 tokens in 6.9 s against 12.4 s on 1, and verify a 32-token block in 396 against 646 ms; with one
CPU-bound process beside it, 2 threads are the slower (16.8 s and 1,211 ms against 13.0 s and 695 ms): a pool
wider than the free cores stalls at every barrier. So every core is used while the others are idle, and a
core is left to whatever else runs as soon as something does (the fixed rule before was every core but one).

The choice is made once per request, not per pass, so that a request reads the whole prompt and its blocks
with one thread count: in fp32 the thread count changes the last bits of the logits (2.9e-5 here; bf16 here
not at all), and the prefix store keeps each thread count's prefixes apart for the same reason.
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

import torch

PROC_STAT = Path("/proc/stat")
# Shorter windows are too coarse in clock ticks (10 ms) to tell a busy core from an idle one: the last
# choice stands until the window is this long.
MIN_WINDOW_S = 0.25
# Other processes using less than this much of a core (an editor idling, a shell) do not cost a thread.
IDLE_SHARE = 0.25


def pinned() -> int | None:
    """`APPLY_EDIT_THREADS`, where set: a fixed thread count (tests, benchmarks, shared machines)."""
    value = os.environ.get("APPLY_EDIT_THREADS")
    return max(1, int(value)) if value else None


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity), or all of them where that cannot be read."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_seconds(cpus: list[int]) -> float | None:
    """CPU seconds the machine has spent busy on `cpus` since boot (/proc/stat; None where there is none)."""
    try:
        lines = PROC_STAT.read_text().splitlines()
    except OSError:
        return None
    wanted, busy = {f"cpu{c}" for c in cpus}, 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            # user nice system idle iowait irq softirq steal (guest time is already in user)
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
            busy += user + nice + system + irq + softirq + steal
    return busy / os.sysconf("SC_CLK_TCK")


class ThreadPolicy:
    """Sizes torch's pool to the usable cores that others have not kept busy since the last look."""

    def __init__(self):
        self.cpus = usable_cpus()
        self.threads = max(1, len(self.cpus) - 1)  # until a first window has been seen
        self._lock = threading.Lock()
        self._last = self._reading()

    def _reading(self) -> tuple[float, float, float] | None:
        busy = busy_seconds(self.cpus)
        return None if busy is None else (time.monotonic(), busy, time.process_time())

    def others_busy(self) -> float | None:
        """Cores' worth of CPU other processes used since the last look (None: no new reading yet)."""
        now = self._reading()
        if now is None or self._last is None or now[0] - self._last[0] < MIN_WINDOW_S:
            return None
        (t0, busy0, own0), (t1, busy1, own1) = self._last, now
        self._last = now
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))

    def choose(self) -> int:
        """Set torch's thread count for the next request and return it."""
        with self._lock:
            fixed = pinned()
            if fixed is not None:
                self.threads = fixed
            else:
                others = self.others_busy()
                if others is not None:
                    taken = max(0, math.ceil(others - IDLE_SHARE))
                    self.threads = max(1, len(self.cpus) - taken)
            torch.set_num_threads(self.threads)
            return self.threads


POLICY = ThreadPolicy()  # torch's pool is one per process, so is its policy


def choose_threads() -> int:
    return POLICY.choose()


def most_threads() -> int:
    """The most threads a request may get here (for a baseline that is given a fixed count)."""
    return pinned() or len(POLICY.cpus)
