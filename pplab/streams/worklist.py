"""The stream model's run (``model.py`` states the model): the lowered lists played as a
worklist, the way the reference executor plays the compute lists. A rank runs its items in
order until it needs something not known yet (an op's input, a message's data, a queue's
head), and is woken when that becomes known, so the cost is linear in the items.

Nothing waits on a time, only on "known yet", so the order of the steps is fixed by the
schedule, its lowering and the link's kind (queues, blocking receives), never by costs,
latency or bandwidth. On the tag-matched transport the run records its steps (``steps``):
``replay.py`` replays them with other numbers in one straight pass.
"""
from __future__ import annotations

from ..ir import Comm, Schedule
from ..lower import Message, message_of
from ..sim.dependencies import dependency_keys
from ..sim.reference import DeadlockError
from ..timeline import Event, Transfer

#: ``Step.op`` of a step that is a blocking receive's wait, not an op
WAIT = -1


def _compile(s: Schedule, rank: int, row, ids: dict[Message, int], first: int) -> list[tuple]:
    """Each item of a lowered row as ("op", op, deps on this rank, ids of the messages it
    needs, the op's index) or ("send"/"recv", message id); ``ids`` numbers the messages
    (integer keys make the run several times quicker than hashing dataclasses), ops are
    numbered rank by rank from ``first`` (as ``Timeline`` columns number them)."""
    out = []
    for x in row:
        if isinstance(x, Comm):
            m = message_of(s, x)
            if rank not in (m.src, m.dst):
                raise ValueError(f"rank {rank} lists {x}, a message of ranks {m.src} "
                                 f"and {m.dst}")
            out.append(("send" if x.is_send else "recv", ids.setdefault(m, len(ids))))
            continue
        inner = {(a.stage, a.kind, a.microbatch) for a in x.parts}
        local, msgs = [], []
        for a in x.parts:
            for dep in dependency_keys(s, a.stage, a.kind, a.microbatch):
                if dep in inner:
                    continue
                src = s.stage_to_rank[dep[0]]
                if src == rank:
                    local.append(dep)
                else:
                    kind = "act" if a.kind == "F" else "grad"
                    m = Message(kind, a.stage, a.microbatch, src, rank)
                    msgs.append(ids.setdefault(m, len(ids)))
        out.append(("op", x, local, msgs, first))
        first += 1
    return out


def compile_rows(schedule: Schedule, rows) -> tuple[list[list[tuple]], list[Message]]:
    """(compiled rows, the messages by id)."""
    ids: dict[Message, int] = {}
    out, first = [], 0
    for r, row in enumerate(rows):
        out.append(_compile(schedule, r, row, ids, first))
        first += sum(1 for item in out[-1] if item[0] == "op")
    return out, list(ids)


