"""Graders for exercise 04: a balanced partition by dynamic programming, 1F1B's point-to-point
plan per rank, a hand-written 1F1B that runs under torchrun, and a message posting order that
cannot hang an in-order transport (NCCL)."""
from __future__ import annotations

import importlib
from typing import Callable, Sequence

from ..lower import Message, check_in_order, messages
from ..ir import Schedule, parse_op
from ..partition import balanced_split
from ..registry import make_schedule
from .bubble import _call, _fail
from .guard import graded
from .normalise import schedule_rows

#: (layer costs, parts): uniform, heavy embedding / head, one giant layer, parts = layers,
#: a single part, odd sizes, the notebook's own example
PARTITION_CASES = [
    ([1.0] * 8, 4),
    ([3.0, 1, 1, 1, 1, 1, 1, 1, 1, 4.0], 4),
    ([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2.5, 5.0], 4),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], 3),
    ([10, 1, 1, 1, 1, 1], 3),
    ([1, 1, 1, 1, 1, 20], 2),
    ([5, 5, 5], 3),
    ([2.0, 7, 1, 8, 2, 8, 1, 8, 2, 8], 5),
    ([4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6], 4),
    ([1.0] * 7, 1),
    ([0.5, 3, 0.5, 3, 0.5, 3, 0.5], 2),
    ([3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
      1, 1, 1, 5], 8),
]

#: (P, M) cases for the send/recv plan: P=1 sends nothing, M<P, M=P, odd sizes
PLAN_CASES = [(1, 3), (2, 1), (2, 4), (3, 2), (3, 3), (4, 8), (5, 7), (8, 8), (8, 16)]


def _ranges(parts, n: int, k: int, label: str) -> list[tuple[int, int]]:
    """Normalise the student's partition to (start, stop) pairs and check it is a partition."""
    try:
        parts = list(parts)
    except TypeError:
        _fail(f"{label} returned {parts!r}; return a list of ranges, e.g. "
              "[range(0, 3), range(3, 6)]")
    out = []
    for p in parts:
        if isinstance(p, range):
            if p.step != 1:
                _fail(f"{label}: {p} has step {p.step}; stages hold contiguous layers")
            out.append((p.start, p.stop))
        elif isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, int) for x in p):
            out.append((p[0], p[1]))
        else:
            _fail(f"{label}: {p!r} is not a range; return ranges like range(0, 3) "
                  "(or (start, stop) pairs)")
    if len(out) != k:
        _fail(f"{label} returned {len(out)} parts, expected {k} (one per stage)")
    pos = 0
    for a, b in out:
        if a != pos:
            _fail(f"{label}: the parts {out} are not contiguous from 0 — a part starts at {a} "
                  f"where {pos} was expected (each layer must belong to exactly one stage)")
        if b <= a:
            _fail(f"{label}: the part ({a}, {b}) is empty; every stage needs at least one layer")
        pos = b
    if pos != n:
        _fail(f"{label}: the parts end at {pos}, but there are {n} layers")
    return out


@graded
def check_balanced_partition(
        balanced_partition: Callable[[Sequence[float], int], Sequence],
        cases=PARTITION_CASES) -> bool:
    """``balanced_partition(costs, parts)``: contiguous, non-empty parts covering every layer,
    whose most expensive part costs no more than :func:`pplab.partition.balanced_split`'s."""
    for costs, k in cases:
        label = f"balanced_partition({costs}, {k})"
        got = _ranges(_call(balanced_partition, list(costs), k), len(costs), k, label)
        want = balanced_split(costs, k)
        best = max(sum(costs[r.start:r.stop]) for r in want)
        mine = max(sum(costs[a:b]) for a, b in got)
        if mine > best + 1e-9:
            sizes = [b - a for a, b in got]
            _fail(f"{label}: your parts {[(a, b) for a, b in got]} (sizes {sizes}) have a most "
                  f"expensive stage costing {mine:g}, but a split with max stage cost {best:g} "
                  f"exists: {[(r.start, r.stop) for r in want]}. Hint: best[k][j] = the "
                  "smallest possible max-stage cost of putting the first j layers on k stages "
                  "= min over i of max(best[k−1][i], cost of layers i..j−1); a greedy "
                  "'fill each stage up to total/k' misses cases like a heavy last layer.")
    print(f"balanced partition: optimal on {len(cases)} cases ✓")
    return True


def reference_plan(P: int, M: int, r: int) -> list[tuple]:
    """What rank ``r`` of 1F1B receives and sends around each op, in its execution order:
    ``(op, recv, send)`` with ``recv``/``send`` = ``(peer rank, "act" | "grad", microbatch)``
    or ``None``."""
    sched = make_schedule("1f1b", P, M)
    out = []
    for op in sched.rank_texts()[r]:
        action = parse_op(op)
        kind, mb = action.kind, action.microbatch
        if kind == "F":
            recv = (r - 1, "act", mb) if r > 0 else None
            send = (r + 1, "act", mb) if r < P - 1 else None
        else:
            recv = (r + 1, "grad", mb) if r < P - 1 else None
            send = (r - 1, "grad", mb) if r > 0 else None
        out.append((op, recv, send))
    return out


