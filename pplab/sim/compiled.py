"""The fast executor's compile: a schedule's ops as integer columns, each op's input, and
the order the reference runs them in (``CompiledSchedule``, an immutable value).

The rule is the reference's (``dependencies.py``), applied per *stream* instead of per
action: a stream is one kind on one stage, B's and I's together (``pplab.keys``), and the
m-th action of a stream needs the m-th action of its source stream (``_sources``). So the
compile lists each stream's actions in microbatch order (``_streams_from_runs`` where the
generator says where its streams sit, else ``_streams_from_keys``) and derives every input
from those lists in one place (``_inputs``). Only inputs made on another rank are kept: one
made earlier on the op's own rank ended before the rank became free, so it never moves a
start (durations are ≥ 0); the compile checks that it does come earlier.

Anything unusual (an action run twice, off its stage's rank or out of range, both B and I for
one stage and microbatch, an input nobody or the op's own rank only later makes) gives None:
the caller then runs the reference, which raises its own, well-worded error.
"""
from __future__ import annotations

from itertools import accumulate, chain, compress, repeat
from operator import and_, ge, gt, mod
from typing import NamedTuple, Sequence

from .. import keys
from ..ir import Schedule, gc_paused
from ..keys import CLASS_MASK, MICROBATCH_SHIFT, PAIR_BASE, PAIR_CLASS_MASK

#: ``CompiledSchedule.source[i]`` of an overlapped pair (its halves' inputs: ``part_source``)
PAIR = -1
#: a microbatch no action of a stream has (a stream's list from keys, before it is checked)
MISSING = -1


class Inputs(NamedTuple):
    """One schedule's ops as integer columns and what each waits for from another rank.

    Ops are numbered rank by rank: rank r's are ``bounds[r]`` .. ``bounds[r + 1] - 1``, of
    ``n``. What an op waits for is a *part*: part i is op i's action (a pair's forward half),
    part ``n + i`` a pair's backward half (both end when the pair does); two more parts
    stand for times: ``nothing`` (2n, ended at -inf: "no input from another rank") and
    ``rank_start`` (2n + 1, at 0: when every rank is free). ``part_source[p]``: the part
    that part p waits for from another rank, or ``nothing``. ``source[i]``: op i's, or
    ``PAIR`` for an overlapped pair, whose halves' are ``part_source[i]`` and
    ``part_source[n + i]``. ``cls[i]``: the op's duration class (``keys.PAIR_CLASS_MASK``).
    """
    n: int
    keys: Sequence[int]
    rank: Sequence[int]
    bounds: Sequence[int]
    cls: Sequence[int]
    source: Sequence[int]
    part_source: Sequence[int]

    @property
    def nothing(self) -> int:
        """The part that stands for "no input from another rank" (ended at -inf)."""
        return 2 * self.n

    @property
    def rank_start(self) -> int:
        """The part that stands for the moment every rank is free (0)."""
        return 2 * self.n + 1


class CompiledSchedule(NamedTuple):
    """A schedule compiled for the fast executor: its ``inputs``, and ``order``, the op
    numbers in the order the reference runs them (fixed by the schedule: the reference
    waits on "made yet", never on a time); ``previous[i]``: the op run just before op i on
    its rank, ``inputs.rank_start`` for a rank's first. Immutable; a caller that simulates
    the same schedule again keeps it (``simulate(..., compiled=)``), and each simulation
    is then one timing pass along ``order``."""
    schedule: Schedule
    inputs: Inputs
    order: tuple
    previous: tuple


def compile_schedule(schedule: Schedule) -> CompiledSchedule | None:
    """``schedule`` compiled for the fast executor, or None where only the reference may
    answer: an unusual schedule (module doc) or a deadlock (the reference words it)."""
    from .fast import first_run                   # the worklist, run once without costs
    with gc_paused():
        inputs = schedule_inputs(schedule)
        if inputs is None:
            return None
        ran = first_run(inputs, [0.0] * inputs.n, 0.0)
        if ran is None:
            return None
        frozen = Inputs(inputs.n, *map(tuple, inputs[1:]))     # kept: made immutable
        return CompiledSchedule(schedule, frozen, tuple(ran[2]),
                                tuple(_previous(inputs.n, inputs.bounds)))


def _previous(n: int, bounds) -> list[int]:
    """Each op's predecessor on its rank, ``rank_start`` (2n + 1) for a rank's first op."""
    previous = list(range(-1, n - 1))
    for first in bounds[:-1]:
        if first < n:
            previous[first] = 2 * n + 1
    return previous


