"""Every schedule, declared once: generator, V rule, constraints, closed form, defaults.

The canvases' menus (``pplab.canvases.menus``), the planner, the command line, the exercises
and the tests read this table, so a new schedule is one generator function plus one
``ScheduleSpec`` below (docs/DESIGN.md walks
through an example). The generator stays the authority on what it accepts: it raises
``ValueError`` naming the rule broken and a value that works; ``constraints`` is the same
rule in words, for menus and documentation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import closed_forms as cf
from .ir import Schedule, gc_paused
from .schedules.classic import gpipe, naive, one_f_one_b
from .schedules.dualpipe import dualpipe, dualpipev
from .schedules.controllable import v_half, v_min, v_zb
from .schedules.interleaved import bfs_1f1b, breadth_first, interleaved
from .schedules.interleaved_zb import interleaved_zb
from .schedules.zero_bubble import zb_h1, zb_h2, zbv


@dataclass(frozen=True)
class Extrapolation:
    """How the planner may extrapolate a schedule's simulation in M (``memory/planner.py``),
    each trait checked by simulation (tests/core/test_registry.py). A schedule without one is
    simulated at its full M: slower, never silently wrong."""
    settles_at_2P: bool = False      # makespan and peak affine in M only from M ≥ 2P
    peak_grows: bool = False         # the activation peak grows with M (all forwards first)
    period_2: bool = False           # makespan grows alike every 2 microbatches from M ≥ 2P
    slope_exact: bool = False        # uneven stages: each extra microbatch adds exactly the
    #                                  busiest rank's work past M = 4P (with p2p latency too)
    slope_exact_without_p2p: bool = False    # the same, only when p2p latency is 0
    # without p2p latency, each extra microbatch adds exactly tf + tb past the fill
    steady_without_idle: bool = True
    makespan_as: str | None = None   # same makespan without p2p latency: share its simulation


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule's facts. ``stages_per_rank`` is "one" (V must be 1), "fixed" (always
    ``default_V`` stages, e.g. a V shape) or "any" (the user picks V ≥ 1)."""
    name: str
    generator: Callable[[int, int, int], Schedule]
    title: str
    stages_per_rank: str = "one"
    default_V: int = 1
    split_backward: bool = False
    constraints: str = "P, M ≥ 1"
    excess: Callable | None = None          # closed-form bubble as time per rank, or None
    excess_note: str = "no closed form"
    aliases: tuple[str, ...] = ()
    torch_class: str | None = None          # torch.distributed.pipelining's class, same order
    planner: Extrapolation | None = None    # None: the planner never extrapolates it

    def accepts_V(self, V: int) -> bool:
        """Whether the V slider value means something for this schedule."""
        if self.stages_per_rank == "any":
            return V >= 1
        return V == self.default_V


