"""torch.distributed.pipelining's schedule text: CSV, one row per rank, one action per cell.

Cells are torch's ``_Action`` strings: ``0F1``, ``3I0``, ``2W5``, an overlapped pair
``(0F3;5B1)OVERLAP_F_B``, and in the lowered "compute_comms" form ``1SEND_F0`` / ``2RECV_F0``
/ ``2SEND_B0`` / ``1RECV_B0``, plus torch's ``{stage}REDUCE_GRAD`` after a stage's last
backward (where torch's runtime scales the gradients by 1/M; its own lowering adds it to a
"compute_only" schedule, a "compute_comms" one must carry it). Torch's stages form one
chain, so DualPipe's two model copies (``copies=2``) have no spelling there; everything else
in the registry does.
"""
from __future__ import annotations

import csv
import io
import re

from .ir import Comm, Item, Overlap, Schedule, parse_item
from .lower import lower

FORMATS = ("compute_only", "compute_comms")
_TORCH_ONLY = re.compile(r"^\s*\d+(REDUCE_GRAD|UNSHARD|RESHARD)\s*$")   # no pplab meaning


def cell(item: Item) -> str:
    """One item as torch prints it."""
    if isinstance(item, Overlap):
        return f"({item.forward};{item.backward})OVERLAP_F_B"
    return str(item)


def to_csv(schedule: Schedule, fmt: str = "compute_only") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if schedule.copies != 1:
        raise ValueError(f"{schedule.name} trains {schedule.copies} copies of the model; "
                         "torch's schedule format has one chain of stages and cannot express it")
    if fmt == "compute_only":
        rows = [[cell(x) for x in row] for row in schedule.ranks]
    else:
        rows = [_with_reduce_grad(row, schedule.M) for row in lower(schedule, "in-order")]
    return "".join(",".join(row) + "\n" for row in rows)


def _with_reduce_grad(row: list[Item], M: int) -> list[str]:
    """Cells of a lowered row, with ``{s}REDUCE_GRAD`` after stage s's M-th B or W."""
    done: dict[int, int] = {}
    out = []
    for x in row:
        out.append(cell(x))
        for a in () if isinstance(x, Comm) else x.parts:
            if a.kind in ("B", "W"):
                done[a.stage] = done.get(a.stage, 0) + 1
                if done[a.stage] == M:
                    out.append(f"{a.stage}REDUCE_GRAD")
    return out


def from_csv(text: str, *, name: str = "csv", stage_to_rank=None,
             num_microbatches: int | None = None) -> Schedule:
    """A Schedule from either CSV form: communication cells are dropped (``lower`` remakes
    them); the placement is read off the rows unless ``stage_to_rank`` is given."""
    rows = []
    for r, cells in enumerate(csv.reader(io.StringIO(text.strip("\n")))):
        ops = []
        for c in cells:
            if not c.strip() or _TORCH_ONLY.match(c):
                continue
            try:
                item = parse_item(c)
            except ValueError as e:
                raise ValueError(f"rank {r}: {e}") from None
            if not isinstance(item, Comm):
                ops.append(item)
        rows.append(ops)
    return Schedule.from_text(rows, stage_to_rank=stage_to_rank,
                              num_microbatches=num_microbatches, name=name)
