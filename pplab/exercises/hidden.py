"""Hidden tests: cases drawn at grading time.

``pplab grade`` never runs :func:`grade` in the student's kernel: it reads a grade cell's
``grade("check_x", ...)`` line, draws the cases with :func:`draw_cases` and judges the
answers in its own process (:mod:`pplab.grading.verdict`). :func:`grade` is the same check
run in a notebook's own kernel (the solutions under nbval, an instructor trying a
submission by hand): a rehearsal, not the grade. In a kernel,

* a lookup table of the visible cases fails: hidden cases come from a generator seeded by
  ``PPLAB_GRADE_SEED`` (``pplab grade`` draws a fresh one every run, ``--resume`` included,
  and shows only its :func:`seed_digest`; unset, a fresh seed is drawn), so no table written
  before grading holds them;
* casual patches of a grader or the library do not reach it: :func:`grade` loads a fresh,
  private copy of pplab's pure core from the installed files (under another module name).
  Code in the same process can still reach that copy (docs/teaching.md, threat model):
  only the trusted path is the grade.

A hidden test cell in a source notebook reads::

    import sys; sys.modules.pop("pplab.exercises.hidden", None)
    from pplab.exercises.hidden import grade
    grade("check_bubble_formulas", bubble_of_total, bubble_of_ideal)
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import os
import secrets
import sys
from pathlib import Path
from random import Random

SEED_ENV = "PPLAB_GRADE_SEED"
_SEALED_PREFIX = "_pplab_sealed"
_counter = itertools.count()


def grading_seed() -> int:
    """The run's seed: from the environment when ``pplab grade`` set it, else fresh."""
    value = os.environ.get(SEED_ENV)
    if value is None:
        value = os.environ[SEED_ENV] = str(secrets.randbits(32))
    return int(value)


def seed_digest(seed: int) -> str:
    """What feedback and logs show of a run's seed: enough for the instructor (who keeps the
    seed in the run's own folder) to match a dispute to a run, nothing a student can replay."""
    return hashlib.sha256(f"pplab-grade-seed:{seed}".encode()).hexdigest()[:12]


def load_sealed() -> str:
    """Load a private copy of pplab from the files next to this one; return its name."""
    for name in [m for m in sys.modules if m.startswith(_SEALED_PREFIX)]:
        del sys.modules[name]
    root = Path(__file__).resolve().parents[1]
    name = f"{_SEALED_PREFIX}{next(_counter)}"
    spec = importlib.util.spec_from_file_location(
        name, root / "__init__.py", submodule_search_locations=[str(root)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return name


# ---- case generators: one per grader, each a function of a seeded Random ------------------

def _pm(rng, n, p_max=10, m_max=40):
    return [(rng.randint(1, p_max), rng.randint(1, m_max)) for _ in range(n)]


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


#: grader -> (module under pplab, case generator or None when the answer is not a function)
TASKS = {
    "check_bubble_formulas": ("exercises.bubble", lambda r: _pm(r, 12)),
    "check_one_f_one_b_rank": ("exercises.bubble", lambda r: _pm(r, 8, 9, 20)),
    "check_inflight": ("exercises.bubble", lambda r: _pm(r, 8, 6, 16)),
    "check_text_schedule": ("exercises.bubble", None),
    "check_layer_placement": ("exercises.schedules", _placement),
    "check_split_backward_schedule": ("exercises.schedules", None),
    "check_fixed_schedule": ("exercises.schedules", None),
    "check_p2p_messages": ("exercises.schedules", _p2p),
    "check_zero_bytes": ("exercises.memory", _zero),
    "check_layer_activations": ("exercises.memory", _act),
    "check_peak_1f1b": ("exercises.memory", _peak),
    "check_layout_for_budget": ("exercises.memory", lambda r: [r.randrange(1 << 30)]),
    "check_balanced_partition": ("exercises.pipeline", _partition),
    "check_send_recv_plan": ("exercises.pipeline", lambda r: _pm(r, 6, 8, 16)),
    "check_hand_written_1f1b": ("exercises.pipeline", None),
    "check_in_order_plan": ("exercises.pipeline", _posting),
    "check_puzzle": ("exercises.puzzles", None),
    "check_derived_bubble": ("exercises.derive", lambda r: _pm(r, 10, 12, 40)),
    "check_derived_makespan": ("exercises.derive", lambda r: _pm(r, 10, 12, 40)),
    "check_derived_peak": ("exercises.derive", lambda r: _pm(r, 10, 12, 40)),
    "check_stage_forward": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_stage_backward": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_pipeline_step": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_loss_scaling": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_uneven_microbatches": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_dp_average": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
    "check_global_clip": ("runtime.exercises", lambda r: [r.randrange(1 << 30)]),
}


def draw_cases(check: str, seed: int | None = None):
    """The hidden cases of ``check`` for this grading run (None: the answer is not a
    function, so there is nothing to draw)."""
    _, draw = TASKS[check]
    if draw is None:
        return None
    seed = grading_seed() if seed is None else seed
    return draw(Random(f"{seed}:{check}"))


def grade(check: str, *answers, **kwargs):
    """Grade ``answers`` with a private copy of ``check`` on freshly drawn hidden cases."""
    module_name, _ = TASKS[check]
    package = load_sealed()
    grader = getattr(importlib.import_module(f"{package}.{module_name}"), check)
    cases = draw_cases(check)
    if cases is not None:
        kwargs["cases"] = cases
    result = grader(*answers, **kwargs)
    print(f"hidden tests passed (seed digest {seed_digest(grading_seed())}) ✓")
    return result