SPECS: tuple[ScheduleSpec, ...] = (
    ScheduleSpec("naive", naive, "naive (one microbatch at a time)", excess=cf.excess_naive,
                 excess_note="(P−1)·M·(tf+tb): only one rank ever works",
                 planner=Extrapolation(peak_grows=True, steady_without_idle=False)),
    ScheduleSpec("gpipe", gpipe, "GPipe / all-forward-all-backward", excess=cf.excess_1f1b,
                 excess_note="(P−1)(tf+tb), Huang et al. 2019; B = full backward",
                 aliases=("afab",), torch_class="ScheduleGPipe",
                 planner=Extrapolation(peak_grows=True, makespan_as="1f1b")),
    ScheduleSpec("1f1b", one_f_one_b, "1F1B (PipeDream-Flush)", excess=cf.excess_1f1b,
                 excess_note="(P−1)(tf+tb), Megatron-LM; B = full backward",
                 aliases=("pipedream-flush",), torch_class="Schedule1F1B",
                 planner=Extrapolation(slope_exact_without_p2p=True)),
    ScheduleSpec("interleaved", interleaved, "interleaved 1F1B", stages_per_rank="any",
                 default_V=2, constraints="M a multiple of P", excess=cf.excess_1f1b,
                 excess_note="(P−1)(tf+tb)/V, Narayanan et al. 2021, for M a multiple of P",
                 aliases=("interleaved-1f1b",), torch_class="ScheduleInterleaved1F1B",
                 planner=Extrapolation(settles_at_2P=True)),
    ScheduleSpec("bfs", breadth_first, "looped breadth-first", stages_per_rank="any",
                 default_V=2, excess=cf.excess_1f1b,
                 excess_note="(P−1)(tf+tb)/V, Lamy-Poirier 2023",
                 aliases=("breadth-first",), torch_class="ScheduleLoopedBFS",
                 planner=Extrapolation(settles_at_2P=True, peak_grows=True)),
    ScheduleSpec("bfs-1f1b", bfs_1f1b, "breadth-first with 1F1B steady state (Megatron, "
                 "Llama 3)", stages_per_rank="any", default_V=2, constraints="M ≥ P",
                 excess=cf.excess_1f1b,
                 excess_note="(P−1)(tf+tb)/V like interleaved: same warm-up trip, more held"),
    ScheduleSpec("zb-h1", zb_h1, "zero bubble H1", split_backward=True, excess=cf.excess_zb_h1,
                 excess_note="(P−1)(tf+tb−2tw), Zero Bubble Table 2; exact for M ≥ P, "
                             "tw ≤ tf, tw ≤ tI", aliases=("zb1p",),
                 torch_class="ScheduleInterleavedZeroBubble",   # one stage per rank: ZB-H1
                 planner=Extrapolation(settles_at_2P=True, period_2=True, slope_exact=True)),
    ScheduleSpec("zb-h2", zb_h2, "zero bubble H2", split_backward=True, excess=cf.excess_zb_h2,
                 excess_note="max((P−1)tf, (P−1)(tf+tI−2tw)) in one flushed step, M ≥ 2P−1; "
                             "the paper's (P−1)(tf+tI−2tw) needs overlapping iterations"),
    ScheduleSpec("interleaved-zb", interleaved_zb, "interleaved zero bubble (PyTorch)",
                 stages_per_rank="any", default_V=2, split_backward=True,
                 constraints="M a multiple of max(1, M // P)", excess=cf.excess_interleaved_zb,
                 # torch's class at any V (ZB-H1 is its V = 1 case, identical orders)
                 aliases=("interleavedzerobubble", "scheduleinterleavedzerobubble"),
                 excess_note="(P−1)(tf+tb−2tw)/V: ZB-H1's over V chunks; exact for M ≥ P, "
                             "tw ≤ tf, tw ≤ tI"),
    ScheduleSpec("zbv", zbv, "zero bubble V", stages_per_rank="fixed", default_V=2,
                 split_backward=True, excess=cf.excess_zbv,
                 excess_note="(P−1)·tf/2: the first microbatch's trip down the V, a lower "
                             "bound; reached at tf = tI = tw", aliases=("zb-v",),
                 torch_class="ScheduleZBVZeroBubble",
                 planner=Extrapolation(settles_at_2P=True, period_2=True, slope_exact=True)),
    ScheduleSpec("v-zb", v_zb, "V-ZB (controllable memory, 1F1B's peak)",
                 stages_per_rank="fixed", default_V=2, split_backward=True,
                 excess=cf.excess_v_zb,
                 excess_note="(P−1)·tf/2, the V's start-up trip, exact at tf = tI = tw for "
                             "M ≥ 2P; no rank idles inside its own span (Qi et al.: ≈ 0)"),
    ScheduleSpec("v-half", v_half, "V-Half (controllable memory, ½ of 1F1B's peak)",
                 stages_per_rank="fixed", default_V=2, split_backward=True,
                 excess=cf.excess_v_half,
                 excess_note="(6⌈P/2⌉−7)·tf/2 from the building block, exact at tf = tI = tw "
                             "for M ≥ 2P; Qi et al.: ≈ half of 1F1B's bubble"),
    ScheduleSpec("v-min", v_min, "V-Min (controllable memory, ⅓ of 1F1B's peak)",
                 stages_per_rank="fixed", default_V=2, split_backward=True,
                 excess=cf.excess_v_min,
                 excess_note="(4P−5, −2 if 3 divides P)·tf/2 from the building block, exact "
                             "at tf = tI = tw for M ≥ 2P; Qi et al.: ≈ ⅔ of 1F1B's bubble"),
    ScheduleSpec("dualpipe", dualpipe, "DualPipe (two copies)", split_backward=True,
                 constraints="P even, M even (DeepSeek-V3 §3.2.1) and M ≥ 2P (its "
                             "reference code)", excess=cf.excess_dualpipe,
                 excess_note="(P/2−1)(tF&B+tB−3tW), DeepSeek-V3 Table 2; exact at F=1, B=2, "
                             "W=1, F&B=3", planner=Extrapolation(settles_at_2P=True)),
    ScheduleSpec("dualpipev", dualpipev, "DualPipeV (V shape)", stages_per_rank="fixed",
                 default_V=2, split_backward=True, constraints="M ≥ 2P",
                 excess=cf.excess_dualpipev,
                 excess_note="DualPipe's formula on 2P half-size stages: (P−1)(tF&B+tB−3tW)/2",
                 torch_class="ScheduleDualPipeV", planner=Extrapolation(settles_at_2P=True)),
)

