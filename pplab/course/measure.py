"""Small measurements the questions and lessons share, all read off pplab's own simulator
and schedules (pure Python, so answers can be computed in the browser too)."""
from __future__ import annotations

from ..registry import make_schedule
from ..sim import Costs, simulate


def timeline(name: str, P: int, M: int, V: int | None = None, **costs):
    return simulate(make_schedule(name, P, M, V), Costs(**costs) if costs else None)


def bubble_pct(name: str, P: int, M: int, V: int | None = None, ideal: bool = False,
               **costs) -> float:
    """The simulated bubble in percent, ÷ total rank-time or (``ideal``) ÷ ideal busy time."""
    tl = timeline(name, P, M, V, **costs)
    return 100 * (tl.bubble_ratio if ideal else tl.bubble_fraction)


def idle_per_rank(name: str, P: int, M: int, tf=1.0, tb=2.0, tw=0.0, tfb=None) -> float:
    """Absolute idle time per rank, DeepSeek-V3's way: makespan − the idlest rank's busy time
    (M·(tf + tb) unless overlapped pairs cost less than tf + tb)."""
    from ..sim.overlap import worst_idle
    kw = dict(tf=tf, tb=tb, tw=tw)
    if tfb is not None:
        kw["tfb"] = tfb
    return worst_idle(timeline(name, P, M, **kw))


def warmup_forwards(schedule) -> list[int]:
    """Per rank: how many forwards it runs before its first backward (B or I)."""
    out = []
    for ops in schedule.ranks:
        kinds = [a.kind for op in ops for a in op.parts]
        first_b = next((i for i, k in enumerate(kinds) if k in "BI"), len(kinds))
        out.append(sum(k == "F" for k in kinds[:first_b]))
    return out


def steady_pairs(schedule) -> list[int]:
    """Per rank: forwards followed at once by a backward — 1F1B's steady-state pairs, as
    Megatron counts them (M minus the warm-up forwards)."""
    out = []
    for ops in schedule.ranks:
        kinds = [a.kind for op in ops for a in op.parts]
        out.append(sum(1 for a, b in zip(kinds, kinds[1:]) if a == "F" and b in "BI"))
    return out


def smallest_M(P: int, target: float, ideal: bool = False, name: str = "gpipe") -> int:
    """The smallest M whose simulated bubble is below ``target`` (a fraction)."""
    M = 1
    while bubble_pct(name, P, M, ideal=ideal) / 100 >= target:
        M += 1
    return M


def idle_split(tl) -> list[tuple[float, float, float]]:
    """Per rank: idle before its first op, between its first and last op, and after its last
    op (the three add up to makespan − the rank's busy time)."""
    out = []
    for r in range(tl.num_ranks):
        evs = tl.rank_events(r)
        first, last = min(e.start for e in evs), max(e.end for e in evs)
        head, tail = first - tl.start, tl.start + tl.makespan - last
        out.append((head, (last - first) - tl.busy[r], tail))
    return out


def fit_fixed_cost(P: int, points: dict[int, float]) -> tuple[float, float]:
    """Fit 1F1B's step time to two measured (M, step time) points with a batch of work ``W``
    per rank split evenly over M microbatches (backward = 2 × forward) and a fixed cost ``c``
    on every forward and backward: step(M) = (M + P − 1)·(W/M + 2c). Returns ``(W, c)``."""
    (m1, t1), (m2, t2) = sorted(points.items())[:2]
    a1, a2 = t1 / (m1 + P - 1), t2 / (m2 + P - 1)          # = W/M + 2c at each point
    W = (a1 - a2) / (1 / m1 - 1 / m2)
    return W, (a1 - W / m1) / 2


def fixed_cost_step(P: int, M: int, W: float, c: float) -> float:
    """The simulated 1F1B step for ``fit_fixed_cost``'s model."""
    return timeline("1f1b", P, M, tf=W / 3 / M, tb=2 * W / 3 / M, fixed=c).makespan


#: GPipe (Huang et al. 2019), Table 2: training throughput on TPUs at K partitions and M
#: microbatches, normalised to K = 2, M = 1 (batch sizes adjusted to fit memory, per its caption)
GPIPE_TABLE2 = {
    "AmoebaNet-D (18, 256)": {(2, 1): 1.0, (4, 1): 1.13, (8, 1): 1.38, (2, 4): 1.07,
                              (4, 4): 1.26, (8, 4): 1.72, (2, 32): 1.21, (4, 32): 1.84,
                              (8, 32): 3.48},
    "Transformer-48": {(2, 1): 1.0, (4, 1): 1.07, (8, 1): 1.3, (2, 4): 1.7, (4, 4): 3.2,
                       (8, 4): 4.8, (2, 32): 1.8, (4, 32): 3.4, (8, 32): 6.3},
}


def bubble_speedup(K: int, M: int) -> float:
    """GPipe's throughput at K ranks and M microbatches relative to K = 2, M = 1 if the bubble
    were all that changed: ranks' worth of useful work, K·(1 − bubble ÷ total), the work per
    step and the speed of every microbatch held fixed."""
    def busy(P, m):
        return P * (1 - timeline("gpipe", P, m).bubble_fraction)
    return busy(K, M) / busy(2, 1)


def gpipe_table2() -> str:
    """GPipe's Table 2 beside the bubble model, cell by cell, as text."""
    names = list(GPIPE_TABLE2)
    lines = [f" M  K   bubble alone   {names[0]}   {names[1]}"]
    for M in (1, 4, 32):
        for K in (2, 4, 8):
            model = bubble_speedup(K, M)
            assert abs(model - K * M / (M + K - 1)) < 1e-12     # K = 2, M = 1 gives 1
            lines.append(f"{M:2d}  {K}   {model:12.2f}   " + "   ".join(
                f"{GPIPE_TABLE2[n][K, M]:{len(n)}.2f}" for n in names))
    return "\n".join(lines)


def v_block(name: str, P: int):
    """One microbatch of a V schedule's building block (``v-min``, ``v-half``, ``v-zb``) as a
    timeline of unit slots: its F and I passes where the block starts them, so the V's legs
    and the waits that set each chunk's lifespan can be drawn (W fills free slots later)."""
    from ..ir import Action
    from ..schedules.controllable import block_times
    from ..timeline import Event, Timeline
    f, i = block_times(name, P)
    events = [Event(s if s < P else 2 * P - 1 - s, Action(s, kind, 0), t[s], t[s] + 1)
              for s in range(2 * P) for kind, t in (("F", f), ("I", i))]
    return Timeline.of_events(P, sorted(events, key=lambda e: (e.start, e.rank)))


def lm_head_layers(hidden: int, ffn: int, vocab: int) -> float:
    """The LM head's forward FLOPs per token in transformer layers (big matmuls only: the
    attention projections 4h² and a SwiGLU MLP 3·h·ffn per layer, h·vocab for the head)."""
    return 2 * hidden * vocab / (2 * (4 * hidden ** 2 + 3 * hidden * ffn))