class StreamRun:
    """One pass over the lowered lists. Like the reference executor, a rank runs until it
    needs something not yet known, and is woken when that becomes known (linear time).

    ``steps``: on the tag-matched transport, the steps that move a rank's clock, in the order
    they ran, each ``[rank, op index or WAIT, messages it waits for, messages posted right
    after it]``; None where the run cannot be replayed (in-order queues)."""

    def __init__(self, schedule: Schedule, rows, msgs: list[Message], duration, link):
        self.s, self.duration, self.link = schedule, duration, link
        self.rows, self.msgs = rows, msgs
        self.pos, self.now = [0] * schedule.P, [0.0] * schedule.P
        self.end_of: dict[tuple, float] = {}
        n = len(msgs)                             # per message id:
        self.sent: list[float | None] = [None] * n     # send posted at
        self.posted: list[float | None] = [None] * n   # receive posted at
        self.arrive: list[float | None] = [None] * n   # data there (at the receiver)
        self.send_free = [0.0] * schedule.P
        self.queues: dict = {}                    # in-order: queue key -> [message ids], head
        self.q_free: dict = {}
        self.waiting: dict[int, list[int]] = {}
        self.events: list[Event] = []
        self.transfers: list[Transfer] = []
        self.steps: list[list] | None = [] if link.in_order is None else None
        self.last_step: list[list | None] = [None] * schedule.P     # per rank

    # ---- messages ------------------------------------------------------------------------
    def _queue_key(self, rank: int, m: Message):
        return rank if self.link.in_order == "rank" else (rank, m.dst if rank == m.src else m.src)

    def _post(self, rank: int, i: int, send: bool) -> None:
        t = self.now[rank]
        (self.sent if send else self.posted)[i] = t
        if self.link.in_order is None:
            if send:
                link = self.link
                start = max(t, self.send_free[rank])
                self.send_free[rank] = start + link.transfer_time(link.bytes_of(self.msgs[i].kind))
                self._land(i, start, self.send_free[rank] + link.latency)
                self._record_send(rank, i)
            return
        q = self.queues.setdefault(self._queue_key(rank, self.msgs[i]), [[], 0])
        q[0].append(i)
        self._resolve(i)

    def _record_step(self, rank: int, op_index: int, needs) -> None:
        if self.steps is not None:
            self.last_step[rank] = [rank, op_index, tuple(needs), []]
            self.steps.append(self.last_step[rank])

    def _record_send(self, rank: int, i: int) -> None:
        """A send is posted at the rank's clock: after its last step (none yet: at 0, which
        the replay does not model, so the run is not replayed)."""
        if self.steps is not None and self.last_step[rank] is None:
            self.steps = None
        elif self.steps is not None:
            self.last_step[rank][3].append(i)

    def _resolve(self, i: int) -> None:
        """In-order: run message ``i`` if it heads both its queues, then whatever that
        unblocks."""
        todo = [i]
        while todo:
            i = todo.pop()
            if self.arrive[i] is not None or self.sent[i] is None or self.posted[i] is None:
                continue
            m = self.msgs[i]
            keys = [self._queue_key(r, m) for r in (m.src, m.dst)]
            qs = [self.queues[k] for k in keys]
            if any(q[0][q[1]] != i for q in qs):
                continue
            start = max(self.sent[i], self.posted[i], *(self.q_free.get(k, 0.0) for k in keys))
            end = start + self.link.transfer_time(self.link.bytes_of(m.kind)) + self.link.latency
            for k, q in zip(keys, qs):
                self.q_free[k] = end
                q[1] += 1
                if q[1] < len(q[0]):
                    todo.append(q[0][q[1]])
            self._land(i, start, end)

    def _land(self, i: int, start: float, end: float) -> None:
        m = self.msgs[i]
        self.arrive[i] = end
        self.transfers.append(Transfer(m.src, m.dst, m.kind,
                                       f"{m.stage}{'F' if m.kind == 'act' else 'B'}"
                                       f"{m.microbatch}", start, end))
        woken = self.waiting.pop(i, None)
        if woken:
            self.todo.extend(woken)

    def _ready(self, rank: int, i: int, op=None) -> float | None:
        """When message ``i``'s data is there for ``rank`` (None: not known yet)."""
        posted, arrive = self.posted[i], self.arrive[i]
        if posted is None:
            what = f"runs {op}" if op is not None else "waits"
            raise ValueError(f"rank {rank}: the lowered list {what} before posting the "
                             f"receive of the {self.msgs[i]}")
        if arrive is None:
            self.waiting.setdefault(i, []).append(rank)
            return None
        return arrive if arrive > posted else posted

    # ---- ranks ---------------------------------------------------------------------------
    def _step(self, rank: int) -> bool:
        """Run rank's next item; False when it must wait."""
        entry = self.rows[rank][self.pos[rank]]
        kind = entry[0]
        if kind == "send":
            m = self.msgs[entry[1]]
            if self._made(m) is None:
                raise ValueError(f"rank {rank}: the lowered list sends the {m} before the op "
                                 f"that makes it runs")
            self._post(rank, entry[1], True)
        elif kind == "recv":
            self._post(rank, entry[1], False)
            if self.link.blocking:
                t = self._ready(rank, entry[1])
                if t is None:
                    return False
                self.now[rank] = max(self.now[rank], t)
                self._record_step(rank, WAIT, (entry[1],))
        else:
            return self._compute(rank, *entry[1:])
        return True

    def _made(self, m: Message) -> float | None:
        """End time of the op that makes ``m``'s data (None: not run yet)."""
        if m.kind == "act":
            return self.end_of.get((m.stage - 1, "F", m.microbatch))
        nxt = m.stage + 1
        return self.end_of.get((nxt, "B", m.microbatch),
                               self.end_of.get((nxt, "I", m.microbatch)))

    def _compute(self, rank: int, op, local, msgs, op_index: int) -> bool:
        start = self.now[rank]
        for dep in local:
            end = self.end_of.get(dep)
            if end is None:
                self.stuck_on[rank] = f"{op} needs {dep[0]}{dep[1]}{dep[2]}, not run before it"
                return False
            start = max(start, end)
        for i in msgs:
            t = self._ready(rank, i, op)
            if t is None:
                return False
            start = max(start, t)
        d, a2a = self.duration(op)
        end = start + d
        self.events.append(Event(rank, op, start, end))
        for off, length, label in a2a:
            self.transfers.append(Transfer(rank, rank, "a2a", f"{label} all-to-all",
                                           start + off, start + off + length))
        for a in op.parts:
            self.end_of[(a.stage, a.kind, a.microbatch)] = end
        self.now[rank] = end
        self._record_step(rank, op_index, msgs)
        return True

    def go(self) -> None:
        self.todo = list(range(self.s.P))[::-1]
        self.stuck_on: dict[int, str] = {}
        while self.todo:
            rank = self.todo.pop()
            row = self.rows[rank]
            while self.pos[rank] < len(row) and self._step(rank):
                self.pos[rank] += 1
        stuck = [r for r in range(self.s.P) if self.pos[r] < len(self.rows[r])]
        if stuck:
            raise DeadlockError("; ".join(self._why(r) for r in stuck) + " — deadlock")

    def _why(self, rank: int) -> str:
        if rank in self.stuck_on:
            return f"rank {rank}: {self.stuck_on[rank]}"
        entry = self.rows[rank][self.pos[rank]]
        waits = [self.msgs[i] for i, rs in self.waiting.items() if rank in rs]
        what = f"the {waits[0]}" if waits else "a message"
        head = entry[1] if entry[0] == "op" else f"{entry[0]} of the {self.msgs[entry[1]]}"
        return f"rank {rank} at {head} waits for {what}"