REGISTRY: dict[str, ScheduleSpec] = {s.name: s for s in SPECS}
#: torch.distributed.pipelining's class that runs the same order (lesson 12), from the specs
TORCH_CLASSES: dict[str, str] = {s.name: s.torch_class for s in SPECS if s.torch_class}
NAMES: tuple[str, ...] = tuple(REGISTRY)

def _torch_names(s: ScheduleSpec) -> tuple[str, ...]:
    """torch's class name and the short name its ``get_schedule_class`` takes, lower case:
    ``Interleaved1F1B``, ``ZBVZeroBubble``, ``DualPipeV``, ``ScheduleGPipe`` … all work."""
    if not s.torch_class:
        return ()
    return (s.torch_class.lower(), s.torch_class.removeprefix("Schedule").lower())


_ALIASES = {a: s.name for s in SPECS for a in _torch_names(s)}
_ALIASES.update({a: s.name for s in SPECS for a in s.aliases})     # a spec's own words win


def spec(name: str) -> ScheduleSpec:
    """The spec for ``name`` or one of its aliases; ValueError listing the choices."""
    key = name.lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in REGISTRY:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(NAMES)}")
    return REGISTRY[key]


def default_V(name: str) -> int:
    """The V a schedule is normally run with (what a V slider jumps to on a switch)."""
    return spec(name).default_V


def names(*, stages_per_rank: str | None = None, split_backward: bool | None = None,
          with_excess: bool | None = None) -> tuple[str, ...]:
    """Schedule names filtered by their facts, in the registry's teaching order."""
    return tuple(s.name for s in SPECS
                 if (stages_per_rank is None or s.stages_per_rank == stages_per_rank)
                 and (split_backward is None or s.split_backward == split_backward)
                 and (with_excess is None or (s.excess is not None) == with_excess))


def make_schedule(name: str, P: int, M: int, V: int | None = None) -> Schedule:
    """Build the named schedule; raises ValueError naming the rule broken and a valid value."""
    s = spec(name)
    with gc_paused():
        return s.generator(P, M, s.default_V if V is None else V)


def excess_closed_form(name: str, P: int, M: int, tf=1.0, tb=2.0, tw=0.0, tfb=None,
                       V: int | None = None):
    """The literature's bubble for ``name`` as time per rank and the condition under which
    the simulator reproduces it exactly. Returns ``(value or None, note)``."""
    s = spec(name)
    if s.excess is None:
        return None, s.excess_note
    V = s.default_V if V is None else V
    return s.excess(P, M, V, tf, tb, tw, tfb), s.excess_note


__all__ = ["ScheduleSpec", "Extrapolation", "SPECS", "REGISTRY", "TORCH_CLASSES",
           "NAMES", "spec", "default_V", "names", "make_schedule", "excess_closed_form"]
