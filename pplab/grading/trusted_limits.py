"""Limits on the trusted grading process itself (``job --serve``, ``job.run`` on Slurm).

Verdicts run here, on data a student's code produced: a value that is cheap to send but
expensive to expand must not be able to eat the machine. Each job runs under a soft address
space limit and a CPU-time budget of its own:

* memory: a normal job (nbgrader autograde and feedback, pplab, the verdicts) peaks at about
  0.73 GB of address space, 0.87 GB with torch's kernels loaded (VmPeak of the worker,
  measured on 01_bubble_and_1f1b and 06_real_processes); the limit is 4 times that,
  :data:`MEMORY` = 3.5 GiB, plus :data:`PER_CPU` for each core (thread stacks and malloc
  arenas reserve address space per core on a large server). Past it an allocation raises
  ``MemoryError``: inside a verdict that task scores 0, anywhere else the job ends as that
  submission's error line, and the next job gets a fresh worker.
* CPU: a normal job uses 4-5 CPU seconds in this process (the student's code runs in the
  sandbox, not here); the budget is :data:`CPU_SECONDS` per job (generous: CPU speed varies
  several times between machines), past which the job stops with
  :class:`TrustedLimitExceeded`. Wall time is bounded separately (``--timeout``).

Only soft limits are set, so the sandbox a job starts can still set its own (``--memory``
above this process's limit included); the grader's own code never raises them. The
instructor may change both with ``PPLAB_TRUSTED_MEMORY_GB`` and ``PPLAB_TRUSTED_CPU_S``.
"""
from __future__ import annotations

import os
import resource
import signal
import threading
from contextlib import contextmanager

MEMORY = 7 << 29            # bytes of address space for the trusted job process (3.5 GiB)
PER_CPU = 64 << 20          # and this much more per core
CPU_SECONDS = 120           # CPU seconds of the trusted job process, per job


class TrustedLimitExceeded(BaseException):
    """The trusted job went past its CPU budget (a BaseException, so no verdict's ``except
    Exception`` can swallow it and keep computing)."""


def memory_limit() -> int:
    value = os.environ.get("PPLAB_TRUSTED_MEMORY_GB")
    return int(float(value) * (1 << 30)) if value else MEMORY + PER_CPU * (os.cpu_count() or 1)


def cpu_budget() -> int:
    value = os.environ.get("PPLAB_TRUSTED_CPU_S")
    return int(float(value)) if value else CPU_SECONDS


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _on_xcpu(signum, frame):
    raise TrustedLimitExceeded(f"the trusted grader used more than {cpu_budget()} CPU "
                               "seconds on this submission and was stopped")


def _set_soft(which: int, value: int) -> tuple[int, int]:
    """Set a soft limit (never above the hard one); return what it was."""
    old = resource.getrlimit(which)
    hard = old[1]
    resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard),
                               hard))
    return old


@contextmanager
def bounded():
    """Run one job under the trusted side's memory and CPU limits; restore them after (so a
    process that grades job after job gets a fresh CPU budget each time)."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGXCPU, _on_xcpu) if in_main else None
    old_as = _set_soft(resource.RLIMIT_AS, memory_limit())
    old_cpu = _set_soft(resource.RLIMIT_CPU, int(_cpu_used()) + 1 + cpu_budget())
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, old_cpu)
        resource.setrlimit(resource.RLIMIT_AS, old_as)
        if in_main:
            signal.signal(signal.SIGXCPU, signal.SIG_DFL if previous is None else previous)


def why(error: BaseException) -> str:
    """The one line a submission gets when the trusted job hit one of its limits."""
    if isinstance(error, MemoryError):
        return (f"the trusted grader ran out of its {memory_limit() / (1 << 30):g} GiB memory "
                "limit on this submission and stopped")
    return str(error)