def _norm(x):
    if x is None:
        return None
    try:
        peer, what, mb = x
        return (int(peer), str(what), int(mb))
    except (TypeError, ValueError):
        return ("bad", repr(x))


@graded
def check_send_recv_plan(send_recv_plan: Callable[[int, int, int], Sequence],
                         cases=PLAN_CASES) -> bool:
    """``send_recv_plan(P, M, r)``: for each op of rank r's 1F1B order, ``(op, recv, send)``
    where recv/send is ``(peer, "act"|"grad", microbatch)`` or ``None``."""
    n = 0
    for P, M in cases:
        for r in range(P):
            want = reference_plan(P, M, r)
            label = f"send_recv_plan(P={P}, M={M}, r={r})"
            got = _call(send_recv_plan, P, M, r)
            try:
                got = [(str(op), _norm(rv), _norm(sd)) for op, rv, sd in got]
            except (TypeError, ValueError):
                _fail(f"{label} returned {got!r}; return a list of (op, recv, send) tuples, "
                      "e.g. ('1F0', (0, 'act', 0), (2, 'act', 0))")
            ops_w, ops_g = [w[0] for w in want], [g[0] for g in got]
            if ops_g != ops_w:
                warm = min(P - r - 1, M)
                _fail(f"{label}: the ops are {ops_g}, but 1F1B runs {ops_w} on this rank. Hint: "
                      f"rank r does min(P−r−1, M) = {warm} warm-up forwards, then alternates "
                      "one forward and one backward, then drains the remaining backwards.")
            for i, (w, g) in enumerate(zip(want, got)):
                if w == g:
                    continue
                op = w[0]
                which = "receive" if w[1] != g[1] else "send"
                wv, gv = (w[1], g[1]) if which == "receive" else (w[2], g[2])
                hint = ("a forward receives the activation from rank r−1 and sends its output to "
                        "rank r+1; a backward receives the gradient from rank r+1 and sends the "
                        "input gradient to rank r−1; the first rank receives no activation, the "
                        "last rank receives no gradient (its loss starts the backward)")
                _fail(f"{label}, op {i} ({op}): your {which} is {gv!r}, expected {wv!r}. "
                      f"Hint: {hint}.")
            n += 1
    print(f"1F1B send/recv plan: every op of {n} ranks over {len(cases)} (P, M) cases ✓")
    return True


def steady_state_pairs(P: int, M: int, r: int) -> list[tuple[str, str]]:
    """In 1F1B's steady state each forward's send to rank r+1 is immediately followed by the
    receive of a gradient from the same rank r+1 (Megatron fuses them into one
    ``send_forward_recv_backward``). Returns the (forward, backward) pairs of rank ``r``."""
    plan = reference_plan(P, M, r)
    out = []
    for (op, _, send), (nxt, recv, _) in zip(plan, plan[1:]):
        if "F" in op and "B" in nxt and send is not None and recv is not None \
                and send[0] == recv[0]:
            out.append((op, nxt))
    return out


@graded
def check_hand_written_1f1b(rows, P: int = 2, M: int = 4) -> Schedule:
    """The student's text is a valid schedule whose rank lists are exactly 1F1B's for
    (P, M). Returns the Schedule (ready for ``run_schedule``)."""
    from ..validate import ScheduleError, validate
    if rows is None or rows is Ellipsis:
        _fail("write your schedule first: one line of actions per rank")
    text = "\n".join(str(r) for r in schedule_rows(rows))
    try:
        sched = Schedule.from_text(text, num_microbatches=M, name="yours")
        validate(sched)
    except (ScheduleError, ValueError) as e:
        _fail(f"your schedule does not validate: {e}")
    if sched.P != P:
        _fail(f"expected {P} rank lines, got {sched.P}")
    want = make_schedule("1f1b", P, M).rank_texts()
    got = sched.rank_texts()
    for r in range(P):
        if got[r] != want[r]:
            _fail(f"rank {r} runs {' '.join(got[r])}, but 1F1B runs {' '.join(want[r])}. "
                  f"Hint: rank r does min(P−r−1, M) warm-up forwards, then F/B pairs.")
    print(f"hand-written 1F1B for P={P}, M={M}: valid and identical to the generator ✓")
    return sched


