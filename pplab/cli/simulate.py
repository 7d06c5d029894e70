"""``pplab simulate``: build a schedule, simulate it, print the grid and metrics (or JSON)."""
from __future__ import annotations

import json
import sys

from ..registry import NAMES, make_schedule
from ..simulate import Costs, simulate
from ..text import metrics_text, timeline_to_text
from . import add_cost_arguments, cost_values


COST_DEFAULTS = {"tf": 1.0, "tb": 2.0, "tw": 0.0, "tfb": None, "comm": 0.0, "fixed": 0.0,
                 "msg": 0.0}


def add_arguments(p) -> None:
    p.add_argument("--schedule", "-s", required=True, metavar="NAME",
                   help=f"one of: {', '.join(NAMES)}")
    p.add_argument("-P", type=int, required=True, help="pipeline ranks")
    p.add_argument("-M", type=int, required=True, help="microbatches per step")
    p.add_argument("-V", type=int, default=None, help="virtual stages per rank")
    add_cost_arguments(p, **COST_DEFAULTS)
    p.add_argument("--costs", metavar="FILE", default=None,
                   help="costs from a JSON file (pplab calibrate --out FILE), not the flags")
    p.add_argument("--cores", type=float, default=None,
                   help="the ranks share this many CPU cores (default: a core each, or the "
                        "number in the --costs file)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--plot", metavar="PNG", help="save the timeline drawing")
    p.add_argument("--trace", metavar="JSON", help="save a Chrome/Perfetto trace")


def result_dict(schedule, timeline) -> dict:
    return {"schedule": schedule.name, "P": schedule.P, "M": schedule.M, "V": schedule.V,
            "makespan": timeline.makespan, "bubble_fraction": timeline.bubble_fraction,
            "bubble_ratio": timeline.bubble_ratio,
            "bubble_rate_span": timeline.bubble_rate_span, "peak_inflight": timeline.peak_inflight,
            "busy": timeline.busy, "costs": timeline.meta.get("costs"),
            "cores": timeline.meta.get("cores"),
            "stage_to_rank": list(schedule.stage_to_rank),
            "ranks": schedule.rank_texts(),
            "events": [e.to_dict() for e in sorted(timeline.events,
                                                   key=lambda e: (e.start, e.rank))]}


def _costs(args) -> Costs:
    """The cost flags, or ``--costs FILE`` (then no cost flag may be given as well)."""
    if args.costs is None:
        return Costs(**cost_values(args, *COST_DEFAULTS))
    given = [f"--{k}" for k, d in COST_DEFAULTS.items() if getattr(args, k) != d]
    if given:
        raise ValueError(f"give --costs FILE or cost flags, not both ({', '.join(given)})")
    from ..calibrate import load_costs
    return load_costs(args.costs)


def main(args) -> int:
    schedule = make_schedule(args.schedule, args.P, args.M, args.V)
    costs = _costs(args)
    cores = args.cores
    if cores is None and args.costs is not None:
        from ..calibrate import load_cores
        cores = load_cores(args.costs)
    timeline = simulate(schedule, costs, cores=cores)
    if args.plot:
        from ..draw import draw_timeline
        draw_timeline(timeline).savefig(args.plot, dpi=110, bbox_inches="tight")
    if args.trace:
        from ..trace import write_chrome_trace
        write_chrome_trace(timeline, args.trace)
    if args.json:
        json.dump(result_dict(schedule, timeline), sys.stdout)
        print()
    else:
        print(schedule.to_text())
        print()
        print(timeline_to_text(timeline))
        print(metrics_text(timeline))
    return 0
