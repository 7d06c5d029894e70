"""When each rank posts each point-to-point message, so that an in-order transport cannot hang.

Why this exists: NCCL ignores tags. Between two ranks, PyTorch puts every single send and
receive on one CUDA stream, and they run in the order they were posted. A receive waits at the
head of that stream until its data comes, and a large send waits until the peer's receive
runs. So the simple recipe that works on gloo — post every receive of the step up front, send
when an op ends — deadlocks on GPUs at once. With P = 2, rank 0's stream starts with "receive
gradient 0" and rank 1's with "receive activation 0". Each of those is waiting for a send that
is queued behind it on the other side.

The fix is one global order of messages that every rank follows. Run the schedule once
through the simulator, with every op lasting 1. A message is keyed by the time its producing op
ends, with ties broken the same way on every rank. Before its op k, a rank posts, in key order,
every message of its own whose key is ≤ the start of op k. By then the data of each send is
made, and each receive that op k needs is posted. Why nothing can hang: suppose some message
never completes, and take the one with the smallest key. A rank only ever waits for messages it
has posted, and before waiting on one it has posted everything with a smaller key. So both
ranks of our message post it. Everything ahead of it on their streams has a smaller key, so it
completed. So our message completes too, which contradicts the assumption.
``check_in_order`` runs that argument as a simulation, in its strictest form: one queue per
rank, and every message waits for its partner.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import Action, Schedule
from .simulate import DeadlockError, execute


@dataclass(frozen=True, order=True)
class Message:
    """One tensor crossing ranks: the activation into ``stage`` or the gradient for it."""
    kind: str          # "act" (into stage, from stage-1) | "grad" (into stage, from stage+1)
    stage: int         # the receiving stage
    microbatch: int    # the microbatch index within its copy, as in the schedule's actions
    src: int
    dst: int

    def __str__(self) -> str:
        what = "activation" if self.kind == "act" else "gradient"
        return (f"{what} of microbatch {self.microbatch} for stage {self.stage} "
                f"(rank {self.src} → rank {self.dst})")


def messages(schedule: Schedule) -> list[tuple[Message, tuple[int, int], tuple[int, int]]]:
    """Every cross-rank message with its producer's and consumer's (rank, step)."""
    owner = schedule.owners()
    out = []
    for r, k, op in schedule.actions():
        for a in op.parts:
            st, mb = a.stage, a.microbatch
            if a.kind == "F" and not schedule.is_first(st):
                prod, kind = Action(st - 1, "F", mb), "act"
            elif a.kind in ("B", "I") and not schedule.is_last(st):
                prod = next((Action(st + 1, x, mb) for x in ("B", "I")
                             if Action(st + 1, x, mb) in owner), None)
                kind = "grad"
            else:
                continue
            if prod is None or prod not in owner:
                raise ValueError(f"{a} needs stage {st + 1}'s backward of microbatch {mb}, "
                                 "which no rank runs")
            src = owner[prod]
            if src[0] != r:
                out.append((Message(kind, st, mb, src[0], r), src, (r, k)))
    return out


def p2p_messages(schedule: Schedule) -> int:
    """Point-to-point messages one step of ``schedule`` sends (activations forward,
    gradients backward; W sends nothing)."""
    return len(messages(schedule))


def in_order_plan(schedule: Schedule) -> list[list[list[Message]]]:
    """``plan[r][k]``: the messages rank r posts, in this order, just before its op k;
    ``plan[r][len(ops)]``: those it posts after its last op (sends only)."""
    events = execute(schedule, lambda op: 1.0)     # unit durations: exact, same on every rank
    starts: list[list[float]] = [[] for _ in range(schedule.P)]
    for e in sorted(events, key=lambda e: e.start):
        starts[e.rank].append(e.start)               # a rank's ops run in list order
    end = {}
    for r in range(schedule.P):
        for k, t in enumerate(starts[r]):
            end[(r, k)] = t + 1.0
    mine: list[list[tuple[float, Message]]] = [[] for _ in range(schedule.P)]
    for t, m in sorted((end[prod], m) for m, prod, _ in messages(schedule)):
        mine[m.src].append((t, m))
        mine[m.dst].append((t, m))
    plan = [[[] for _ in range(len(schedule.ranks[r]) + 1)] for r in range(schedule.P)]
    for r in range(schedule.P):
        k = 0
        for t, m in mine[r]:
            while k < len(starts[r]) and starts[r][k] < t:   # before the first op starting ≥ t
                k += 1
            plan[r][k].append(m)
    return plan


def up_front_plan(schedule: Schedule) -> list[list[list[Message]]]:
    """The gloo recipe: every receive before op 0, every send right after its op. Fine with
    tag matching and buffered sends; on an in-order transport it deadlocks."""
    plan = [[[] for _ in range(len(schedule.ranks[r]) + 1)] for r in range(schedule.P)]
    for m, (pr, pk), (cr, _) in sorted(messages(schedule), key=lambda x: (x[1], x[0])):
        plan[pr][pk + 1].append(m)
    for m, _, (cr, _) in sorted(messages(schedule), key=lambda x: (x[0].src, x[1], x[0])):
        plan[cr][0].append(m)
    return plan


def check_in_order(schedule: Schedule, plan: list[list[list[Message]]]) -> None:
    """Play ``plan`` on the strictest in-order transport: each rank has one queue, posts its
    messages in plan order, and a message completes only when both ranks have it at the head of
    their queue. Ops never wait for anything but their own receives. Raises DeadlockError
    naming what each stuck rank waits for, or ValueError if an op would run before one of its
    receives is posted or a send before its data is made."""
    msgs = messages(schedule)
    needs = {}
    made_by = {}
    for m, prod, cons in msgs:
        needs.setdefault(cons, set()).add(m)
        made_by[m] = prod
    seq = []
    for r in range(schedule.P):
        items = []
        for k, batch in enumerate(plan[r]):
            items += [("msg", m) for m in batch]
            if k < len(schedule.ranks[r]):
                items.append(("op", k))
        seq.append(items)
    pos = [0] * schedule.P
    done_ops: set[tuple[int, int]] = set()
    done_msgs: set[Message] = set()
    moved = True
    while moved:
        moved = False
        for r in range(schedule.P):
            while pos[r] < len(seq[r]):
                kind, x = seq[r][pos[r]]
                if kind == "op":
                    missing = needs.get((r, x), set()) - done_msgs
                    if missing:   # a message behind us in the queue has completed
                        raise ValueError(f"rank {r} step {x}: the plan runs "
                                         f"{schedule.ranks[r][x]} before posting the "
                                         f"{min(missing)}")
                    done_ops.add((r, x))
                    pos[r] += 1
                    moved = True
                    continue
                m = x
                if m.src == r and made_by[m] not in done_ops:
                    raise ValueError(f"rank {r}: the plan sends the {m} before "
                                     f"{schedule.ranks[r][made_by[m][1]]} makes it")
                if m in done_msgs:        # the partner completed it with us
                    pos[r] += 1
                    moved = True
                    continue
                peer = m.dst if m.src == r else m.src
                if pos[peer] < len(seq[peer]) and seq[peer][pos[peer]] == ("msg", m):
                    done_msgs.add(m)
                    pos[r] += 1
                    moved = True
                    continue
                break
    stuck = [r for r in range(schedule.P) if pos[r] < len(seq[r])]
    if stuck:
        raise DeadlockError("in-order transport deadlock: " + "; ".join(
            f"rank {r} waits on the {seq[r][pos[r]][1]}" for r in stuck))