def schedule_inputs(schedule: Schedule) -> Inputs | None:
    """The schedule's ``Inputs`` (as lists: one simulation's, read and dropped), or None
    where the reference must answer (module doc)."""
    with gc_paused():
        found = _compile(schedule)
    return None if found is None else Inputs(len(found[0]), *found)


def _compile(schedule: Schedule):
    """(keys, rank, bounds, cls, source, part_source) as lists, or None (module doc)."""
    rank_keys = schedule.rank_keys()
    sizes = list(map(len, rank_keys))
    bounds = [0, *accumulate(sizes)]
    op_keys = list(chain.from_iterable(rank_keys))
    rank_of = list(chain.from_iterable(map(repeat, range(schedule.P), sizes)))
    cls = list(map(and_, op_keys, repeat(PAIR_CLASS_MASK)))
    if len(rank_keys) != schedule.P or _off_its_rank(schedule):
        return None
    found = _streams_from_runs(schedule, op_keys, bounds)
    if found is None:
        pairs = _pair_positions(op_keys)
        found = (_streams_from_keys(schedule, op_keys, pairs), {},
                 [range(i, i + 1) for i in pairs])
    streams, runs, pairs = found
    part_source = None if streams is None else _inputs(schedule, streams, runs, cls)
    if part_source is None:
        return None
    source = part_source[:len(op_keys)]
    for at in pairs:
        source[at.start:at.stop:at.step] = repeat(PAIR, len(at))
    return op_keys, rank_of, bounds, cls, source, part_source


def _pair_positions(op_keys) -> list[int]:
    """The ops that are overlapped pairs (keys from ``PAIR_BASE`` on)."""
    if max(op_keys, default=0) < PAIR_BASE:
        return []
    return list(compress(range(len(op_keys)), map(ge, op_keys, repeat(PAIR_BASE))))


def _off_its_rank(schedule: Schedule) -> bool:
    """Some op's stage is out of range or lives on another rank (checked per class)."""
    place, S = schedule.stage_to_rank, schedule.num_stages
    return any(keys.stage_of(c) >= S or place[keys.stage_of(c)] != r
               for r, classes in enumerate(schedule.rank_classes) for c in classes)


def _streams_from_runs(schedule: Schedule, op_keys, bounds):
    """Each stream's parts in microbatch order, from where its generator wrote them
    (``Schedule.stream_runs``; a run is ``(first position, step, count, how)``): ranges,
    no key looked up except a postponed W's (its microbatch is its key's). Returns
    ``(streams, runs, pairs)``: also each stream's runs as ranges of parts (to write its
    inputs a run at a time) and the ranges of ops that are pairs. None without runs, or
    where they do not cover every part."""
    runs = schedule.stream_runs()
    if runs is None:
        return None
    n, streams, ranges, pairs, covered = bounds[-1], {}, {}, [], 0
    for base, rank_runs in zip(bounds, runs):
        for stream, segments in rank_runs.items():
            parts, mine, postponed = streams.setdefault(stream, []), [], False
            for position, step, count, how in segments:
                first = base + position
                if how == keys.PAIR_BACKWARD:
                    first += n
                elif how == keys.PAIR_FORWARD:
                    pairs.append(range(first, first + step * count, step))
                elif how == keys.POSTPONED_W:
                    postponed = True
                mine.append(range(first, first + step * count, step))
                parts += mine[-1]
                covered += count
            if postponed:                              # written out of microbatch order
                parts = streams[stream] = _by_microbatch(parts, op_keys)
                if parts is None:
                    return None
            else:
                ranges.setdefault(stream, []).extend(mine)
    if covered != n + sum(map(len, pairs)):
        return None
    return streams, ranges, pairs


def _by_microbatch(parts, op_keys) -> list[int] | None:
    """W's (never in a pair) put in microbatch order, ``MISSING`` where a microbatch has
    none (its backward was not split); None where one microbatch has two."""
    microbatches = [op_keys[part] >> MICROBATCH_SHIFT for part in parts]   # keys.microbatch_of
    ordered = [MISSING] * (max(microbatches) + 1)
    for part, mb in zip(parts, microbatches):
        if ordered[mb] != MISSING:
            return None
        ordered[mb] = part
    return ordered


