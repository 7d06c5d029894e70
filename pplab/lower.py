"""Lowering: a schedule's compute lists → per-rank lists of compute *and* communication items,
in the order a rank issues them. The worker executes exactly this list; nothing else decides
when a message is posted.

Two lowerings, one per kind of transport:

* ``"up-front"`` (gloo): every receive of the step first, each send right after the op that
  makes it. Fine where messages match by tag and sends are buffered.
* ``"in-order"`` (NCCL): NCCL ignores tags. Between two ranks, PyTorch puts every single send
  and receive on one CUDA stream, run in posting order; a receive waits at the head of that
  stream for its data, and a large send until the peer's receive runs. The up-front recipe
  then deadlocks at once: at P = 2, rank 0's stream starts with "receive gradient 0" and rank
  1's with "receive activation 0", each waiting for a send queued behind it on the other side.

The in-order fix is one global order of messages that every rank follows. Run the schedule
once through the simulator, every op lasting 1. A message is keyed by the time its producing
op ends, ties broken by the message itself. Before its op k, a rank posts, in key order, every
message of its own whose key is ≤ the start of op k. By then the data of each send is made,
and each receive that op k needs is posted. Why nothing can hang: suppose some message never
completes, and take the one with the smallest key. A rank only ever waits for messages it has
posted, and before waiting on one it has posted everything with a smaller key. So both ranks
of our message post it. Everything ahead of it on their streams has a smaller key, so it
completed. So our message completes too, which contradicts the assumption.
``check_in_order`` runs that argument as a simulation, in its strictest form: one queue per
rank, and every message waits for its partner.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .ir import Comm, Item, Schedule
from .sim import DeadlockError, execute

TRANSPORTS = ("in-order", "up-front")
#: every posting order ``lower`` knows: the two transports' and the two receive placements
#: the head-of-line lesson compares (``"front-loaded"``, ``"just-in-time"``)
LOWERINGS = TRANSPORTS + ("front-loaded", "just-in-time")


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

    def comms(self) -> tuple[Comm, Comm]:
        """(the sender's item, the receiver's item), named as torch names them."""
        if self.kind == "act":
            return (Comm(self.stage - 1, "SEND_F", self.microbatch),
                    Comm(self.stage, "RECV_F", self.microbatch))
        return (Comm(self.stage + 1, "SEND_B", self.microbatch),
                Comm(self.stage, "RECV_B", self.microbatch))

    def side(self, rank: int) -> Comm:
        return self.comms()[0 if rank == self.src else 1]


def message_of(schedule: Schedule, comm: Comm) -> Message:
    """The message a send or receive item belongs to."""
    into = comm.peer_stage if comm.is_send else comm.stage
    src_stage = comm.stage if comm.is_send else comm.peer_stage
    return Message("act" if comm.forward else "grad", into, comm.microbatch,
                   schedule.stage_to_rank[src_stage], schedule.stage_to_rank[into])


def messages(schedule: Schedule) -> list[tuple[Message, tuple[int, int], tuple[int, int]]]:
    """Every cross-rank message with its producer's and consumer's (rank, step)."""
    owner = schedule.owners()
    out = []
    for r, k, op in schedule.actions():
        for a in op.parts:
            prod = schedule.input_of(a)
            if prod is None:
                continue
            if prod not in owner:
                raise ValueError(f"{a} needs {prod}, which no rank runs")
            src = owner[prod]
            if src[0] != r:
                kind = "act" if a.kind == "F" else "grad"
                out.append((Message(kind, a.stage, a.microbatch, src[0], r), src, (r, k)))
    return out


# ---- the two lowerings -----------------------------------------------------------------------
def lower(schedule: Schedule, transport: str = "in-order") -> list[list[Item]]:
    """Per rank, the compute ops and SEND/RECV items in the order the rank issues them."""
    if transport == "in-order":
        return _lower_in_order(schedule)
    if transport == "up-front":
        return _lower_up_front(schedule)
    if transport == "front-loaded":
        return _lower_in_order(schedule)
    if transport == "just-in-time":
        return _lower_just_in_time(schedule)
    raise ValueError(f"transport must be one of {', '.join(LOWERINGS)}, got {transport!r}")


def _unit_starts(schedule: Schedule) -> list[list[float]]:
    """Start time of each rank's ops when every op lasts 1 (exact, the same on every rank)."""
    starts: list[list[float]] = [[] for _ in range(schedule.P)]
    for e in sorted(execute(schedule, lambda op: 1.0), key=lambda e: e.start):
        starts[e.rank].append(e.start)               # a rank's ops run in list order
    return starts


