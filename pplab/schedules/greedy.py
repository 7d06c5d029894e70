"""A list scheduler for split-backward pipelines under a cap on in-flight activations.

Zero Bubble's heuristic (Qi et al. 2024, §3.1) in a general form: any placement (one stage
per rank, looped, V shape), per-kind and per-stage costs, a per-rank cap. Every rank takes
whichever op it can start soonest; at equal times it prefers the kinds in ``prefer`` order.
``pplab.search`` is built on it (V-Min, V-Half and V-ZB repeat a building block).

Memory is counted as the simulator counts it: one unit per (stage, microbatch) whose forward
ran and whose W has not. So that no rank ever fills up with half-finished microbatches, a
microbatch's first forward on a rank *reserves* a unit for each of its later stages there:
a new microbatch starts on rank r only if ``alive + reserved + stages on r ≤ cap``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

from ..ir import Action, Op
from ..inflight import INFLIGHT_RULE


@dataclass(frozen=True)
class Problem:
    """What the scheduler needs: ranks, microbatches, placement, durations, comm, cap."""
    P: int
    M: int
    placement: tuple[int, ...]
    duration: Callable[[str, int], float]      # (kind, stage) -> time
    comm: float = 0.0
    cap: int | None = None

    @property
    def S(self) -> int:
        return len(self.placement)


def min_cap(placement: Sequence[int], P: int) -> int:
    """The smallest cap under which one microbatch can pass: the most stages on one rank."""
    return max(sum(1 for r in placement if r == q) for q in range(P))


class _State:
    """Book-keeping while the list schedule is built."""

    def __init__(self, pb: Problem):
        self.pb = pb
        self.stages = [[s for s, r in enumerate(pb.placement) if r == q] for q in range(pb.P)]
        self.next = {k: [0] * pb.S for k in "FI"}
        self.end: dict[tuple[str, int, int], float] = {}
        self.free = [0.0] * pb.P
        self.alive = [0] * pb.P
        self.reserved = [0] * pb.P
        self.pending_w: list[deque] = [deque() for _ in range(pb.P)]
        self.ops: list[list[Op]] = [[] for _ in range(pb.P)]

    def ready_at(self, kind: str, s: int, mb: int, r: int) -> float | None:
        """When (kind, s, mb) could start on rank r, or None while an input is missing."""
        pb, t = self.pb, self.free[r]
        deps = []
        if kind == "F" and s > 0:
            deps.append(("F", s - 1, mb))
        if kind == "I":
            deps.append(("F", s, mb))
            if s < pb.S - 1:
                deps.append(("I", s + 1, mb))
        for d in deps:
            if d not in self.end:
                return None
            hop = pb.comm if pb.placement[d[1]] != r else 0.0
            t = max(t, self.end[d] + hop)
        return t

    def fits(self, s: int, r: int) -> bool:
        """A forward on stage s fits rank r's cap (only a microbatch's first stage checks)."""
        cap = self.pb.cap
        if cap is None or s != self.stages[r][0]:
            return True
        return self.alive[r] + self.reserved[r] + len(self.stages[r]) <= cap

    def options(self, r: int, prefer: str):
        """(start, preference, kind, stage, mb) for each op rank r could run next."""
        out = []
        for s in self.stages[r]:
            for kind in "IF":
                mb = self.next[kind][s]
                if mb >= self.pb.M or (kind == "F" and not self.fits(s, r)):
                    continue
                t = self.ready_at(kind, s, mb, r)
                if t is not None:
                    out.append((t, prefer.index(kind), -s if kind == "F" else s, kind, mb))
        if self.pending_w[r]:
            s, mb = self.pending_w[r][0]
            out.append((self.free[r], prefer.index("W"), 0, "W", mb, s))
        return out

    def run(self, r: int, choice) -> None:
        t, _, key, kind, mb = choice[:5]
        s = choice[5] if kind == "W" else (-key if kind == "F" else key)
        end = t + self.pb.duration(kind, s)
        self.end[(kind, s, mb)] = end
        self.free[r] = end
        self.ops[r].append(Action(s, kind, mb))
        self.alive[r] += sum(INFLIGHT_RULE[kind])          # the in-flight rule's count
        if kind == "F":
            self.next["F"][s] += 1
            first = s == self.stages[r][0]
            self.reserved[r] += len(self.stages[r]) - 1 if first else -1
        elif kind == "I":
            self.next["I"][s] += 1
            self.pending_w[r].append((s, mb))
        else:
            self.pending_w[r].popleft()


def list_schedule(pb: Problem, prefer: str = "IFW") -> list[list[Op]]:
    """Per-rank op lists (F, I, W for every stage and microbatch) built greedily.

    ``prefer`` orders the kinds at equal start times: "IFW" is Zero Bubble's (input grads
    first, they unblock the previous rank), "FIW" fills the pipeline faster.
    Raises ValueError when the cap is below one microbatch's footprint.
    """
    need = min_cap(pb.placement, pb.P)
    if pb.cap is not None and pb.cap < need:
        raise ValueError(f"a cap of {pb.cap} in-flight activations per rank cannot hold one "
                         f"microbatch on this placement; use at least {need}")
    st = _State(pb)
    owners = {s: r for s, r in enumerate(pb.placement)}
    best = [min(st.options(r, prefer), default=None) for r in range(pb.P)]
    for _ in range(3 * pb.S * pb.M):
        live = [(c[0], c[1], r) for r, c in enumerate(best) if c is not None]
        if not live:
            raise ValueError("the list scheduler got stuck; raise the cap")
        r = min(live)[2]
        choice = best[r]
        st.run(r, choice)
        s = st.ops[r][-1].stage
        touched = {r} | {owners[x] for x in (s - 1, s + 1) if 0 <= x < pb.S}
        for q in touched:
            best[q] = min(st.options(q, prefer), default=None)
    return st.ops
