"""Fit the simulator's ``Costs`` to measured timelines (``pplab calibrate``).

Pure Python (no numpy): it runs wherever the simulator does. The real runs that produce the
timelines live in ``pplab/runtime/calibration.py``.

Three kinds of observation, each read straight off a measured ``Timeline``:

* **op durations** (event end − start, which the worker records after the op's input has
  arrived, so they are work, not waiting). Each one is a linear equation in the unknowns
  ``tf, tb, tw, fixed, msg``: e.g. an I op of a half-size V chunk with one neighbour on
  another rank lasts ``(tb − tw)·½ + fixed + msg``.
  Ordinary least squares over all of them gives the four numbers; ``fixed`` is separable
  only when runs with different chunk sizes (1F1B's whole stages, interleaved or V-shape
  halves) are in the data, otherwise it is left at 0 and absorbed into the per-kind times.
* **dispatch gaps**: the time between two ops of a rank when the second one's input was
  already there (posting sends and receives, Python's loop). The simulator has no such gap,
  so its median is added to ``fixed`` — every op then ends as late as it really does.
* **message latencies**: for an op that had to wait for another rank, its start minus the
  producer's end. The median, less the dispatch gap already counted in ``fixed``, is
  ``comm``. Medians, not means, because a descheduled process (other jobs on the cores)
  makes these two heavy-tailed.

Then the **makespans** of the calibration runs: what the ops cannot show (a process
descheduled between ops, gloo's work on each message between the ops) is one more per-op and
one more per-message cost, chosen so the runs' makespans come out right
(``fit_makespan_terms``).

With ``cores`` (the ranks shared that many CPU cores, ``pplab.sim.contention``) an op's measured
length is first turned into its length alone on a core: while ``k`` ops ran at once (read
off the same timeline) it progressed at ``min(1, cores / k)``, so its work is that rate
integrated over the op. The fit then recovers the costs the contention executor was given.
Real processes taking turns on cores lose a little to it, so ``fit_costs_and_cores`` also
finds the cores they effectively shared.
"""
from __future__ import annotations

import bisect
import json
import statistics
from dataclasses import dataclass, field, replace

from ..timeline import Timeline
from .costs import Costs, messages_per_op, op_messages
from .entry import simulate

#: the columns of the least-squares design matrix: one unknown each
UNKNOWNS = ("tf", "tb", "tw", "fixed", "msg")
#: per kind: the coefficients of (tf, tb, tw) in its duration, before the chunk fraction
KIND_ROWS = {"F": (1, 0, 0), "B": (0, 1, 0), "I": (0, 1, -1), "W": (0, 0, 1), "FB": (1, 1, 0)}


@dataclass
class Observations:
    """What the fit uses, gathered from one or more measured timelines."""
    rows: list[tuple[tuple[float, ...], float]] = field(default_factory=list)  # (coefs, s)
    gaps: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    makespans: list[tuple[object, float]] = field(default_factory=list)  # (schedule, s)
    fractions: set[float] = field(default_factory=set)    # chunk sizes seen (fixed needs 2)
    cores: float | None = None                    # the ranks shared this many cores


def chunk_fraction(schedule, op) -> float:
    """The share of a rank's layers one op runs, as ``Costs.duration_fn`` scales it."""
    return schedule.chunk_fraction(op.parts[-1].stage if op.kind == "FB" else op.stage)


def _op_row(schedule, op, messages: list[int]) -> tuple[float, ...]:
    """Coefficients of (tf, tb, tw, fixed, msg) in one op's duration (``messages``: per
    stage, ``simulate.messages_per_op``)."""
    return (tuple(c * chunk_fraction(schedule, op) for c in KIND_ROWS[op.kind])
            + (1.0, float(op_messages(op, messages))))


