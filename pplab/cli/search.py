"""``pplab search``: find a schedule under a cap on in-flight activations (one JSON object)."""
from __future__ import annotations

import json
import sys

from ..search import search
from ..simulate import Costs
from ..text import metrics_text, timeline_to_text
from . import add_cost_arguments, cost_values


def add_arguments(p) -> None:
    p.add_argument("-P", type=int, required=True, help="pipeline ranks")
    p.add_argument("-M", type=int, required=True, help="microbatches per step")
    p.add_argument("-V", type=int, default=1, help="stages per rank (2 also tries a V shape)")
    add_cost_arguments(p, tf=1.0, tb=2.0, tw=1.0, comm=0.0)
    p.add_argument("--stage-scale", default=None, metavar="A,B,...",
                   help="per-stage cost multipliers (P·V numbers), e.g. a heavy last stage")
    p.add_argument("--max-inflight", type=int, required=True, metavar="K",
                   help="cap on activations alive per rank, in stage-microbatches")
    p.add_argument("--budget-s", type=float, default=1.0, help="local-search time budget")
    p.add_argument("--seed", type=int, default=0, help="random seed of the local search")
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
    if args.budget_s < 0:
        raise ValueError(f"--budget-s must be ≥ 0, got {args.budget_s}")
    scale = _scale(args.stage_scale)
    if scale is not None and len(scale) != args.P * args.V:
        raise ValueError(f"--stage-scale needs P·V = {args.P * args.V} numbers, got {len(scale)}")
    costs = Costs(**cost_values(args, "tf", "tb", "tw", "comm"), stage_scale=scale)
    result = search(args.P, args.M, args.V, costs, args.max_inflight, args.budget_s, args.seed)
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
