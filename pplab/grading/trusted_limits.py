"""Limits on the trusted grading process itself, enforced from outside it.

Verdicts run in the trusted process, on data a student's code produced: a value that is
cheap to send but expensive to expand must not be able to eat the machine, and one C call
(a set built from colliding numbers, a regular expression on a pathological row) must not
outlive a budget the way a Python-level signal handler lets it. So each job runs in a child
process forked for it (:func:`.job.run`) and is held from outside:

* memory: an address-space limit the kernel applies to every allocation the child makes,
  whatever code makes it. A normal job peaks at about 0.73 GB of address space, 0.87 GB with
  torch's kernels loaded (measured on 01_bubble_and_1f1b and 06_real_processes); the limit
  is 4 times that, :data:`MEMORY` = 3.5 GiB, plus :data:`PER_CPU` per core (thread stacks
  and malloc arenas reserve address space per core). Past it an allocation raises
  ``MemoryError``: inside a verdict that task scores 0; anywhere else the job ends as that
  submission's error line, nbgrader's own ``except:`` included (its log is read for it).
* CPU: a normal job uses 4-5 CPU seconds here (the student's code runs in the sandbox); the
  budget is :data:`CPU_SECONDS` per job. The kernel kills the child when it is spent
  (``RLIMIT_CPU`` with ``SIGXCPU``'s default action, which no Python code delays), and the
  parent checks the child's CPU time itself as a second line.
* wall time: the parent kills the child at ``--timeout``.

Whatever stops a child, the parent writes the reason as the submission's result, removes
what the child's sandboxes left (:func:`.untrusted.sandbox.sweep`), and the next job is a
fresh fork. The instructor may change the limits with ``PPLAB_TRUSTED_MEMORY_GB`` and
``PPLAB_TRUSTED_CPU_S``.
"""
from __future__ import annotations

import os
import resource
import signal
import time

MEMORY = 7 << 29            # bytes of address space for the trusted job process (3.5 GiB)
PER_CPU = 64 << 20          # and this much more per core
CPU_SECONDS = 120           # CPU seconds of the trusted job process, per job
POLL = 0.2                  # seconds between the parent's looks at the child
CPU_GRACE = 5.0             # CPU seconds past the budget before the parent kills itself


def memory_limit() -> int:
    value = os.environ.get("PPLAB_TRUSTED_MEMORY_GB")
    return int(float(value) * (1 << 30)) if value else MEMORY + PER_CPU * (os.cpu_count() or 1)


def cpu_budget() -> int:
    value = os.environ.get("PPLAB_TRUSTED_CPU_S")
    return max(1, int(float(value))) if value else CPU_SECONDS


def apply(sandbox_memory: int = 0) -> None:
    """In the job's child, first thing: the kernel's limits. Both bind at the soft value,
    which nothing in the grader raises: past the address space an allocation fails, past the
    CPU seconds the kernel ends the process (``SIGXCPU``). The hard values are left for the
    sandboxes this process starts, which set their own (``--memory`` may exceed this one)."""
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)      # the kernel's kill, not a handler
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _set(resource.RLIMIT_AS, memory_limit(), max(memory_limit(), sandbox_memory))
    _set(resource.RLIMIT_CPU, cpu_budget(), resource.RLIM_INFINITY)   # a sandbox sets its own


def _set(which: int, soft: int, hard: int) -> None:
    """Lower a limit (never above the hard one this process already has)."""
    _, old_hard = resource.getrlimit(which)
    if old_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, old_hard), min(hard, old_hard)
    resource.setrlimit(which, (soft, hard))


def cpu_seconds(pid: int) -> float:
    """CPU time of the process ``pid`` itself (not its children: the sandbox's is its own)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch(pid: int, timeout: float) -> tuple[int, str | None]:
    """Wait for the child ``pid``, killing it past its CPU budget or ``timeout`` seconds;
    ``(wait status, why it was stopped)``, why None when it ended by itself."""
    deadline, why = time.monotonic() + timeout, None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            why = f"the notebook did not finish within {timeout:g} s and was stopped"
        elif cpu_seconds(pid) > cpu_budget() + CPU_GRACE:
            why = cpu_reason()
        if why:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(POLL)
    if why is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        why = cpu_reason()
    return status, why


def cpu_reason() -> str:
    return (f"the trusted grader used more than {cpu_budget()} CPU seconds on this submission "
            "and was stopped")


def memory_reason() -> str:
    return (f"the trusted grader ran out of its {memory_limit() / (1 << 30):g} GiB memory limit "
            "on this submission and stopped")


def ended(status: int) -> str:
    """Why a child that wrote no result ended, in words."""
    if os.WIFSIGNALED(status):
        return f"the grading job was killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"the grading job ended with exit status {os.WEXITSTATUS(status)} and no result"