class SharedCores:
    """How fast one more op would have run at each moment of a timeline whose ranks shared
    ``cores`` cores: ``work(start, end)`` is ``min(1, cores / k)`` integrated over the
    interval, ``k`` the ops running then (counting one more with ``extra=1``)."""

    def __init__(self, timeline: Timeline, cores: float):
        self.cores = cores
        self.times = sorted({x for e in timeline.events for x in (e.start, e.end)})
        delta = [0] * (len(self.times) + 1)
        for e in timeline.events:
            delta[bisect.bisect_left(self.times, e.start)] += 1
            delta[bisect.bisect_left(self.times, e.end)] -= 1
        self.running, k = [], 0                    # ops running in [times[i], times[i+1])
        for d in delta[:-1]:
            k += d
            self.running.append(k)

    def work(self, start: float, end: float, extra: int = 0) -> float:
        i = max(0, bisect.bisect_right(self.times, start) - 1)
        total = 0.0
        while i < len(self.times) - 1 and self.times[i] < end:
            lo, hi = max(start, self.times[i]), min(end, self.times[i + 1])
            k = self.running[i] + extra
            if hi > lo:
                total += (hi - lo) * (min(1.0, self.cores / k) if k else 1.0)
            i += 1
        return total + max(0.0, end - max(start, self.times[-1]))


def observe(timeline: Timeline, into: Observations | None = None,
            cores: float | None = None) -> Observations:
    """Add one measured timeline's op durations, gaps, latencies and makespan to ``into``;
    with ``cores``, durations and gaps as they would be alone on a core (module docstring)."""
    obs = into if into is not None else Observations()
    schedule = timeline.schedule
    if schedule is None:
        raise ValueError("calibration needs timelines that carry their schedule")
    shared = SharedCores(timeline, cores) if cores is not None else None
    messages = messages_per_op(schedule)
    ends = {}                                       # action -> (rank, end)
    for e in timeline.events:
        for a in e.op.parts:
            ends[a] = (e.rank, e.end)
    for rank in range(timeline.num_ranks):
        prev_end = None
        for e in timeline.rank_events(rank):
            obs.rows.append((_op_row(schedule, e.op, messages),
                             shared.work(e.start, e.end) if shared else e.duration))
            obs.fractions.add(chunk_fraction(schedule, e.op))
            remote = [ends[d] for a in e.op.parts for d in _inputs(schedule, a)
                      if d in ends and ends[d][0] != rank]
            ready = max((end for _, end in remote), default=None)
            if prev_end is not None and (ready is None or ready < prev_end):
                obs.gaps.append(shared.work(prev_end, e.start, 1) if shared   # input there
                                else e.start - prev_end)
            elif ready is not None and (prev_end is None or ready >= prev_end):
                obs.latencies.append(e.start - ready)        # this rank waited for a message
            prev_end = e.end
    obs.makespans.append((schedule, timeline.makespan))
    obs.cores = cores
    return obs


def _inputs(schedule, action):
    """The action that made this action's input on a neighbouring stage, if any."""
    src = schedule.input_of(action)
    return [src] if src is not None else []


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Solve a small dense system by Gaussian elimination; None when it is singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                k = m[r][col] / m[col][col]
                m[r] = [x - k * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]


def least_squares(rows, columns: tuple[int, ...]) -> list[float] | None:
    """Weighted least squares ``(coefs, y, weight)`` on the chosen columns (normal equations;
    5 unknowns at most). Unknowns no row mentions are 0; None when still singular."""
    used = [c for c in columns if any(abs(coefs[c]) > 0 for coefs, _, _ in rows)]
    ata = [[sum(w * r[i] * r[j] for r, _, w in rows) for j in used] for i in used]
    atb = [sum(w * r[i] * y for r, y, w in rows) for i in used]
    x = _solve(ata, atb) if used else []
    if x is None:
        return None
    out = [0.0] * len(UNKNOWNS)
    for c, v in zip(used, x):
        out[c] = v
    return out


def median_rows(rows) -> list[tuple[tuple[float, ...], float, int]]:
    """One row per distinct equation (op kind × chunk size): the median duration, weighted
    by how many ops it stands for. On a shared machine a few ops are descheduled for 10×
    their time; the median keeps them from dragging the least-squares fit."""
    groups: dict[tuple, list[float]] = {}
    for coefs, y in rows:
        groups.setdefault(coefs, []).append(y)
    return [(c, statistics.median(ys), len(ys)) for c, ys in groups.items()]


