"""Torch's pool sized per request to the cores other processes left idle (models/threads.py), read from a
/proc/stat written here."""

import types

import pytest
import torch

from apply_edit.models import threads

TICK = 1 / threads.os.sysconf("SC_CLK_TCK")


class Machine:
    """Two CPUs whose busy time (and this process's CPU time) the test advances."""

    def __init__(self, tmp_path, monkeypatch):
        self.stat = tmp_path / "stat"
        self.now = self.own = 0.0
        self.busy = [0.0, 0.0]
        monkeypatch.setattr(threads, "PROC_STAT", self.stat)
        monkeypatch.setattr(threads, "usable_cpus", lambda: [0, 1])
        monkeypatch.setattr(threads, "CGROUP", tmp_path / "cgroup")  # no CPU quota unless a test writes one
        monkeypatch.setattr(threads, "time", types.SimpleNamespace(monotonic=lambda: self.now,
                                                                   process_time=lambda: self.own))
        monkeypatch.delenv("APPLY_EDIT_THREADS", raising=False)
        self.write()

    def write(self):
        rows = [f"cpu{i} {round(b / TICK)} 0 0 100 0 0 0 0 0 0" for i, b in enumerate(self.busy)]
        self.stat.write_text("cpu 0 0 0 0 0 0 0 0 0 0\n" + "\n".join(rows) + "\nintr 1 2 3\n")

    def run(self, seconds, others=0.0, own=0.0):
        """`seconds` pass with other processes busy on `others` cores and this process on `own`."""
        self.now += seconds
        self.own += own * seconds
        for i in range(2):
            self.busy[i] += seconds * (others + own) / 2
        self.write()


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_every_core_while_others_are_idle_and_one_left_free_when_something_runs(tmp_path, monkeypatch,
                                                                                 restore_threads):
    machine = Machine(tmp_path, monkeypatch)
    policy = threads.ThreadPolicy(sample_every_s=None)  # sampled when asked: the test's clock decides
    machine.run(0.1)
    assert policy.choose() == 1  # every core but one until a window has been seen
    machine.run(1.0, others=0.3)  # a shell, an idle editor
    assert policy.choose() == 2 and torch.get_num_threads() == 2
    machine.run(2.0, others=0.7, own=1.3)  # a CPU-bound process started while this one ran on both cores
    assert policy.choose() == 1 and torch.get_num_threads() == 1
    machine.run(0.3, others=1.0, own=1.0)
    assert policy.choose() == 1
    machine.run(1.0, others=0.0, own=1.0)  # it ended; over the last two seconds it still counts
    assert policy.choose() == 1
    machine.run(1.5, others=0.0, own=1.0)  # this process's own work does not count against it
    assert policy.choose() == 2
    machine.run(0.2, others=2.0)  # a burst: too little of the window to cost a thread
    assert policy.choose() == 2
    machine.run(2.0, others=2.0)
    assert policy.choose() == 1  # never fewer than one


def test_a_pinned_count_wins_and_without_proc_stat_one_core_is_left(tmp_path, monkeypatch, restore_threads):
    machine = Machine(tmp_path, monkeypatch)
    policy = threads.ThreadPolicy(sample_every_s=None)
    monkeypatch.setenv("APPLY_EDIT_THREADS", "3")
    machine.run(1.0)
    assert policy.choose() == 3 and torch.get_num_threads() == 3 and threads.most_threads() == 3
    monkeypatch.delenv("APPLY_EDIT_THREADS")
    machine.stat.unlink()
    machine.run(1.0)
    assert threads.ThreadPolicy(sample_every_s=None).choose() == 1  # no way to see the load: the fixed rule


def test_a_containers_cpu_quota_caps_the_pool(tmp_path, monkeypatch, restore_threads):
    machine = Machine(tmp_path, monkeypatch)
    (tmp_path / "cgroup" / "cpu").mkdir(parents=True)
    (tmp_path / "cgroup" / "cpu" / "cpu.cfs_quota_us").write_text("400000\n")  # v1, 4 cores' worth: the CPUs cap it
    (tmp_path / "cgroup" / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.usable_cores() == 2
    (tmp_path / "cgroup" / "cpu.max").write_text("max 100000\n")  # v2 first: unlimited
    assert threads.cpu_quota() is None and threads.usable_cores() == 2
    (tmp_path / "cgroup" / "cpu.max").write_text("150000 100000\n")  # `docker run --cpus 1.5` on this 2-CPU host
    policy = threads.ThreadPolicy(sample_every_s=None)
    machine.run(1.0)
    assert threads.cpu_quota() == 1.5 and policy.choose() == 1  # idle, but two threads would be throttled


@pytest.mark.skipif(not threads.PROC_STAT.exists(), reason="no /proc/stat here")
def test_a_daemon_samples_the_load_between_requests(restore_threads, monkeypatch):
    import time

    monkeypatch.delenv("APPLY_EDIT_THREADS", raising=False)
    policy = threads.ThreadPolicy(sample_every_s=0.05)
    policy.choose()
    time.sleep(0.5)
    assert policy._sampler.daemon and policy._sampler.is_alive()
    assert 4 <= len(policy._samples)  # the window's samples (its start kept: 2 s have not passed)
    assert 1 <= policy.choose() <= len(policy.cpus)
