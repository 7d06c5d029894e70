"""A run's options as one typed object: checked once in the launcher, written into the job
file with ``to_dict``, and read back once by every rank with ``from_dict``."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields

from ..ir import Schedule
from ..sim import Costs, simulate
from ..streams import Link, simulate_streams
from .model import RECOMPUTE, TinyConfig


def emulated_costs(emulate: dict) -> Costs:
    """The simulator's costs from an ``emulate`` dict (its "mode" key is the worker's)."""
    try:
        return Costs(**{k: v for k, v in emulate.items() if k != "mode"})
    except TypeError as e:
        raise ValueError(f"emulate takes tf, tb, tw, tfb (seconds per chunk) and mode: {e}") \
            from None


def simulated_twin(schedule: Schedule, cfg: "RunConfig"):
    """The simulated run a measured one is drawn over (None without emulated costs); with
    blocking receives, the stream model playing the same posting order."""
    if not cfg.emulate:
        return None
    costs = emulated_costs(cfg.emulate)
    if cfg.comm in BLOCKING:
        return simulate_streams(schedule, costs, Link(lowering=cfg.comm, blocking=True))
    return simulate(schedule, costs)


COMMS = ("auto", "up-front", "in-order", "front-loaded", "just-in-time")
#: the comm choices whose receives block where they are posted (a plain ``recv()``)
BLOCKING = ("front-loaded", "just-in-time")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything a run computes besides the schedule: built once (by name, never by
    position) and never written afterwards, so the config a caller passes is the one run."""
    steps: int = 2
    emulate: dict | None = None          # {"tf", "tb", "tw", "tfb": s, "mode": "add"|"pad"}
    recompute: str = "none"              # none | full | selective | stage
    model: TinyConfig = field(default_factory=TinyConfig)
    seed: int = 0
    optimizer: str = "sgd"               # sgd (momentum 0.9) | adam
    lr: float = 0.05
    device: str = "auto"                 # auto | cpu | cuda
    comm: str = "auto"                   # auto | up-front (gloo's) | in-order (NCCL's) |
    #: front-loaded | just-in-time: gloo with *blocking* receives posted in that order
    #: (pplab/lower.py), to see the head-of-line bubble of torch#188833 on real processes
    check: bool = True                   # compare with a single-process reference on rank 0
    control: str | None = None           # negative controls: "seed" | "drop" | "misorder"
    fault: dict | None = None            # tests: {"rank": r, "op": i, "kind": "raise"|"kill"}
    save_checkpoint: str | None = None
    load_checkpoint: str | None = None
    pin: bool = False                    # one CPU core per local rank, when there are enough

    def pin_rank(self) -> None:
        """With ``pin``: bind this process to its own core (LOCAL_RANK-th of the usable ones)
        when the node has a core per local rank, so the OS does not migrate ranks (timing
        runs for ``pplab calibrate``); otherwise leave the scheduler free."""
        cpus = sorted(os.sched_getaffinity(0))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        if self.pin and 1 < local_world <= len(cpus):
            os.sched_setaffinity(0, {cpus[int(os.environ.get("LOCAL_RANK", 0))]})

    def validate(self) -> None:
        """ValueError naming the field and the values it takes, before anything starts."""
        _one_of("recompute", self.recompute, RECOMPUTE)
        if self.steps < 1:
            raise ValueError(f"steps must be ≥ 1, got {self.steps}")
        _one_of("optimizer", self.optimizer, ("sgd", "adam"))
        _one_of("device", self.device, ("auto", "cpu", "cuda"))
        _one_of("comm", self.comm, COMMS)
        _one_of("control", self.control, (None, "seed", "drop", "misorder"))
        if self.control == "misorder" and self.comm != "in-order":
            raise ValueError("control='misorder' swaps in-order receives: use comm='in-order'")
        if self.emulate is not None:
            _one_of("emulate mode", self.emulate.get("mode", "add"), ("add", "pad"))
            emulated_costs(self.emulate)     # raises ValueError for negative / inconsistent costs

    def to_dict(self) -> dict:
        """The job file's form (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """Back from ``to_dict`` on every rank; keys it does not know are dropped."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["model"] = TinyConfig.from_dict(kw.get("model") or {})
        return cls(**kw)


def _one_of(name: str, value, allowed) -> None:
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")


@dataclass(frozen=True)
class RunSpec:
    """One run of a job: the schedule, its options, and where rank 0 writes the result."""
    schedule: Schedule
    config: RunConfig
    result: str = ""

    def to_dict(self) -> dict:
        """The job file's form of one run."""
        return {"schedule": self.schedule.to_dict(), "config": self.config.to_dict(),
                "result": self.result}

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        """Back from ``to_dict`` on every rank."""
        return cls(Schedule.from_dict(d["schedule"]), RunConfig.from_dict(d["config"]),
                   d.get("result", ""))
