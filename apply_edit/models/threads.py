"""How many torch threads the one model gets: the cores other processes left idle, looked at per request.

Measured on a 2-core CPU (default model, bf16 without AMX, 12-02; README, "Threads"): idle, 2 threads
prefill 1,024 tokens in 6.9 s against 12.4 s on 1, and verify a 32-token block in 396 against 646 ms; with one
CPU-bound process beside it, 2 threads are the slower (16.8 s and 1,211 ms against 13.0 s and 695 ms): a pool
wider than the free cores stalls at every barrier. So every core is used while the others are idle, and a
core is left to whatever else has kept one busy over the last two seconds (the fixed rule before was every
core but one). In a container whose CPU quota is less than its CPUs (`--cpus`), the quota caps the pool.

The choice is made once per request, not per pass, so that a request reads the whole prompt and its blocks
with one thread count: in fp32 the thread count changes the last bits of the logits (2.9e-5 here; bf16 here
not at all), and the prefix store keeps each thread count's prefixes apart for the same reason.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from pathlib import Path

import torch

PROC_STAT = Path("/proc/stat")
CGROUP = Path("/sys/fs/cgroup")
# The load is read over the last WINDOW_S, from samples taken every SAMPLE_S: long enough that a burst (a
# keystroke's work, a shell command) does not cost a request a thread, short enough to see what runs now.
WINDOW_S = 2.0
SAMPLE_S = 0.5
# Shorter windows are too coarse in clock ticks (10 ms) to tell a busy core from an idle one: the last
# choice stands until the window is this long.
MIN_WINDOW_S = 0.25
# Other processes using less than this much of a core do not cost a thread (a CPU-bound one beside a
# 2-thread pass on 2 cores gets about two thirds of one).
IDLE_SHARE = 0.5


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


def cpu_quota() -> float | None:
    """The cores' worth of CPU time this process's cgroup may use (a container's `--cpus`): cgroup v2's
    cpu.max, else v1's CFS quota; None where unlimited or unreadable."""
    try:
        quota, period = (CGROUP / "cpu.max").read_text().split()[:2]  # "max 100000", "150000 100000"
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota, period = (int((CGROUP / "cpu" / name).read_text()) for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """The most threads worth running: the usable CPUs, fewer where a CPU quota allows less time than them
    (a pool wider than its quota is throttled in every period, like one wider than the free cores)."""
    quota = cpu_quota()
    cpus = len(usable_cpus())
    return cpus if quota is None else max(1, min(cpus, math.floor(quota)))


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
    """Sizes torch's pool to the usable cores that others have not kept busy over the last WINDOW_S.
    `sample_every_s`: how often a daemon thread samples the load (None: only when a request asks)."""

    def __init__(self, sample_every_s: float | None = SAMPLE_S):
        self.cpus = usable_cpus()
        self.cores = usable_cores()
        self.threads = max(1, self.cores - 1)  # until a first window has been seen
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, float, float]] = deque()  # (time, machine busy s, own CPU s)
        self._sample_every_s = sample_every_s
        self._sampler: threading.Thread | None = None
        self._sample()

    def _sample(self) -> None:
        busy = busy_seconds(self.cpus)
        if busy is None:
            return
        now = time.monotonic()
        self._samples.append((now, busy, time.process_time()))
        while len(self._samples) > 1 and self._samples[1][0] <= now - WINDOW_S:
            self._samples.popleft()  # the oldest kept is the newest at least WINDOW_S old: the window's start

    def _keep_sampling(self) -> None:
        while True:
            time.sleep(self._sample_every_s)
            with self._lock:
                self._sample()

    def others_busy(self) -> float | None:
        """Cores' worth of CPU other processes used over the window (None: no window long enough yet)."""
        self._sample()
        if len(self._samples) < 2 or self._samples[-1][0] - self._samples[0][0] < MIN_WINDOW_S:
            return None
        (t0, busy0, own0), (t1, busy1, own1) = self._samples[0], self._samples[-1]
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))

    def choose(self) -> int:
        """Set torch's thread count for the next request and return it."""
        with self._lock:
            fixed = pinned()
            if fixed is not None:
                self.threads = fixed
            else:
                if self._sampler is None and self._sample_every_s is not None and self._samples:
                    self._sampler = threading.Thread(target=self._keep_sampling, name="apply-edit-load-sampler",
                                                     daemon=True)
                    self._sampler.start()
                others = self.others_busy()
                if others is not None:
                    taken = max(0, math.ceil(others - IDLE_SHARE))
                    self.threads = max(1, self.cores - taken)
            torch.set_num_threads(self.threads)
            return self.threads


POLICY = ThreadPolicy()  # torch's pool is one per process, so is its policy


def choose_threads() -> int:
    return POLICY.choose()


def most_threads() -> int:
    """The most threads a request may get here (for a baseline that is given a fixed count)."""
    return pinned() or POLICY.cores