def check_real_run(result, tolerance: float = 1e-5) -> bool:
    """A real run's gradients match the single-process reference."""
    err = getattr(result, "grad_max_rel_error", None)
    if err is None:
        _fail("the run did not compare gradients with the reference (pass check=True)")
    if not err < tolerance:
        _fail(f"max relative gradient error {err:.3g} ≥ {tolerance:g} (worst parameter "
              f"{result.worst_parameter!r}): the pipeline did not compute the same gradients "
              "as one process — is every microbatch's backward in the schedule?")
    print(f"real run: max relative gradient error {err:.2e} < {tolerance:g} ✓")
    return True


#: (schedule, P, M, V) for the posting-order task: one- and two-direction traffic, V-shapes,
#: a rank that talks to two neighbours, DualPipe's two copies
POSTING_CASES = [("1f1b", 2, 4, None), ("gpipe", 3, 6, None), ("1f1b", 4, 8, None),
                 ("interleaved", 2, 4, 2), ("zb-h1", 4, 8, None), ("zbv", 2, 4, None),
                 ("dualpipev", 4, 8, None), ("dualpipe", 4, 8, None), ("1f1b", 1, 3, None)]

_POSTING_HINT = ("Hint: give every message one key that all ranks agree on — the end time of "
                 "the op that makes it, with every op lasting 1 "
                 "(pplab.sim.execute(sched, lambda op: 1.0)), ties broken by the Message "
                 "itself — and before each op k, post (in key order) every message of the rank "
                 "whose key is ≤ the start of op k.")


def _students_copy(sched: Schedule):
    """The schedule as the student's own pplab builds it: a private grading copy's objects
    never compare equal to the student's, so the student's library calls would fail."""
    public = importlib.import_module("pplab.ir").Schedule
    if isinstance(sched, public):
        return sched
    return public.from_text(sched.rank_texts(), stage_to_rank=list(sched.stage_to_rank),
                            num_microbatches=sched.M, name=sched.name, virtual=sched.V,
                            copies=sched.copies)


def _as_message(m, label: str) -> Message:
    """The student's Message, rebuilt as this grader's own (a private copy may grade it)."""
    try:
        return Message(*(getattr(m, f) for f in ("kind", "stage", "microbatch", "src", "dst")))
    except AttributeError:
        _fail(f"{label}: {m!r} is not a Message; use the Messages from "
              "pplab.lower.messages(sched)")


@graded
def check_in_order_plan(posting_plan: Callable[[Schedule], Sequence],
                        cases=POSTING_CASES) -> bool:
    """``posting_plan(sched)``: for every rank r, a list of ``len(sched.ranks[r]) + 1`` lists of
    Messages — what r posts before each op, and after its last. Accepted when each message is
    posted once by its sender and once by its receiver and the plan completes on the strictest
    in-order transport (:func:`pplab.lower.check_in_order`)."""
    from ..sim import DeadlockError
    for name, P, M, V in cases:
        sched = make_schedule(name, P, M, V)
        label = f"posting_plan({name} P={P} M={M}" + (f" V={V})" if V else ")")
        plan = _call(posting_plan, _students_copy(sched))
        try:
            plan = [[list(batch) for batch in row] for row in plan]
        except TypeError:
            _fail(f"{label} returned {plan!r}; return one list per rank, each holding "
                  "len(sched.ranks[r]) + 1 lists of Messages")
        if len(plan) != P:
            _fail(f"{label} has {len(plan)} rows; one per rank ({P}) is needed")
        for r in range(P):
            if len(plan[r]) != len(sched.ranks[r]) + 1:
                _fail(f"{label}: rank {r} has {len(plan[r])} batches; it runs "
                      f"{len(sched.ranks[r])} ops, so it needs {len(sched.ranks[r]) + 1} "
                      "(one before each op, one after the last)")
            plan[r] = [[_as_message(m, label) for m in batch] for batch in plan[r]]
            posted = [m for batch in plan[r] for m in batch]
            want = {m for m, _, _ in messages(sched) if r in (m.src, m.dst)}
            if len(posted) > 2 * len(want):             # the comparisons below stay small
                _fail(f"{label}: rank {r} posts {len(posted)} messages, but it has only "
                      f"{len(want)} to post, each exactly once")
            if sorted(posted) != sorted(want):
                extra = [str(m) for m in posted if m not in want or posted.count(m) > 1]
                missing = [str(m) for m in want if m not in posted]
                _fail(f"{label}: rank {r} must post each of its messages exactly once; "
                      f"missing {missing[:2]}, extra or repeated {extra[:2]}")
        try:
            check_in_order(sched, plan)
        except DeadlockError as e:
            _fail(f"{label}: on an in-order transport like NCCL this plan hangs — {e}. "
                  + _POSTING_HINT)
        except ValueError as e:
            _fail(f"{label}: {e}. " + _POSTING_HINT)
    print(f"posting order: completes on an in-order transport for all {len(cases)} "
          "schedules ✓")
    return True
