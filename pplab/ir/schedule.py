"""A Schedule: which rank runs which stage, and the order each rank runs its ops in.

Its one storage is each rank's ``OpRow`` (integer keys, ``rows.py``); ``ranks`` reads as
tuples of Actions and Overlaps, made when read. Nothing is written into a Schedule after it
is built: what the simulator compiles from one (``pplab.sim.compiled``) is a value of its own
that the caller keeps.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import repeat
from operator import and_, ge, rshift
from typing import Iterator, Sequence, Union

from .. import keys
from ..keys import PAIR_BASE, PAIR_CLASS_MASK
from .actions import Action, Op, parse_op
from .rows import OpRow


@dataclass(frozen=True)
class Schedule:
    """Which rank runs which stage, and the order each rank runs its actions in.

    ``copies`` is 1 except for DualPipe, which trains two copies of the model in opposite
    directions: stages ``0..S-1`` form copy 0, ``S..2S-1`` copy 1, and each copy sees
    ``M / copies`` microbatches numbered from 0. ``num_microbatches`` counts all of them.
    """
    name: str
    num_ranks: int
    num_microbatches: int
    stage_to_rank: tuple[int, ...]
    #: each rank's ops in run order: given as any sequences of Actions and Overlaps, kept
    #: as ``OpRow`` (their keys); ``ranks[r][k]`` reads rank r's op k
    ranks: tuple[OpRow, ...]
    virtual: int = 1
    copies: int = 1
    #: worked out at construction from the fields above (never written later)
    stages_per_copy: int = field(init=False, repr=False, compare=False)
    #: per rank, the action classes (``pplab.keys``: kind and stage) its ops hold
    rank_classes: tuple = field(init=False, repr=False, compare=False)
    _stage_ends: tuple = field(init=False, repr=False, compare=False)
    _backward_i: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        setter = object.__setattr__            # a frozen dataclass sets its fields so
        setter(self, "stage_to_rank", tuple(self.stage_to_rank))
        setter(self, "ranks", tuple(r if type(r) is OpRow else OpRow.of_ops(r)
                                    for r in self.ranks))
        per_copy = len(self.stage_to_rank) // self.copies if self.copies > 0 else 0
        setter(self, "stages_per_copy", per_copy)
        stages = range(len(self.stage_to_rank))
        setter(self, "_stage_ends", (tuple(per_copy and s % per_copy == 0 for s in stages),
                                     tuple(per_copy and s % per_copy == per_copy - 1
                                           for s in stages)))
        classes = tuple(map(_action_classes, self.ranks))
        setter(self, "rank_classes", classes)
        setter(self, "_backward_i", _backward_kinds(classes, len(stages)))

    # ---- shape -------------------------------------------------------------------------
    @property
    def P(self) -> int:
        """Pipeline ranks (the papers' P)."""
        return self.num_ranks

    @property
    def M(self) -> int:
        """Microbatches per step, over all copies (the papers' M)."""
        return self.num_microbatches

    @property
    def V(self) -> int:
        """Stages (chunks) per rank and copy: 1, or V when interleaved."""
        return self.virtual

    @property
    def num_stages(self) -> int:
        """Stages of all copies together."""
        return len(self.stage_to_rank)

    @property
    def microbatches_per_copy(self) -> int:
        """Microbatches each copy sees (DualPipe's copies share M)."""
        return self.num_microbatches // self.copies

    def stages_of_rank(self, rank: int) -> list[int]:
        """The stages placed on ``rank``, in stage order."""
        return [s for s, r in enumerate(self.stage_to_rank) if r == rank]

    def copy_of(self, stage: int) -> int:
        """Which copy of the model ``stage`` belongs to (0 unless DualPipe)."""
        return stage // self.stages_per_copy

    def position(self, stage: int) -> int:
        """Index of the stage inside its copy of the model (0 = holds the embedding)."""
        return stage % self.stages_per_copy

    def is_first(self, stage: int) -> bool:
        """Whether ``stage`` holds its copy's embedding (its input comes from data)."""
        return self.position(stage) == 0

    def is_last(self, stage: int) -> bool:
        """Whether ``stage`` holds its copy's loss (its backward starts the chain)."""
        return self.position(stage) == self.stages_per_copy - 1

    @property
    def stage_share(self) -> float:
        """Share of one rank's layers (L/P) that each stage holds: P / stages per copy, 1/V
        when interleaved. The same for every stage, because a pplab schedule splits a
        copy's layers evenly over its stages (uneven splits live in the memory model)."""
        return self.num_ranks / self.stages_per_copy

    def chunk_fraction(self, stage: int) -> float:
        """``stage_share``, asked of one stage: the simulator and the memory model weigh
        each stage's work and activations by it. ValueError for a stage the schedule lacks,
        so a wrong stage is an error rather than a plausible answer."""
        if not 0 <= stage < len(self.stage_to_rank):
            raise ValueError(f"{self.name} has stages 0..{len(self.stage_to_rank) - 1}, "
                             f"not {stage}")
        return self.num_ranks / self.stages_per_copy

    def global_microbatch(self, stage: int, microbatch: int) -> int:
        """Index into the whole batch: DualPipe's copy 1 takes the second half."""
        return self.copy_of(stage) * self.microbatches_per_copy + microbatch

    def actions(self) -> Iterator[tuple[int, int, Op]]:
        """(rank, step, op) for every op in run order per rank."""
        for rank, ops in enumerate(self.ranks):
            for step, op in enumerate(ops):
                yield rank, step, op

    def owners(self) -> dict[Action, tuple[int, int]]:
        """Which (rank, step) runs each action (both parts of an overlapped pair map to it)."""
        return {a: (rank, step) for rank, step, op in self.actions() for a in op.parts}

    def input_of(self, action: Action) -> Action | None:
        """The action on a neighbouring stage whose output ``action`` consumes, or None (a
        copy's first forward, its last backward, any W). The one place that answers "who
        makes my input": the simulator, the lowering and the worker all ask here."""
        key = self.input_key(action.stage, action.kind, action.microbatch)
        return None if key is None else Action(*key)

    def input_key(self, stage: int, kind: str, microbatch: int) -> tuple | None:
        """``input_of`` as a plain ``(stage, kind, microbatch)`` tuple: the simulator asks
        for every action, and tuples are quicker to build and hash than actions."""
        first, last = self._stage_ends
        if kind == "F":
            return None if first[stage] else (stage - 1, "F", microbatch)
        if kind == "W" or last[stage]:
            return None
        split = self._backward_i[stage + 1] if stage + 1 < len(self._backward_i) else False
        if split is None:                # the stage runs both: look this microbatch up
            i_key = keys.key_of("I", stage + 1, microbatch)
            row = self.ranks[self.stage_to_rank[stage + 1]].keys
            split = i_key in row or i_key in map(rshift, row, repeat(keys.PAIR_SHIFT))
        return (stage + 1, "I" if split else "B", microbatch)

    @property
    def num_actions(self) -> int:
        """Actions over all ranks, a pair's two halves counted apart."""
        return sum(len(r.keys) + sum(map(ge, r.keys, repeat(PAIR_BASE))) for r in self.ranks)

    # ---- text ----------------------------------------------------------------------------
    def rank_texts(self) -> list[list[str]]:
        """Each rank's ops as text (``0F1``, ``(0F3;5B1)``), the form files and jobs carry."""
        return [[str(op) for op in ops] for ops in self.ranks]

    def to_text(self) -> str:
        """A ranks × steps grid, one row per rank, columns aligned."""
        texts = self.rank_texts()
        width = max((len(t) for row in texts for t in row), default=3)
        lines = [f"{self.name}: P={self.P} M={self.M} V={self.V} "
                 f"placement stage->rank {list(self.stage_to_rank)}"]
        for rank, row in enumerate(texts):
            lines.append(f"rank {rank}: " + " ".join(t.rjust(width) for t in row))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def from_text(cls, rows: Union[str, Sequence[Union[str, Sequence[str]]]], *,
                  stage_to_rank: Sequence[int] | None = None, num_microbatches: int | None = None,
                  name: str = "custom", virtual: int | None = None, copies: int = 1) -> "Schedule":
        """Build a schedule from per-rank action text, e.g. ``["0F0 0F1 0B0 0B1", "1F0 ..."]``.

        ``rows`` may also be one string with a line per rank (``rank 0:`` prefixes allowed).
        Without ``stage_to_rank`` the placement is read off the rows (each stage must appear on
        exactly one rank); without ``num_microbatches`` it is one more than the largest seen.
        """
        if isinstance(rows, str):
            rows = [ln for ln in rows.strip().splitlines() if ln.strip()]
        ranks: list[tuple[Op, ...]] = []
        for row in rows:
            if isinstance(row, str):
                row = re.sub(r"^\s*rank\s*\d+\s*:", "", row)
                tokens = re.findall(r"\([^)]*\)|[^\s,]+", row)
            else:
                tokens = list(row)
            ranks.append(tuple(parse_op(t) if isinstance(t, str) else t for t in tokens))
        parts = [a for ops in ranks for op in ops for a in op.parts]
        if stage_to_rank is None:
            found: dict[int, int] = {}
            for rank, ops in enumerate(ranks):
                for op in ops:
                    for a in op.parts:
                        if found.setdefault(a.stage, rank) != rank:
                            raise ValueError(f"stage {a.stage} appears on rank "
                                             f"{found[a.stage]} and rank {rank}; a stage "
                                             "lives on one rank")
            n = max(found, default=-1) + 1
            missing = [s for s in range(n) if s not in found]
            if missing:
                raise ValueError(f"stage {missing[0]} never appears; pass stage_to_rank explicitly")
            stage_to_rank = [found[s] for s in range(n)]
        if num_microbatches is None:
            num_microbatches = (max((a.microbatch for a in parts), default=-1) + 1) * copies
        if virtual is None:
            virtual = max(1, len(stage_to_rank) // max(1, len(ranks)) // copies)
        return cls(name, len(ranks), num_microbatches, tuple(stage_to_rank), tuple(ranks),
                   virtual, copies)

    # ---- interchange ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON-able form (the runtime's job file carries it to every rank)."""
        return {"name": self.name, "P": self.P, "M": self.M, "V": self.V, "copies": self.copies,
                "stage_to_rank": list(self.stage_to_rank), "ranks": self.rank_texts()}

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        """Back from ``to_dict`` (the runtime's job file, a saved schedule)."""
        ranks = tuple(tuple(parse_op(t) for t in row) for row in d["ranks"])
        return cls(d["name"], int(d["P"]), int(d["M"]), tuple(d["stage_to_rank"]), ranks,
                   int(d.get("V", 1)), int(d.get("copies", 1)))

    # ---- integer keys (pplab/keys.py) ----------------------------------------------------
    @classmethod
    def from_keys(cls, name: str, P: int, M: int, stage_to_rank, rank_keys, V: int = 1,
                  copies: int = 1, streams=None) -> "Schedule":
        """A schedule given as each rank's integer keys (``pplab.keys``), as the generators
        write them; ``streams``: per rank, where each stream's ops sit
        (``schedules._common.Streams.runs``, kept as ``OpRow.stream_runs``)."""
        runs = repeat(None) if streams is None else streams
        return cls(name, P, M, tuple(stage_to_rank),
                   tuple(OpRow(row, r) for row, r in zip(rank_keys, runs)), V, copies)

    def rank_keys(self) -> tuple[tuple[int, ...], ...]:
        """Each rank's ops as integer keys (``keys.pair_key`` for a pair)."""
        return tuple(r.keys for r in self.ranks)

    def stream_runs(self) -> tuple | None:
        """Where each stream's ops sit per rank, as its generator wrote them, or None."""
        runs = tuple(r.stream_runs for r in self.ranks)
        return None if None in runs else runs


def _action_classes(row: OpRow) -> frozenset[int]:
    """The classes of the actions a row holds (both halves of a pair): read off the first
    key of each run where the generator said where its streams sit (a run is one class),
    else one C-level pass over the keys."""
    ks = row.keys
    if row.stream_runs is not None:
        out = set()
        for runs in row.stream_runs.values():
            for position, _, _, how in runs:
                k = ks[position]
                if how == keys.PAIR_FORWARD:
                    k = keys.halves(k)[0]
                elif how == keys.PAIR_BACKWARD:
                    k = keys.halves(k)[1]
                out.add(k & keys.CLASS_MASK)
        return frozenset(out)
    classes = set(map(and_, ks, repeat(PAIR_CLASS_MASK)))
    if max(classes, default=0) < PAIR_BASE:
        return frozenset(classes)
    out = set()
    for c in classes:
        out.update(keys.halves(c) if c >= PAIR_BASE else (c,))
    return frozenset(out)


def _backward_kinds(classes, num_stages: int) -> tuple:
    """Per stage, whether its backwards are split (run as an I then a W): True, False, or
    None where a stage runs both B's and I's (``Schedule.input_key`` then looks the one
    microbatch up). What ``input_key`` asks to name a B's or an I's input."""
    present = frozenset().union(*classes)
    out = []
    for s in range(num_stages):
        has_b, has_i = keys.class_of("B", s) in present, keys.class_of("I", s) in present
        out.append(None if has_b and has_i else has_i)
    return tuple(out)
