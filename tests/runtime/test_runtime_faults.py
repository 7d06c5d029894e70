"""A failing, a killed and a deadlocked rank each end within the timeout, named, with no
process left behind."""
import os
import time

import psutil
import pytest

from pplab.ir import Schedule
from pplab.runtime import RunError, run_schedule


def _descendants():
    return [p for p in psutil.Process(os.getpid()).children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE]


def _fails(match, timeout=60, **kw):
    before = {p.pid for p in _descendants()}      # e.g. a browser another test module keeps
    t0 = time.monotonic()
    with pytest.raises(RunError) as err:
        run_schedule(timeout=timeout, steps=1, **kw)
    took = time.monotonic() - t0
    print(f"{took:.1f}s: {err.value}")
    assert took < timeout + 90      # a limit only a hang reaches, not a busy machine
    left = [p for p in _descendants() if p.pid not in before]
    assert not left, f"child processes left behind: {left}"
    for m in match:
        assert m in str(err.value), (m, str(err.value))
    return str(err.value)


def test_rank_that_raises_is_named():
    _fails(["rank 1 failed", "injected fault", "RuntimeError"], schedule_or_name="1f1b", P=2,
           M=4, fault={"rank": 1, "op": 2, "kind": "raise"})


def test_rank_that_is_killed_is_named():
    _fails(["rank 1", "SIGKILL"], schedule_or_name="1f1b", P=2, M=4,
           fault={"rank": 1, "op": 1, "kind": "kill"})


def test_deadlocking_schedule_names_stuck_ranks():
    # both ranks start with a backward that needs the other's work: a cycle
    bad = Schedule.from_text(["0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"], num_microbatches=2)
    msg = _fails(["stuck ranks: 0, 1", "waits for"], schedule_or_name=bad, comm_timeout=4,
                 timeout=60)
    assert "deadlock" in msg


def test_whole_job_timeout_kills_everything():
    # the run would take over 10 minutes (sleeps), far past the timeout and its margin
    _fails(["did not finish within the 12 s timeout"], schedule_or_name="gpipe", P=2, M=4,
           emulate=dict(tf=60.0, tb=60.0), timeout=12, comm_timeout=30)
