"""The schedule IR: actions, overlapped pairs, and a Schedule (placement + per-rank order).

Text form of an action is ``{stage}{kind}{microbatch}``: ``0F1`` is the forward of microbatch 1
through stage 0, ``3B0`` the full backward of microbatch 0 on stage 3. The number before the
kind is always the *stage*; which rank runs it is the schedule's placement. ``I`` is the
backward for inputs and ``W`` the backward for weights (zero-bubble schedules split ``B`` into
the two). An overlapped forward+backward pair, as DualPipe runs it, prints ``(0F3;5B1)``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

KINDS = ("F", "B", "I", "W")
KIND_NAMES = {"F": "forward", "B": "backward", "I": "backward (inputs)",
              "W": "backward (weights)", "FB": "overlapped forward+backward"}


@dataclass(frozen=True, order=True)
class Action:
    """One unit of work: a forward or (part of a) backward of one microbatch on one stage."""
    stage: int
    kind: str
    microbatch: int

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}; kinds are F, B, I, W")

    @property
    def parts(self) -> tuple["Action", ...]:
        return (self,)

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


@dataclass(frozen=True)
class Overlap:
    """A forward and a full backward run as one overlapped unit (DualPipe's F&B chunk)."""
    forward: Action
    backward: Action

    def __post_init__(self):
        if self.forward.kind != "F" or self.backward.kind not in ("B", "I"):
            raise ValueError("an overlapped pair is a forward then a backward, e.g. (0F3;5B1)")

    kind = "FB"

    @property
    def parts(self) -> tuple[Action, Action]:
        return (self.forward, self.backward)

    def __str__(self) -> str:
        return f"({self.forward};{self.backward})"


Op = Union[Action, Overlap]
_ACTION_RE = re.compile(r"^\s*(\d+)\s*([FBIW])\s*(\d+)\s*$")
_OVERLAP_RE = re.compile(r"^\s*\(([^;()]+);([^;()]+)\)\s*$")


def parse_op(text: str) -> Op:
    """Parse ``'0F1'`` or ``'(0F3;5B1)'`` into an Action or Overlap."""
    m = _OVERLAP_RE.match(text)
    if m:
        return Overlap(parse_op(m.group(1)), parse_op(m.group(2)))
    m = _ACTION_RE.match(text)
    if not m:
        raise ValueError(f"cannot read action {text!r}: expected stage, kind, microbatch "
                         "like '0F1', '3B0', '2W5' or an overlapped pair '(0F3;5B1)'")
    return Action(int(m.group(1)), m.group(2), int(m.group(3)))


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
    ranks: tuple[tuple[Op, ...], ...]
    virtual: int = 1
    copies: int = 1

    # ---- shape -------------------------------------------------------------------------
    @property
    def P(self) -> int:
        return self.num_ranks

    @property
    def M(self) -> int:
        return self.num_microbatches

    @property
    def V(self) -> int:
        return self.virtual

    @property
    def num_stages(self) -> int:
        return len(self.stage_to_rank)

    @property
    def stages_per_copy(self) -> int:
        return self.num_stages // self.copies

    @property
    def microbatches_per_copy(self) -> int:
        return self.num_microbatches // self.copies

    def stages_of_rank(self, rank: int) -> list[int]:
        return [s for s, r in enumerate(self.stage_to_rank) if r == rank]

    def copy_of(self, stage: int) -> int:
        return stage // self.stages_per_copy

    def position(self, stage: int) -> int:
        """Index of the stage inside its copy of the model (0 = holds the embedding)."""
        return stage % self.stages_per_copy

    def is_first(self, stage: int) -> bool:
        return self.position(stage) == 0

    def is_last(self, stage: int) -> bool:
        return self.position(stage) == self.stages_per_copy - 1

    def chunk_fraction(self, stage: int) -> float:
        """Share of one rank's layers (L/P) that this stage holds: 1/V when interleaved."""
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

    @property
    def num_actions(self) -> int:
        return sum(len(op.parts) for ops in self.ranks for op in ops)

    # ---- text ----------------------------------------------------------------------------
    def rank_texts(self) -> list[list[str]]:
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
