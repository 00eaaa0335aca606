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
    policy = threads.ThreadPolicy()
    assert policy.threads == 1  # every core but one until a window has been seen
    machine.run(1.0, others=0.1)  # a shell, an idle editor
    assert policy.choose() == 2 and torch.get_num_threads() == 2
    machine.run(2.0, others=0.7, own=1.3)  # a CPU-bound process started while this one ran on both cores
    assert policy.choose() == 1 and torch.get_num_threads() == 1
    machine.run(0.1, others=0.0, own=1.0)  # too short a window to judge: the last choice stands
    assert policy.choose() == 1
    machine.run(1.0, others=0.0, own=1.0)  # it ended: this process's own work does not count against it
    assert policy.choose() == 2
    machine.run(1.0, others=2.0)
    assert policy.choose() == 1  # never fewer than one


def test_a_pinned_count_wins_and_without_proc_stat_one_core_is_left(tmp_path, monkeypatch, restore_threads):
    machine = Machine(tmp_path, monkeypatch)
    policy = threads.ThreadPolicy()
    monkeypatch.setenv("APPLY_EDIT_THREADS", "3")
    machine.run(1.0)
    assert policy.choose() == 3 and torch.get_num_threads() == 3 and threads.most_threads() == 3
    monkeypatch.delenv("APPLY_EDIT_THREADS")
    machine.stat.unlink()
    machine.run(1.0)
    assert threads.ThreadPolicy().choose() == 1  # two CPUs, no way to see their load: the fixed rule