def fit_op_times(obs: Observations) -> dict[str, float]:
    """``tf, tb, tw, fixed, msg`` from the op durations. ``fixed`` only when it is separable
    (at least two chunk sizes) and ``msg`` only when ops with different message counts are
    in the data, each kept only if it comes out ≥ 0; otherwise refit without it. (On real
    gloo runs the message work falls between the ops, so ``msg`` mostly comes from the
    makespans: ``fit_makespan_terms``.)"""
    if not obs.rows:
        raise ValueError("no measured ops to calibrate from")
    rows = median_rows(obs.rows)
    x = None
    tries = [(0, 1, 2, 3, 4), (0, 1, 2, 3)] if len(obs.fractions) > 1 else []
    for columns in tries + [(0, 1, 2)]:
        x = least_squares(rows, columns)
        if x is not None and min(x[3:]) >= 0:
            break
        x = None
    if x is None:
        raise ValueError("the measured ops do not determine tf, tb and tw")
    tf, tb, tw, fixed, msg = (max(0.0, v) for v in x)
    return {"tf": tf, "tb": max(tb, tw), "tw": tw, "fixed": fixed, "msg": msg}


def relative_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def _golden(loss, lo: float, hi: float, iterations: int) -> float:
    """The minimiser of a unimodal ``loss`` on [lo, hi], by golden-section search (no
    derivative, no numpy)."""
    ratio = (5 ** 0.5 - 1) / 2
    a, b = lo + (1 - ratio) * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(iterations):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = lo + (1 - ratio) * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = loss(b)
    return (lo + hi) / 2


def messages_per_op_of_run(schedule) -> float:
    """Cross-rank messages per op, over a whole schedule (1F1B at P = 2: 1; interleaved: 1.5)."""
    messages = messages_per_op(schedule)
    ops = [op for row in schedule.ranks for op in row]
    return sum(op_messages(op, messages) for op in ops) / len(ops)


def makespan_loss(costs: Costs, makespans, cores: float | None) -> float:
    """Squared relative makespan errors of ``costs`` on measured ``(schedule, makespan)``."""
    return sum(relative_error(simulate(s, costs, cores=cores).makespan, m) ** 2
               for s, m in makespans)


def fit_makespan_terms(costs: Costs, makespans, iterations: int = 50, rounds: int = 3,
                       cores: float | None = None) -> Costs:
    """The makespan part of the fit: what the op durations cannot see, chosen to minimise
    the squared relative makespan errors of the calibration runs. Two terms: one more per-op
    overhead, added to ``fixed`` (a process descheduled between ops, the dispatch loop), and
    one more per-message cost, added to ``msg`` (gloo posts, copies and completes a message
    on the rank's own cores, between its ops). ``msg`` is fitted only when the runs differ in
    messages per op (else it cannot be told from ``fixed``). Each term is found by a golden-
    section search with the other held, a few rounds in turn; each may go down to 0 in all.
    ``cores``: simulate with the ranks sharing that many cores, as the measured runs did."""
    if not makespans:
        return costs

    def loss(c: Costs) -> float:
        return makespan_loss(c, makespans, cores)

    per_op = max(m / max(len(ops) for ops in s.ranks) for s, m in makespans)
    ratios = [messages_per_op_of_run(s) for s, _ in makespans]
    terms = ["fixed"] + (["msg"] if max(ratios) - min(ratios) > 0.05 else [])
    for _ in range(rounds if len(terms) > 1 else 1):
        for term in terms:
            now = getattr(costs, term)
            hi = per_op / (max(ratios) if term == "msg" else 1.0)
            moved = replace(costs, **{term: max(0.0, now + _golden(
                lambda v: loss(replace(costs, **{term: now + v})), -now, hi, iterations))})
            if loss(moved) < loss(costs):          # else keep it: the search is not exact
                costs = moved
    return costs


def fit_costs(timelines, use_makespans: bool = True, cores: float | None = None,
              **search) -> Costs:
    """The calibrated ``Costs`` for a list of measured timelines (see the module docstring);
    ``cores``: the runs' ranks shared that many CPU cores (None: a core each)."""
    obs = Observations()
    for tl in timelines:
        observe(tl, obs, cores)
    times = fit_op_times(obs)
    gap = max(0.0, statistics.median(obs.gaps)) if obs.gaps else 0.0
    latency = statistics.median(obs.latencies) if obs.latencies else 0.0
    costs = Costs(tf=times["tf"], tb=times["tb"], tw=times["tw"], msg=times["msg"],
                  fixed=times["fixed"] + gap, comm=max(0.0, latency - gap))
    return (fit_makespan_terms(costs, obs.makespans, cores=cores, **search) if use_makespans
            else costs)




