"""DualPipe's overlapped F&B pair, with its all-to-all made visible.

A chunk's forward and backward each have a compute part and an expert-parallel all-to-all
part (dispatch + combine). Run apart, a chunk costs both: ``F = Fc + Fa``, ``B = Bc + Ba``.
In DualPipe's pair the two computations still run one after the other on the compute SMs;
what overlaps is each chunk's all-to-all (on SMs set aside for communication) with the other
chunk's compute. Four chains bound the pair from below: the compute stream (``Fc + Bc``), the
communication stream (``Fa + Ba``), and each chunk's own work, whose all-to-all needs its
compute first (``Fc + Fa``, ``Bc + Ba``). DeepSeek-V3 cuts each chunk into small pieces and
interleaves the two chunks' pieces, which is how a pair gets close to that bound; pplab prices
it at the bound, ``max(Fc + Bc, Fa + Ba, Fc + Fa, Bc + Ba)``. So a pair is never shorter than
either half run alone, never longer than both back to back, and shorter than ``F + B`` by
exactly the communication it hides.

Here the all-to-all is folded into the op costs. ``pplab.streams`` runs the same model with
the all-to-all as communication of its own (``Link(ep_a2a=(fa, ba))`` with ``tf=fc, tb=bc``),
drawn on each rank's lane, and gives these figures event for event. Both leave out that the
SMs given to communication slow the compute.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkCosts:
    """Per chunk: forward compute ``fc``, backward compute ``bc`` (of which ``w`` is the
    weight-gradient part), and the all-to-all time of the forward ``fa`` and backward ``ba``."""
    fc: float
    bc: float
    fa: float = 0.0
    ba: float = 0.0
    w: float = 0.0

    @property
    def tf(self) -> float:
        return self.fc + self.fa

    @property
    def tb(self) -> float:
        return self.bc + self.ba

    @property
    def tfb(self) -> float:
        """The overlapped pair (``pair_time``)."""
        return pair_time(self.fc, self.bc, self.fa, self.ba)

    @property
    def hidden(self) -> float:
        """Communication the pair hides: F + B − F&B."""
        return self.tf + self.tb - self.tfb

    def costs(self, overlapped: bool = True) -> dict:
        """Keyword costs for ``simulate``: the pair overlapped, or run back to back."""
        return dict(tf=self.tf, tb=self.tb, tw=self.w,
                    tfb=self.tfb if overlapped else self.tf + self.tb)


def pair_time(fc: float, bc: float, fa: float = 0.0, ba: float = 0.0) -> float:
    """An overlapped F&B pair: the longest of its four chains. Compute runs back to back
    (``fc + bc``), so does communication (``fa + ba``), and each chunk's all-to-all waits for
    its own compute (``fc + fa``, ``bc + ba``)."""
    return max(fc + bc, fa + ba, fc + fa, bc + ba)


def tfb_range(tf: float, tb: float) -> tuple[float, float]:
    """The F&B values the pair model (and DualPipe's closed form) can mean: at least the
    longer half, at most both halves back to back."""
    return max(float(tf), float(tb)), float(tf) + float(tb)


def check_tfb(tf: float, tb: float, tfb: float) -> None:
    """Raise ``ValueError`` naming the range when ``tfb`` is outside it."""
    lo, hi = tfb_range(tf, tb)
    if float(tfb) < lo - 1e-12:
        raise ValueError(f"tfb = {float(tfb):g} is shorter than the pair's longer half "
                         f"max(tf, tb) = {lo:g}: both computations run on the same SMs, only "
                         f"communication hides; choose tfb between {lo:g} and {hi:g}")
    if float(tfb) > hi + 1e-12:
        raise ValueError(f"tfb = {float(tfb):g} is longer than tf + tb = {hi:g}: a pair never "
                         f"costs more than its halves run back to back; choose tfb between "
                         f"{lo:g} and {hi:g}")


def worst_idle(timeline) -> float:
    """Idle time of the idlest rank: makespan − that rank's busy time (never negative, for any
    costs; equals makespan − M·(tf+tb) only when every op costs its nominal time)."""
    return max((timeline.makespan - b for b in timeline.busy), default=0.0)


__all__ = ["ChunkCosts", "pair_time", "tfb_range", "check_tfb", "worst_idle"]
