"""torchrun in its own process session: start it, relay its progress, end every process it
started (the session is killed as a group and checked through psutil), and say in one
message which rank failed and why (each rank writes its error to ``rank{r}.json``)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from typing import Callable

from ..ir import Schedule


def children_left(pid: int, timeout: float = 10.0) -> list[int]:
    """Pids still alive in the session started at ``pid`` (empty list when all are gone)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        psutil = None
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        if psutil is not None:
            for p in psutil.process_iter(["pid"]):
                try:
                    if os.getsid(p.info["pid"]) == pid and p.status() != psutil.STATUS_ZOMBIE:
                        alive.append(p.info["pid"])
                except (OSError, psutil.Error):
                    pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def kill_session(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if not children_left(proc.pid, timeout=wait):
            return
    left = children_left(proc.pid, timeout=1.0)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


_SIGNALS = {int(s): s.name for s in signal.Signals}


def diagnose(tmp: str, output: str, schedule: Schedule | None, timed_out: bool,
              timeout: float) -> str:
    """One message naming the failing rank(s) and their cause."""
    errs, waits = {}, {}
    for name in os.listdir(tmp):
        m = re.match(r"rank(\d+)\.(json|wait)$", name)
        if not m:
            continue
        try:
            with open(os.path.join(tmp, name)) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        (errs if m.group(2) == "json" else waits)[int(m.group(1))] = d
    lines = []
    raised = {r: d for r, d in errs.items() if d.get("kind") in ("exception", "deadlock")}
    for r, d in sorted(raised.items()):
        tb = [ln for ln in d.get("traceback", "").strip().splitlines() if ln.strip()]
        excerpt = " | ".join(ln.strip() for ln in tb[-4:-1])
        lines.append(f"rank {r} failed: {d['message']}"
                     + (f" (traceback: {excerpt})" if excerpt else ""))
    # ranks that died without writing anything (killed): torchrun names them with exit codes
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)",
                         output):
        r, code = int(m.group(1)), int(m.group(2))
        if r in errs:
            continue
        if code < 0:
            lines.append(f"rank {r} was killed by signal {_SIGNALS.get(-code, -code)} "
                         f"(exit code {code}) and left no error report")
        elif code not in (0, 1):
            lines.append(f"rank {r} exited with code {code} and left no error report")
    stuck = {r: d for r, d in errs.items() if d.get("kind") == "stuck"}
    if not raised and (stuck or (timed_out and waits)):
        ranks = sorted(set(stuck) | set(waits))
        detail = "; ".join(
            (stuck[r]["message"] if r in stuck else f"rank {r} waiting {waits[r]['waiting_for']}")
            for r in ranks)
        lines.insert(0, f"stuck ranks: {', '.join(map(str, ranks))} — {detail}")
        if schedule is not None:
            from ..sim import DeadlockError, execute
            try:
                execute(schedule, lambda op: 1.0)
            except (DeadlockError, ValueError) as e:
                lines.append(f"the simulator agrees the schedule deadlocks: {e}")
    if timed_out:
        lines.insert(0, f"the run did not finish within the {timeout:g} s timeout")
    lost = sorted(r for r, d in errs.items() if d.get("kind") == "peer-lost")
    if lost and not lines:
        lines.append(f"rank(s) {', '.join(map(str, lost))} lost the connection to a peer that "
                     "ended without a report")
    if not lines:
        tail = " | ".join(ln for ln in output.strip().splitlines()[-6:])
        lines.append(f"torchrun failed without a rank error report: {tail}")
    return "; ".join(lines)


def supervise(cmd: list[str], tmp: str, progress_path: str, timeout: float,
               progress: Callable[[str], None] | None,
               extra_env: dict) -> tuple[int | None, bool, str, list]:
    """Run torchrun in its own session until it ends or ``timeout``; relay progress lines;
    kill the session. Returns (exit code, timed out, torchrun's output, pids left alive)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra_env)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    log_path = os.path.join(tmp, "torchrun.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=root)
    t0, seen, timed_out = time.monotonic(), 0, False
    try:
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                timed_out = True
                break
            time.sleep(0.05)
            if progress and os.path.exists(progress_path):
                with open(progress_path) as f:
                    lines = f.read().splitlines()
                for ln in lines[seen:]:
                    progress(ln)
                seen = len(lines)
    finally:
        kill_session(proc)
    left = children_left(proc.pid, timeout=2.0)
    with open(log_path) as f:
        return proc.returncode, timed_out, f.read(), left
