"""Every graded task, declared once.

A row says which grader judges the task (its name, as a grade cell writes it in
``grade("check_x", ...)``, and the module under pplab that holds it), how the hidden cases
are drawn at grading time, which library paths the student's code may not call while the
grader runs it, and which of the grader's own reference helpers are the answer key. The
rest is read from here: :mod:`.hidden` draws the cases, :mod:`.guard` blocks the paths in
a kernel and the grading sandbox cuts them out of its copy of pplab
(:func:`.guard.sandbox_cut`), and ``pplab.exercises`` exports the graders by these names.

This module imports nothing from pplab, so every other part can read it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from random import Random
from typing import Callable

#: every executor that times a schedule: a task that cuts the simulator cuts them all
#: (``timeline.run_events``, the simulator's last step, lives where it is defined)
SIMULATORS = ("sim.entry.*", "sim.reference.*", "sim.fast.*", "sim.compiled.*", "sim.costs.*",
              "sim.dependencies.*", "sim.contention.*", "streams.model.*", "streams.worklist.*",
              "streams.replay.*")

#: the message plans a counting task asks for (the lowering's public functions)
MESSAGE_PLANS = ("lower.lower", "lower.messages", "lower.p2p_messages", "lower.in_order_plan",
                 "lower.up_front_plan", "lower.check_in_order")


@dataclass(frozen=True)
class Task:
    """One graded task.

    ``cases`` draws the hidden cases from a seeded ``Random`` (None: the answer is data, a
    schedule or a config, and the grader's own cases are all there is). ``blocks`` is what
    the student's code may not call on top of what every derive-it task blocks (the
    schedule generators, closed forms and every task's answer key, :func:`.guard.always`);
    with ``uses_library`` the honest answer needs the library (the planner's estimate
    builds schedules), so the sandbox cuts only ``blocks`` and the answer keys."""
    check: str
    module: str
    cases: Callable[[Random], list] | None = None
    blocks: tuple[str, ...] = ()
    answer_key: tuple[str, ...] = ()
    uses_library: bool = False

    def grader(self, package: str = __name__.split(".")[0]):
        """The grading function, from ``package`` (pplab, or a private copy of it)."""
        return getattr(importlib.import_module(f"{package}.{self.module}"), self.check)


# ---- case generators: each a function of a seeded Random ----------------------------------

def _pm(n, p_max=10, m_max=40):
    return lambda rng: [(rng.randint(1, p_max), rng.randint(1, m_max)) for _ in range(n)]


def _seed(rng):
    return [rng.randrange(1 << 30)]


def _placement(rng, n=10):
    out = []
    for _ in range(n):
        P, V = rng.randint(1, 8), rng.randint(1, 4)
        out.append((rng.randint(P * V, 100), P, V))
    return out


def _p2p(rng, n=10):
    out = []
    for _ in range(n):
        P = rng.randint(1, 8)
        out.append((P, P * rng.randint(1, 4), rng.randint(1, 4)))
    return out


def _zero(rng, n=8):
    return [(float(rng.randint(1, 4000)) * 1e8, rng.choice([1, 2, 3, 8, 24, 64, 100, 1024]))
            for _ in range(n)]


def _act(rng, n=5):
    out = []
    for _ in range(n):
        a = rng.choice([8, 16, 24, 32, 40, 64])
        out.append((rng.choice([512, 1024, 2048, 4096]), rng.randint(1, 4),
                    a * rng.choice([64, 128]), a))
    return out


def _peak(rng, n=6):
    out = []
    for _ in range(n):
        P = rng.randint(1, 12)
        out.append((P, rng.randint(1, 40), rng.randint(P, 130)))
    return out


def _partition(rng, n=10):
    out = []
    for _ in range(n):
        layers = rng.randint(2, 30)
        costs = [rng.choice([0.5, 1.0, 1.0, 1.0, 2.0, 3.5, 7.0]) for _ in range(layers)]
        out.append((costs, rng.randint(1, min(layers, 8))))
    return out


def _posting(rng, n=5):
    menu = [("1f1b", None), ("gpipe", None), ("zb-h1", None), ("zbv", None),
            ("interleaved", 2), ("dualpipev", None)]
    out = []
    for _ in range(n):
        name, V = rng.choice(menu)
        P = rng.choice([2, 3, 4])
        M = 2 * P * rng.randint(1, 2)
        out.append((name, P, M, V))
    return out


_WEIGHTS_LAST = ("exercises.derive.weights_last",)
_REAL_CODE_KEY = ("runtime.exercises.reference_grads",)

# ---- the table ------------------------------------------------------------------------------

TASKS = {t.check: t for t in (
    # exercise 01: bubble and 1F1B
    Task("check_bubble_formulas", "exercises.bubble", _pm(12),
         blocks=SIMULATORS + ("timeline.*",)),
    Task("check_one_f_one_b_rank", "exercises.bubble", _pm(8, 9, 20)),
    Task("check_inflight", "exercises.bubble", _pm(8, 6, 16), blocks=("timeline.*",)),
    Task("check_text_schedule", "exercises.bubble"),
    # exercise 02: schedules
    Task("check_layer_placement", "exercises.schedules", _placement, blocks=("partition.*",),
         answer_key=("exercises.schedules._reference_layers",)),
    Task("check_split_backward_schedule", "exercises.schedules"),
    Task("check_fixed_schedule", "exercises.schedules"),
    Task("check_p2p_messages", "exercises.schedules", _p2p, blocks=MESSAGE_PLANS,
         answer_key=("exercises.schedules.count_p2p",)),
    # exercise 03: memory
    Task("check_zero_bytes", "exercises.memory", _zero,
         blocks=("memory.accounting.*", "memory.planner.*")),
    Task("check_layer_activations", "exercises.memory", _act,
         blocks=("memory.activations.*", "memory.planner.*")),
    Task("check_peak_1f1b", "exercises.memory", _peak,
         blocks=("timeline.*", "partition.*", "memory.*"),
         answer_key=("exercises.memory.expected_1f1b_peak",)),
    Task("check_layout_for_budget", "exercises.memory", _seed, blocks=("memory.planner.plan",),
         answer_key=("exercises.memory.step_bound",), uses_library=True),
    # exercise 04: a real pipeline
    Task("check_balanced_partition", "exercises.pipeline", _partition, blocks=("partition.*",)),
    Task("check_send_recv_plan", "exercises.pipeline", _pm(6, 8, 16),
         answer_key=("exercises.pipeline.reference_plan",
                     "exercises.pipeline.steady_state_pairs")),
    Task("check_hand_written_1f1b", "exercises.pipeline"),
    Task("check_in_order_plan", "exercises.pipeline", _posting, blocks=("lower.in_order_plan",)),
    # exercise 05: puzzles
    Task("check_puzzle", "exercises.puzzles", answer_key=("exercises.puzzles.builtin_scores",)),
    # exercise 06: real processes
    Task("check_stage_forward", "runtime.exercises", _seed, blocks=("runtime.worker.*",),
         answer_key=_REAL_CODE_KEY),
    Task("check_stage_backward", "runtime.exercises", _seed, blocks=("runtime.worker.*",),
         answer_key=_REAL_CODE_KEY),
    Task("check_pipeline_step", "runtime.exercises", _seed, blocks=("runtime.worker.*",),
         answer_key=_REAL_CODE_KEY),
    # exercise 07: bug hunt
    Task("check_loss_scaling", "runtime.exercises", _seed, answer_key=_REAL_CODE_KEY),
    Task("check_uneven_microbatches", "runtime.exercises", _seed, answer_key=_REAL_CODE_KEY),
    Task("check_dp_average", "runtime.exercises", _seed, answer_key=_REAL_CODE_KEY),
    Task("check_global_clip", "runtime.exercises", _seed, answer_key=_REAL_CODE_KEY),
    # exercise 08: derivations
    Task("check_derived_makespan", "exercises.derive", _pm(10, 12, 40),
         blocks=SIMULATORS + ("timeline.*",) + _WEIGHTS_LAST,
         answer_key=("exercises.derive.reference_makespan",)),
    Task("check_derived_bubble", "exercises.derive", _pm(10, 12, 40),
         blocks=SIMULATORS + ("timeline.*",) + _WEIGHTS_LAST,
         answer_key=("exercises.derive.reference_bubble",)),
    Task("check_derived_peak", "exercises.derive", _pm(10, 12, 40),
         blocks=SIMULATORS + ("timeline.*",) + _WEIGHTS_LAST,
         answer_key=("exercises.derive.reference_peak",)),
)}

#: the graders' own reference helpers: blocked for every task, not only their own
ANSWER_KEYS = tuple(dict.fromkeys(k for t in TASKS.values() for k in t.answer_key))
