"""pplab: pipeline parallelism you can see and run.

The pure core imported here (schedule registry, validator, simulator, timeline) needs
neither torch nor matplotlib, so live sliders stay instant and it runs in a browser too.
The package root holds the core's main modules; the simulator lives in ``pplab.sim``,
environment probes (browser or machine, Slurm) in ``pplab.probe``, drawing in ``pplab.draw``,
canvases in ``pplab.canvases``, the real multi-process runtime in ``pplab.runtime``, memory
accounting in ``pplab.memory``.
"""
from .ir import Action, Overlap, Schedule, parse_op
from .registry import NAMES, REGISTRY, make_schedule
from .sim import Costs, DeadlockError, simulate
from .timeline import Event, Timeline, peak_inflight, peak_inflight_of
from .validate import ScheduleError, check, validate
from .probe.env import in_browser, local_only, register_magic as _register_magic

_register_magic()

__all__ = ["Action", "Overlap", "Schedule", "parse_op", "NAMES", "REGISTRY", "make_schedule",
           "Costs", "DeadlockError", "simulate", "Event", "Timeline", "peak_inflight",
           "peak_inflight_of", "ScheduleError", "check", "validate", "in_browser", "local_only"]
__version__ = "0.1.0"
