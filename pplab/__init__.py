"""pplab: pipeline parallelism you can see and run.

The pure core imported here (schedules, validator, simulator, timeline) needs neither torch
nor matplotlib, so live sliders stay instant. Drawing lives in ``pplab.draw``, the real
multi-process runtime in ``pplab.runtime``, memory accounting in ``pplab.memory``.
"""
from .ir import Action, Overlap, Schedule, parse_op
from .schedules import GENERATORS, make_schedule
from .simulate import Costs, DeadlockError, simulate
from .timeline import Event, Timeline, peak_inflight
from .validate import ScheduleError, check, validate

__all__ = ["Action", "Overlap", "Schedule", "parse_op", "GENERATORS", "make_schedule", "Costs",
           "DeadlockError", "simulate", "Event", "Timeline", "peak_inflight", "ScheduleError",
           "check", "validate"]
__version__ = "0.1.0"
