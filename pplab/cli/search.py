"""``pplab search``: find a schedule under a cap on in-flight activations, reproducibly: a
budget of evaluations and a seed, never seconds."""
from __future__ import annotations

import json
import sys

from ..search import DEFAULT_EVALUATIONS, search
from ..sim import Costs
from ..text import metrics_text, timeline_to_text
from . import add_cost_arguments, cost_values
from .checks import add_pmv


def add_arguments(p) -> None:
    add_pmv(p, V_help="stages per rank; 2 also tries a V shape (default: 1)")
    add_cost_arguments(p, tf=1.0, tb=2.0, tw=1.0, comm=0.0)
    p.add_argument("--stage-scale", default=None, metavar="A,B,...",
                   help="per-stage cost multipliers (P·V numbers), e.g. a heavy last stage "
                        "(default: all 1)")
    p.add_argument("--max-inflight", type=int, default=None, metavar="K",
                   help="cap on activations alive per rank, in stage-microbatches "
                        "(default: P·V, what 1F1B's first rank holds)")
    p.add_argument("--evaluations", type=int, default=DEFAULT_EVALUATIONS, metavar="N",
                   help="local-search moves tried: the same N and --seed give the same "
                        "schedule on any machine (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed of the local search (default: 0)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _scale(text: str | None):
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--stage-scale takes numbers separated by commas, got {text!r}") \
            from None


def main(args) -> int:
    V = 1 if args.V is None else args.V
    if args.evaluations < 0:
        raise ValueError(f"--evaluations must be ≥ 0, got {args.evaluations}")
    scale = _scale(args.stage_scale)
    if scale is not None and len(scale) != args.P * V:
        raise ValueError(f"--stage-scale needs P·V = {args.P * V} numbers, got {len(scale)}")
    from ..schedules._common import check_basics
    check_basics("search", args.P, args.M, V)
    costs = Costs(**cost_values(args, "tf", "tb", "tw", "comm"), stage_scale=scale)
    result = search(args.P, args.M, V, costs, args.max_inflight, args.evaluations, args.seed)
    if args.json:
        json.dump(result.to_dict(), sys.stdout)
        print()
        return 0
    print(result.schedule.to_text())
    print()
    print(timeline_to_text(result.timeline))
    print(metrics_text(result.timeline))
    print(f"grown from: {result.seed}; built-ins (makespan, peak, fits the cap):")
    for b in result.baselines:
        print(f"  {b['name']:<15} {b['makespan']:>9.4g} {b['peak']:>4} "
              f"{'yes' if b['fits'] else 'no'}")
    return 0
