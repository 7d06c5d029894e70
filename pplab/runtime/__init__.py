"""Run pipeline schedules for real: torchrun processes, point-to-point sends, measured timelines.

    from pplab.runtime import run_schedule
    res = run_schedule("1f1b", P=4, M=8, steps=2)
    res.timeline, res.grad_max_rel_error, res.step_time_s

Importing this package imports torch; ``pplab simulate`` never does.
"""
from .launcher import Launch, RunConfig, RunError, RunResult, run_many, run_schedule
from .model import TinyConfig, TinyGPT, StageModule, build_stage_modules, make_batch
from .checkpoint import load_checkpoint, save_checkpoint, read_checkpoint

__all__ = ["Launch", "RunConfig", "RunError", "RunResult", "run_many", "run_schedule", "TinyConfig",
           "TinyGPT", "StageModule", "build_stage_modules", "make_batch", "load_checkpoint",
           "save_checkpoint", "read_checkpoint"]