def _streams_from_keys(schedule: Schedule, op_keys, pairs) -> dict | None:
    """Each stream's parts in microbatch order, read off the keys. None where an action runs
    twice, a stage and microbatch has both a B and an I, a microbatch is out of range, or a
    stream other than W's misses one (the reference decides; a W exists only where its
    backward was split)."""
    n, M = len(op_keys), schedule.M
    if min(op_keys, default=0) < 0:
        return None
    stream_of = [keys.stream_of_key(c) for c in range(schedule.num_stages * keys.KIND_SLOTS)]
    part_keys, part_ids = op_keys, range(n)
    if pairs:                                  # a pair's halves: parts i and n + i
        part_keys, part_ids = list(op_keys), [*part_ids, *(n + i for i in pairs)]
        for i in pairs:
            part_keys[i], backward = keys.halves(op_keys[i])
            part_keys.append(backward)
    where: dict[int, list] = {}
    for part, key in zip(part_ids, part_keys):
        mb, stream = key >> MICROBATCH_SHIFT, stream_of[key & CLASS_MASK]
        ids = where.get(stream)
        if ids is None:
            ids = where[stream] = [MISSING] * M
        if mb >= M or ids[mb] != MISSING:
            return None
        ids[mb] = part
    for stream, ids in where.items():
        while ids and ids[-1] == MISSING:
            ids.pop()
        if MISSING in ids and keys.kind_of(stream) != "W":
            return None
    return where


def _sources(schedule: Schedule):
    """Per stream: the stream whose m-th action its m-th action waits for (None: a first
    stage's forward, which needs nothing), and whether that one runs on the same rank.

    The source is the input ``Schedule.input_key`` names: the previous stage's forward, the
    next stage's backward (B or I: one stream). Where there is none, it is the stage's own
    earlier part, which must already have run on this rank: a W's I, a last stage's
    backward's forward (a backward's own forward is implied by its input: the input's maker
    needed it)."""
    first, last = schedule._stage_ends
    place = schedule.stage_to_rank
    source = {}
    for s in range(schedule.num_stages):
        forward, backward = keys.stream_of("F", s), keys.stream_of("B", s)
        source[forward] = None if first[s] else keys.stream_of("F", s - 1)
        source[backward] = forward if last[s] else keys.stream_of("B", s + 1)
        source[keys.stream_of("W", s)] = backward
    same_rank = {x: y is not None and place[keys.stage_of(y)] == place[keys.stage_of(x)]
                 for x, y in source.items()}
    return source, same_rank


def _inputs(schedule: Schedule, streams, runs, cls) -> list[int] | None:
    """Every part's input from another rank (a part id), or ``nothing`` (2n): the m-th part
    of a stream (``streams``) needs the m-th of its source stream. None where an input is
    missing or made on the op's own rank only later (the reference says which). ``runs``:
    where known, a stream's parts as ranges, to write its inputs a range at a time."""
    n = len(cls)
    found = [2 * n] * (2 * n)
    source, same_rank = _sources(schedule)
    present = frozenset().union(*schedule.rank_classes)
    for stream, mine in streams.items():
        if source.get(stream) is None:
            continue
        made = streams.get(source[stream], ())[:len(mine)]
        if len(made) < len(mine):
            return None
        if keys.kind_of(stream) == "W":            # W's: only where a backward was split
            mine, made = _present(mine, made)
            if not _only_is(stream, made, cls, n, present):
                return None
        if same_rank[stream]:
            if _made_later(made, mine, n):
                return None
        elif stream in runs:                       # a run at a time
            m = 0
            for at in runs[stream]:
                found[at.start:at.stop:at.step] = made[m:m + len(at)]
                m += len(at)
        else:
            for part, input_part in zip(mine, made):
                found[part] = input_part
    return found


def _present(mine, made):
    """The W's a stream has (its microbatches without one dropped) and their backwards."""
    if MISSING not in mine:
        return mine, made
    kept = [m for m, part in enumerate(mine) if part != MISSING]
    return [mine[m] for m in kept], [made[m] for m in kept]


def _only_is(w_stream: int, made, cls, n: int, present) -> bool:
    """Whether the backwards ``made`` that a stage's W's wait for are all I's (a W needs
    its I; where the stage also runs full B's, each is checked)."""
    stage = keys.stage_of(w_stream)
    if keys.class_of("B", stage) not in present:
        return True
    return max(made, default=0) < n and set(map(cls.__getitem__, made)) <= {
        keys.class_of("I", stage)}


def _made_later(made, mine, n: int) -> bool:
    """Some input ``made`` on the op's own rank comes after the op (``mine``); as parts, so
    a pair's backward half ``n + i`` counts as its op, i (part mod n)."""
    return any(map(gt, map(mod, made, repeat(n)), map(mod, mine, repeat(n))))