def _lower_in_order(schedule: Schedule) -> list[list[Item]]:
    starts = _unit_starts(schedule)
    mine: list[list[tuple[float, Message]]] = [[] for _ in range(schedule.P)]
    for t, m in sorted((starts[p[0]][p[1]] + 1.0, m) for m, p, _ in messages(schedule)):
        mine[m.src].append((t, m))
        mine[m.dst].append((t, m))
    out: list[list[Item]] = []
    for r, ops in enumerate(schedule.ranks):
        row: list[Item] = []
        k = 0
        for t, m in mine[r]:
            while k < len(ops) and starts[r][k] < t:   # before the first op starting ≥ t
                row.append(ops[k])
                k += 1
            row.append(m.side(r))
        out.append(row + list(ops[k:]))
    return out


def _lower_up_front(schedule: Schedule) -> list[list[Item]]:
    msgs = sorted(messages(schedule), key=lambda x: (x[1], x[0]))
    out: list[list[Item]] = [[m.side(r) for m, _, _ in msgs if m.dst == r]
                             for r in range(schedule.P)]
    sends: dict[tuple[int, int], list[Message]] = {}
    for m, prod, _ in msgs:
        sends.setdefault(prod, []).append(m)
    for r, k, op in schedule.actions():
        out[r].append(op)
        out[r] += [m.side(r) for m in sends.get((r, k), ())]
    return out


def _lower_just_in_time(schedule: Schedule) -> list[list[Item]]:
    """Each receive right before the op that needs it, each send right after the op that
    makes it (what torch 2.13 does with ``defer_pp_recv=True``; its default posts them
    early, pytorch#188833). A blocking receive there
    costs nothing the op would not wait for anyway. Needs tag matching (gloo): on a strict
    in-order transport ``check_in_order`` finds where it hangs."""
    msgs = sorted(messages(schedule), key=lambda x: (x[1], x[0]))
    sends: dict[tuple[int, int], list[Message]] = {}
    recvs: dict[tuple[int, int], list[Message]] = {}
    for m, prod, cons in msgs:
        sends.setdefault(prod, []).append(m)
        recvs.setdefault(cons, []).append(m)
    out: list[list[Item]] = [[] for _ in range(schedule.P)]
    for r, k, op in schedule.actions():
        out[r] += [m.side(r) for m in recvs.get((r, k), ())]
        out[r].append(op)
        out[r] += [m.side(r) for m in sends.get((r, k), ())]
    return out


def p2p_messages(schedule: Schedule) -> int:
    """Point-to-point messages one step of ``schedule`` sends (activations forward,
    gradients backward; W sends nothing): the SEND items of its lowered form."""
    return sum(isinstance(x, Comm) and x.is_send for row in lower(schedule, "up-front")
               for x in row)


# ---- the student-facing plan form: what a rank posts before each op ---------------------------
Plan = list[list[list[Message]]]


def to_plan(schedule: Schedule, lowered: Sequence[Sequence[Item]]) -> Plan:
    """``plan[r][k]``: the messages rank r posts, in order, just before its op k;
    ``plan[r][len(ops)]``: those after its last op."""
    plan: Plan = []
    for row in lowered:
        batches: list[list[Message]] = [[]]
        for x in row:
            if isinstance(x, Comm):
                batches[-1].append(message_of(schedule, x))
            else:
                batches.append([])
        plan.append(batches)
    return plan