def shared_share(timeline: Timeline) -> float:
    """The share of a timeline's op time during which at least one other op ran too."""
    shared = SharedCores(timeline, 1.0)
    total = together = 0.0
    for i, k in enumerate(shared.running[:-1]):      # the last entry: after the last end
        span = shared.times[i + 1] - shared.times[i]
        total += k * span
        together += k * span if k >= 2 else 0.0
    return together / total if total else 0.0


def tells_sharing_apart(timelines) -> bool:
    """Whether the runs can tell the cores' sharing from the ops' own cost: one that mostly
    ran one op at a time (naive) beside one that mostly ran several (1F1B)."""
    shares = [shared_share(tl) for tl in timelines]
    return bool(shares) and min(shares) < 0.25 and max(shares) > 0.5


def fit_costs_and_cores(timelines, cores: float, iterations: int = 8) -> tuple[Costs, float]:
    """``fit_costs`` with the cores the ranks *effectively* shared, between half of
    ``cores`` and all of them: on a real machine P > cores processes time-slice with some
    loss (switches, caches, the OS's own work), so they progress as if on fewer cores than
    there are. A golden-section search over that number, each candidate getting a whole
    (quicker) fit, keeps the one whose calibration makespans it predicts best; then one
    full fit there. It can only be told apart when the calibration runs differ in how many
    ranks compute at once (naive: one; 1F1B: all): without such a pair, the given cores."""
    if not tells_sharing_apart(timelines):
        return fit_costs(timelines, cores=cores), cores
    quick = {"iterations": 25, "rounds": 2}

    makespans = [(tl.schedule, tl.makespan) for tl in timelines]

    def loss(c: float) -> float:
        return makespan_loss(fit_costs(timelines, cores=c, **quick), makespans, c)

    found = _golden(loss, cores / 2, cores, iterations)
    best = min((found, cores), key=loss)       # all of them, exactly, when that fits best
    return fit_costs(timelines, cores=best), best


# ---- files ----------------------------------------------------------------------------------
COST_FIELDS = ("tf", "tb", "tw", "tfb", "comm", "fixed", "msg")


def costs_to_dict(costs: Costs) -> dict:
    """The JSON form of a ``Costs`` (seconds), which ``load_costs`` reads back."""
    d = {k: getattr(costs, k) for k in COST_FIELDS}
    return {k: v for k, v in d.items() if v is not None}


def load_cores(path: str) -> float | None:
    """The ``cores`` a ``pplab calibrate --out`` file was fitted with (None: not shared)."""
    with open(path) as f:
        d = json.load(f)
    cores = d.get("cores") if isinstance(d, dict) else None
    if cores is not None and not (isinstance(cores, (int, float)) and cores > 0):
        raise ValueError(f"costs file {path!r}: cores must be a positive number, got {cores!r}")
    return cores


def load_costs(path: str) -> Costs:
    """A ``Costs`` from a JSON file written by ``pplab calibrate --out`` (or by hand: an
    object with any of tf, tb, tw, tfb, comm, fixed, msg; a ``costs`` key inside is read too).
    ValueError in one line for a missing, unreadable or wrong file."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot read costs file {path!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"costs file {path!r} is not JSON: {e.msg} (line {e.lineno})") \
            from None
    if isinstance(d, dict) and isinstance(d.get("costs"), dict):
        d = d["costs"]
    if not isinstance(d, dict):
        raise ValueError(f"costs file {path!r} must hold a JSON object like "
                         '{"tf": 0.002, "tb": 0.004}')
    unknown = sorted(set(d) - set(COST_FIELDS))
    if unknown:
        raise ValueError(f"costs file {path!r} has unknown field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(COST_FIELDS)}")
    try:
        return Costs(**{k: (None if v is None else float(v)) for k, v in d.items()})
    except (TypeError, ValueError) as e:
        raise ValueError(f"costs file {path!r}: {e}") from None
