"""tools/slow_tier.py, the runner of make test's slow tier: both streams run at once and
their lines come out tagged, a failing stream's exit status is the runner's, and a signal
or the runner's own death stops every child (nothing outlives it)."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,      # real processes, about 2 s in all
              pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")]


def _runner(streams: dict, tmp_path: Path) -> subprocess.Popen:
    """The runner with ``streams`` in place of make test's."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tools')!r})
        import slow_tier
        slow_tier.STREAMS = {streams!r}
        sys.exit(slow_tier.run())
    """)
    return subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _python(body: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(body)]


def _poll(what, limit=60.0):
    """Waits for ``what()`` to be true (a state, not a time); fails after ``limit`` s."""
    end = time.monotonic() + limit
    while not what():
        assert time.monotonic() < end, "never happened"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_both_streams_run_tagged_and_a_failure_is_the_exit_status(tmp_path):
    streams = {"one": [_python("print('first')"), _python("import sys; sys.exit(3)"),
                       _python("print('never')")],
               "two": [_python("print('other')")]}
    r = _runner(streams, tmp_path)
    out, _ = r.communicate(timeout=120)
    assert r.returncode == 3, out
    assert "[one] first" in out and "[two] other" in out and "never" not in out
    assert "slow tier, one: exit 3" in out and "slow tier, two: passed" in out


def _waiter(name: str, tmp_path: Path) -> list[str]:
    """A child that writes its pid, then counts the SIGTERMs it gets until one arrives."""
    return _python(f"""
        import os, signal, time
        from pathlib import Path
        seen = []
        signal.signal(signal.SIGTERM, lambda *_: seen.append(1))
        Path({str(tmp_path / name)!r} + '.pid').write_text(str(os.getpid()))
        while not seen:
            time.sleep(0.05)
        time.sleep(0.5)                 # a second signal, if any, would arrive meanwhile
        Path({str(tmp_path / name)!r} + '.terms').write_text(str(len(seen)))
    """)


def test_a_signal_reaches_each_child_once_and_the_runner_waits_for_them(tmp_path):
    r = _runner({"a": [_waiter("a", tmp_path)], "b": [_waiter("b", tmp_path)]}, tmp_path)
    _poll(lambda: (tmp_path / "a.pid").exists() and (tmp_path / "b.pid").exists())
    r.send_signal(signal.SIGINT)                  # Ctrl-C
    out, _ = r.communicate(timeout=120)
    assert r.returncode == 130, out
    assert (tmp_path / "a.terms").read_text() == "1" == (tmp_path / "b.terms").read_text()


def test_a_runner_killed_outright_takes_its_children_with_it(tmp_path):
    r = _runner({"a": [_waiter("a", tmp_path)]}, tmp_path)
    _poll(lambda: (tmp_path / "a.pid").exists())
    child = int((tmp_path / "a.pid").read_text())
    os.kill(r.pid, signal.SIGKILL)
    r.communicate(timeout=60)
    _poll(lambda: not _alive(child))
    # at least once: the kernel sends the parent-death signal each time the child is handed
    # to another thread of the dying runner, then to init (pytest's handler acts on the first)
    assert int((tmp_path / "a.terms").read_text()) >= 1