def from_plan(schedule: Schedule, plan: Sequence[Sequence[Sequence[Message]]]) -> list[list[Item]]:
    out = []
    for r, batches in enumerate(plan):
        row: list[Item] = []
        for k, batch in enumerate(batches):
            row += [m.side(r) for m in batch]
            if k < len(schedule.ranks[r]):
                row.append(schedule.ranks[r][k])
        out.append(row)
    return out


def in_order_plan(schedule: Schedule) -> Plan:
    return to_plan(schedule, lower(schedule, "in-order"))


def up_front_plan(schedule: Schedule) -> Plan:
    """The gloo recipe: every receive before op 0, every send right after its op. Fine with
    tag matching and buffered sends; on an in-order transport it deadlocks."""
    return to_plan(schedule, lower(schedule, "up-front"))


# ---- the strict in-order checker ------------------------------------------------------------
def _sequence(schedule: Schedule, lowered) -> list[list[tuple[str, object]]]:
    """Each rank's lowered list as ("op", k) / ("msg", Message) entries."""
    seq = []
    for row in lowered:
        items, k = [], 0
        for x in row:
            if isinstance(x, Comm):
                items.append(("msg", message_of(schedule, x)))
            else:
                items.append(("op", k))
                k += 1
        seq.append(items)
    return seq


def check_in_order(schedule: Schedule, lowered) -> None:
    """Play a lowered list (or a plan, see ``to_plan``) on the strictest in-order transport:
    each rank has one queue, posts its messages in list order, and a message completes only
    when both ranks have it at the head of their queue. Ops never wait for anything but their
    own receives. Raises DeadlockError naming what each stuck rank waits for, or ValueError if
    an op would run before one of its receives is posted or a send before its data is made."""
    if any(isinstance(x, (list, tuple)) for row in lowered for x in row):
        lowered = from_plan(schedule, lowered)
    needs: dict[tuple[int, int], set[Message]] = {}
    made_by = {}
    for m, prod, cons in messages(schedule):
        needs.setdefault(cons, set()).add(m)
        made_by[m] = prod
    seq = _sequence(schedule, lowered)
    pos = [0] * schedule.P
    done_ops: set[tuple[int, int]] = set()
    done_msgs: set[Message] = set()
    moved = True
    while moved:
        moved = False
        for r in range(schedule.P):
            while pos[r] < len(seq[r]) and _advance(schedule, seq, pos, r, needs, made_by,
                                                    done_ops, done_msgs):
                pos[r] += 1
                moved = True
    stuck = [r for r in range(schedule.P) if pos[r] < len(seq[r])]
    if stuck:
        raise DeadlockError("in-order transport deadlock: " + "; ".join(
            f"rank {r} waits on the {seq[r][pos[r]][1]}" for r in stuck))


def _advance(schedule, seq, pos, r, needs, made_by, done_ops, done_msgs) -> bool:
    """Whether rank r's head entry can complete now (recording it if so)."""
    kind, x = seq[r][pos[r]]
    if kind == "op":
        missing = needs.get((r, x), set()) - done_msgs
        if missing:   # a message behind us in the queue has completed
            raise ValueError(f"rank {r} step {x}: the plan runs {schedule.ranks[r][x]} before "
                             f"posting the {min(missing)}")
        done_ops.add((r, x))
        return True
    m = x
    if m.src == r and made_by[m] not in done_ops:
        raise ValueError(f"rank {r}: the plan sends the {m} before "
                         f"{schedule.ranks[r][made_by[m][1]]} makes it")
    if m in done_msgs:        # the partner completed it with us
        return True
    peer = m.dst if m.src == r else m.src
    if pos[peer] < len(seq[peer]) and seq[peer][pos[peer]] == ("msg", m):
        done_msgs.add(m)
        return True
    return False
