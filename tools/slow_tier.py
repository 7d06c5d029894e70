"""The slow tier of ``make test``: two pytest processes at once, one per kind of test.

"system" holds the tests that change the machine's users and permissions: JupyterHub with
its Unix accounts, Slurm in network namespaces, the grading sandbox run as an ordinary user
(which opens /root's search permission while it runs). They must run one at a time, and they
spend much of their time waiting on a hub, a scheduler or a limit; the grading workflow's
tests join them only so that both streams take about as long. "compute" holds everything
else (lessons executed, the browser, torchrun jobs, graders in sandboxes of their own, the
canvas sweeps), then the solutions under nbval; it uses the cores while the system tests
wait. The two share nothing but the machine: ports are drawn apart (hubs
from 20000-32000, everything else from the kernel's ephemeral range) and no test in one
looks at the other's processes or files.

Each line a stream prints comes out as it is written, tagged with the stream's name. The
exit status is the first failing stream's, else 0. A signal (Ctrl-C, CI's time limit) is
passed on to both pytest processes, whose own handlers then tear down every hub, cluster,
browser and job (tests/conftest.py), and this waits for them.
Run: python tools/slow_tier.py [--junit-dir DIR]   (DIR: one JUnit report per stream)
"""
from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = ["tests/classroom", "tests/cluster", "tests/grading/test_grading_sandbox.py",
          "tests/grading/test_sandbox_cgroups.py",
          # no users or permissions changed: here only to even the streams' times (its
          # instructor's workflow grades a class, about 3 minutes)
          "tests/grading/test_grading.py"]
PYTEST = [sys.executable, "-m", "pytest"]
STREAMS = {
    "system": [[*PYTEST, "-m", "slow", "--durations=15", *SYSTEM]],
    "compute": [[*PYTEST, "-m", "slow", "--durations=15", "tests",
                 *(f"--ignore={d}" for d in SYSTEM)],
                [*PYTEST, "--nbval", "--nbval-current-env", "-p", "no:randomly", "solutions"]],
}
#: seconds the streams get to tear down after a signal before they are killed
GRACE = 120
_LIBC = ctypes.CDLL(None, use_errno=True)      # loaded before any fork


def _ended_with_us() -> None:
    """In the child: SIGTERM when this runner dies (PR_SET_PDEATHSIG), so nothing outlives
    it even when it is killed outright. The kernel may send it more than once (once per
    thread of the runner it passes through on the way to init); pytest acts on the first
    (tests/conftest.py)."""
    _LIBC.prctl(1, signal.SIGTERM)


def _pump(name: str, proc: subprocess.Popen) -> None:
    """The stream's lines, tagged with its name, as they come."""
    for line in proc.stdout:
        sys.stdout.write(f"[{name}] {line}")
        sys.stdout.flush()


def run(junit_dir: Path | None = None) -> int:
    """Both streams at once, each command of a stream after the last has passed; the first
    failing stream's exit status, else 0. Children get a session of their own, so a
    terminal's Ctrl-C reaches them once, through ``stop``."""
    pending = {name: list(enumerate(cmds)) for name, cmds in STREAMS.items()}
    running: dict[str, tuple[subprocess.Popen, threading.Thread]] = {}
    codes: dict[str, int] = {}
    stopped_at: list[float] = []

    def stop(signum, _frame):
        if not stopped_at:
            stopped_at.append(time.monotonic())
            pending.clear()
            for proc, _ in running.values():
                proc.send_signal(signal.SIGTERM)   # pytest's handler tears down, then exits

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    while pending or running:
        for name in [n for n in pending if n not in running]:
            i, cmd = pending[name].pop(0)
            if not pending[name]:
                del pending[name]
            if junit_dir is not None:
                cmd = [*cmd, f"--junitxml={junit_dir / f'{name}-{i}.xml'}"]
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, bufsize=1,
                                    start_new_session=True, preexec_fn=_ended_with_us)
            pump = threading.Thread(target=_pump, args=(name, proc))
            pump.start()
            running[name] = (proc, pump)
        time.sleep(0.2)
        for name, (proc, pump) in list(running.items()):
            if proc.poll() is not None:
                pump.join()
                codes[name] = proc.returncode
                del running[name]
                if proc.returncode:
                    pending.pop(name, None)        # a failed stream runs nothing more
        if stopped_at and time.monotonic() - stopped_at[0] > GRACE:
            for proc, _ in running.values():
                proc.kill()
    for name in STREAMS:
        print(f"slow tier, {name}: " + ("not run" if name not in codes else
                                        f"exit {codes[name]}" if codes[name] else "passed"))
    if stopped_at:
        return 130
    failed = [name for name in STREAMS if codes.get(name)]
    return codes[failed[0]] if failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--junit-dir", type=Path, default=None,
                    help="write each stream's JUnit report here (benchmarks/bench_tests.py)")
    a = ap.parse_args()
    sys.exit(run(a.junit_dir))
