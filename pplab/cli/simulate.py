"""``pplab simulate``: build a schedule (or read one from a file), validate and simulate it,
print the grid and metrics (or JSON); ``--csv`` writes it in torch's schedule format."""
from __future__ import annotations

import json
import re
import sys

from ..registry import NAMES, make_schedule
from ..sim import Costs, simulate
from ..text import metrics_text, timeline_to_text
from . import UsageError, add_cost_arguments, cost_values
from .checks import DEFAULT_M, DEFAULT_P, add_pmv, readable_file, writable_file

COST_DEFAULTS = {"tf": 1.0, "tb": 2.0, "tw": 0.0, "tfb": None, "comm": 0.0, "fixed": 0.0,
                 "msg": 0.0}


def add_arguments(p) -> None:
    p.add_argument("--schedule", "-s", default=None, metavar="NAME",
                   help=f"one of: {', '.join(NAMES)}, or torch's class name, e.g. "
                        "Interleaved1F1B (default: none; give it or --file)")
    p.add_argument("--file", "-f", default=None, metavar="F",
                   help="a schedule written by hand: a text grid (one line per rank, "
                        "'rank 0: 0F0 0F1 0B0 ...', as this command prints it) or torch's CSV "
                        "(*.csv); validated, deadlocks explained (default: none)")
    add_pmv(p, unset=True)
    add_cost_arguments(p, **COST_DEFAULTS)
    p.add_argument("--costs", metavar="FILE", default=None,
                   help="costs from a JSON file (pplab calibrate --out FILE), not the flags "
                        "(default: none)")
    p.add_argument("--cores", type=float, default=None,
                   help="the ranks share this many CPU cores (default: a core each, or the "
                        "number in the --costs file)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--plot", metavar="PNG", default=None,
                   help="save the timeline drawing (default: none)")
    p.add_argument("--trace", metavar="JSON", default=None,
                   help="save a Chrome/Perfetto trace (default: none)")
    p.add_argument("--csv", metavar="OUT", default=None,
                   help="save the schedule as torch.distributed.pipelining's CSV "
                        "(default: none)")


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
    from ..sim.calibrate import load_costs
    return load_costs(args.costs)


HEADER = re.compile(r"^\s*(?P<name>[\w.-]+): P=(?P<P>\d+) M=(?P<M>\d+) V=(?P<V>\d+) "
                    r"placement stage->rank \[(?P<placement>[\d, ]*)\]\s*$")


def read_schedule_file(path: str):
    """A validated Schedule from a text grid or torch's CSV (ValueError in one line)."""
    from ..schedules._common import check_basics
    from ..validate import validate
    with open(path, encoding="utf-8") as f:
        text = f.read()
    name = re.sub(r"\W+", "-", path.rsplit("/", 1)[-1].rsplit(".", 1)[0]) or "file"
    if not text.strip():
        raise ValueError(f"--file {path}: empty; write one line of actions per rank, e.g. "
                         "'0F0 0F1 0B0 0B1'")
    try:
        if path.lower().endswith(".csv"):
            from ..torch_format import from_csv
            schedule = from_csv(text, name=name)
        else:
            schedule = _from_grid(text, name)
        check_basics(schedule.name, schedule.P, schedule.M, schedule.V)
        return validate(schedule)
    except ValueError as e:
        raise ValueError(f"--file {path}: {e}") from None


def _from_grid(text: str, name: str):
    """The grid ``pplab simulate`` prints (header line optional; the timeline after a blank
    line is ignored), or bare per-rank lines."""
    from ..ir import Schedule
    lines = [ln for ln in text.split("\n\n")[0].splitlines() if ln.strip()]
    head = HEADER.match(lines[0]) if lines else None
    if head is None:
        return Schedule.from_text(lines, name=name)
    placement = [int(x) for x in head["placement"].split(",") if x.strip()]
    P, V = int(head["P"]), int(head["V"])
    return Schedule.from_text(lines[1:], stage_to_rank=placement or None,
                              num_microbatches=int(head["M"]), name=name, virtual=V,
                              copies=max(1, len(placement) // (P * V)))   # DualPipe: 2


def _schedule(args):
    if (args.schedule is None) == (args.file is None):
        raise UsageError("give --schedule NAME or --file F (one of them)")
    if args.file is None:
        P = DEFAULT_P if args.P is None else args.P
        M = DEFAULT_M if args.M is None else args.M
        return make_schedule(args.schedule, P, M, args.V)
    given = [f for f, v in (("-P", args.P), ("-M", args.M), ("-V", args.V)) if v is not None]
    if given:
        raise UsageError(f"--file sets the schedule's size itself; drop {', '.join(given)}")
    return read_schedule_file(args.file)


def main(args) -> int:
    readable_file("--file", args.file)
    for flag in ("plot", "trace", "csv"):
        writable_file(f"--{flag}", getattr(args, flag))
    schedule = _schedule(args)
    costs = _costs(args)
    csv_text = None
    if args.csv:
        from ..torch_format import to_csv
        csv_text = to_csv(schedule)           # ValueError (DualPipe's two copies) before work
    cores = args.cores
    if cores is None and args.costs is not None:
        from ..sim.calibrate import load_cores
        cores = load_cores(args.costs)
    timeline = simulate(schedule, costs, cores=cores)
    if csv_text is not None:
        with open(args.csv, "w") as f:
            f.write(csv_text)
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
