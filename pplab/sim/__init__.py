"""The simulator: how long a schedule takes, op by op, on every rank.

    from pplab.sim import simulate          # the one entry point; pplab.simulate is the same

``reference.py`` states the rules and is the oracle; ``fast.py`` returns its events faster.
``compiled.py`` compiles a schedule for the fast one (``compile_schedule``: an immutable
value a caller keeps to simulate the schedule again, ``simulate(..., compiled=)``).
``costs.py`` says what an op costs, ``dependencies.py`` what it waits for. Optional models
on top: ``contention.py`` (ranks sharing CPU cores, ``simulate(..., cores=C)``),
``overlap.py`` (the F&B pair's price) and ``calibrate.py`` (fitting ``Costs`` to measured
runs). Communication as its own stream is
``pplab.streams``, above this package and above the lowering it plays.
"""
from .compiled import CompiledSchedule, compile_schedule
from .costs import Costs
from .dependencies import dependencies, dependency_keys
from .entry import EXECUTORS, execute, simulate
from .reference import DeadlockError, execute_reference

__all__ = ["CompiledSchedule", "Costs", "DeadlockError", "EXECUTORS", "compile_schedule",
           "dependencies", "dependency_keys", "execute", "execute_reference", "simulate"]
