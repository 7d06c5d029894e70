"""The simulator: how long a schedule takes, op by op, on every rank.

    from pplab.sim import simulate          # the one entry point; pplab.simulate is the same

``reference.py`` states the rules and is the oracle; ``fast.py`` returns its events faster.
``plan.py`` compiles a schedule for the fast one. ``costs.py`` says what an op costs,
``dependencies.py`` what it waits for. Optional models on top: ``contention.py`` (ranks
sharing CPU cores, ``simulate(..., cores=C)``), ``overlap.py`` (the F&B pair's price) and
``calibrate.py`` (fitting ``Costs`` to measured runs). Communication as its own stream is
``pplab.streams``, above this package and above the lowering it plays.
"""
from .costs import Costs
from .dependencies import dependencies, dependency_keys
from .entry import EXECUTORS, execute, simulate
from .reference import DeadlockError, execute_reference

__all__ = ["Costs", "DeadlockError", "EXECUTORS", "dependencies", "dependency_keys", "execute",
           "execute_reference", "simulate"]
