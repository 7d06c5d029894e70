"""Start the ranks of a graded real-code exercise and gather their reports.

In grading, the trusted grader asks a fresh sandbox's runner to call :func:`launch` before
any student code has run there; for a public check the student's own kernel calls it. Each
rank is a new ``python -m pplab.runtime.exercise_worker`` that gets only its own inputs, on
its own stdin, and answers on its own stdout; the launcher turns non-dumpable first, so no
rank can read the other's inputs out of it.
"""
from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import threading
import time

#: bytes of a rank's report (and of its printed output) kept
REPORT_CAP = 4 << 20
OUTPUT_CAP = 64 << 10
PR_SET_DUMPABLE = 4


class RankError(AssertionError):
    """A rank failed, hung or said nothing: the task scores 0, with this line."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Capped(threading.Thread):
    """Read one pipe to its end, keeping the first ``cap`` bytes (so a rank never blocks)."""

    def __init__(self, pipe, cap: int):
        super().__init__(daemon=True)
        self.pipe, self.cap, self.data, self.over = pipe, cap, b"", False
        self.start()

    def run(self):
        while chunk := self.pipe.read(1 << 16):
            room = self.cap - len(self.data)
            self.data += chunk[:max(room, 0)]
            self.over |= len(chunk) > room


def _start(request: dict, rank: int, world: int, port: int, timeout: float):
    spec = dict(task=request["task"], sources=request["sources"], names=request["names"],
                cases=request["ranks"][rank],
                rank=rank, world=world, port=port, timeout=timeout)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG",
                                                        "PYTHONPATH", "PPLAB_SANDBOX")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, "-m", "pplab.runtime.exercise_worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)
    readers = (_Capped(proc.stdout, REPORT_CAP), _Capped(proc.stderr, OUTPUT_CAP))
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except OSError:
        pass                # it died before reading: _wait reports its exit
    return proc, readers


def _stop(procs) -> None:
    for proc, _ in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait()


def _last_line(data: bytes, code: int) -> str:
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:500] if lines else f"exit {code}"


def _failed(procs) -> int | None:
    """The first rank (in rank order) that exited with an error, if any."""
    codes = [proc.poll() for proc, _ in procs]
    return next((r for r, code in enumerate(codes) if code not in (None, 0)), None)


def _wait(procs, timeout: float) -> None:
    """Until every rank is done; a rank that fails ends the wait at once (its partner
    would otherwise sit in a receive until the timeout)."""
    deadline = time.monotonic() + timeout
    while any(proc.poll() is None for proc, _ in procs) and _failed(procs) is None:
        if time.monotonic() > deadline:
            rank = next(r for r, (proc, _) in enumerate(procs) if proc.poll() is None)
            raise RankError(f"rank {rank} did not finish within {timeout:g} s: a receive with "
                            "no matching send (or two ranks both receiving first) waits "
                            "forever")
        time.sleep(0.05)
    if _failed(procs) is not None:
        time.sleep(0.5)                 # a partner's failure follows the cause's
        rank = _failed(procs)
        proc, (_, err) = procs[rank]
        err.join(5)
        raise RankError(f"rank {rank} failed: {_last_line(err.data, proc.returncode)}")


def _report(rank: int, reader: _Capped):
    reader.join(10)
    if reader.over or reader.is_alive():
        raise RankError(f"rank {rank}'s report was over {REPORT_CAP >> 20} MB or never ended")
    try:
        return json.loads(reader.data)
    except ValueError:
        raise RankError(f"rank {rank} reported nothing readable") from None


def launch(request: dict, timeout: float) -> list:
    """``request``: task, sources, and per rank its list of case inputs. The ranks' reports,
    unchecked (the trusted side reads them strictly). Raises :class:`RankError`."""
    world = len(request["ranks"])
    port = free_port()
    procs = []
    try:
        for rank in range(world):
            procs.append(_start(request, rank, world, port, timeout))
        _wait(procs, timeout)
        return [_report(rank, out) for rank, (_, (out, _)) in enumerate(procs)]
    finally:
        _stop(procs)


def undumpable() -> None:
    """No other process of the sandbox's user may ptrace this one or read its memory (the
    launcher holds every rank's inputs; a rank holds its own)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
