"""``pplab calibrate``: fit the simulator's costs to real runs on this machine and print them.

A few real ``pplab run`` jobs (``--on``, default 1f1b, interleaved, zbv and naive: every op
kind, two chunk sizes, one and two messages per op, one rank or all computing at once) are
measured ``--repeats`` times; ``pplab.sim.calibrate.fit_costs_and_cores`` turns their timelines
into ``Costs`` and the cores the ranks effectively shared. ``--out FILE`` writes them for
``pplab simulate --costs FILE``; ``--table`` also runs every built-in schedule at this P
and prints measured vs simulated. The ranks share this machine's cores, so the fit and the
table simulate them sharing as many as they effectively got (at most ``--cores``, default the
usable cores; none for emulated runs, which sleep; the number is written to the file too).
"""
from __future__ import annotations

import json
import sys

from . import add_cost_arguments, cost_values
from .checks import writable_file
from .run import MODEL_FLAGS, model_config


def add_arguments(p) -> None:
    p.add_argument("-P", type=int, default=2,
                   help="pipeline ranks (processes), ≥ 2: two keep the fit quick (default: 2)")
    p.add_argument("-M", type=int, default=8, help="microbatches per step (default: 8)")
    p.add_argument("--on", default="1f1b,interleaved,zbv,naive", metavar="NAMES",
                   help="comma-separated schedules to fit on (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=5, help="runs per schedule (default: 5)")
    p.add_argument("--steps", type=int, default=6,
                   help="steps per run; step 0 warms up, the least disturbed of the rest is timed "
                        "(default: 6)")
    p.add_argument("--table", action="store_true",
                   help="also run every built-in schedule at this P: measured vs simulated")
    p.add_argument("--emulate", action="store_true",
                   help="add emulated durations per op (seconds per chunk: --tf --tb --tw)")
    add_cost_arguments(p, "emulated seconds per chunk", tf=0.02, tb=0.04, tw=0.0)
    m = p.add_argument_group("model shape (defaults: the tiny CPU model)")
    for name, help_ in MODEL_FLAGS.items():
        m.add_argument(f"--{name}", type=str if name == "dtype" else int, default=None,
                       help=help_)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the fitted costs as JSON, read by pplab simulate --costs "
                        "(default: none)")
    p.add_argument("--cores", type=float, default=None,
                   help="CPU cores the ranks share (default: this machine's usable cores, "
                        "none with --emulate; 0: a core per rank); the fit finds how many "
                        "of them the ranks effectively got, down to half")
    p.add_argument("--pin", action="store_true",
                   help="bind each rank to a core of its own when P ≤ cores")
    p.add_argument("--statistic", choices=("min", "median"), default="min",
                   help="fit on and compare with each schedule's fastest repeat (min: other "
                        "jobs only slow runs down) or all repeats (median) (default: min)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="for the whole launch, seconds (default: 600)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _check(args) -> list[str]:
    """The schedule names to fit on; ValueError (exit 2) for anything wrong, before any run."""
    if args.P < 2:
        raise ValueError(f"calibration needs messages between ranks: -P must be ≥ 2, "
                         f"got {args.P}")
    if args.M < 1 or args.repeats < 1 or args.steps < 1:
        raise ValueError(f"-M, --repeats and --steps must be ≥ 1, got {args.M}, "
                         f"{args.repeats}, {args.steps}")
    if args.cores is not None and not args.cores >= 0:
        raise ValueError(f"--cores must be ≥ 0 (0: a core per rank), got {args.cores}")
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    if not args.emulate and (args.tf, args.tb, args.tw) != (0.02, 0.04, 0.0):
        raise ValueError("--tf/--tb/--tw only make sense with --emulate")
    writable_file("--out", args.out)
    from ..registry import make_schedule
    names = [n.strip() for n in args.on.split(",") if n.strip()]
    if not names:
        raise ValueError("--on needs at least one schedule name, e.g. --on 1f1b")
    return [make_schedule(n, args.P, args.M).name for n in names]    # ValueError names it


def main(args) -> int:
    names = _check(args)
    from ..sim.calibrate import costs_to_dict
    from ..runtime import RunError
    from ..runtime.calibration import calibrate, comparison, measure, runnable_schedules, \
        recorded_cores, table_text
    emulate = cost_values(args, "tf", "tb", "tw") if args.emulate else None
    progress = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    todo = runnable_schedules(args.P, args.M) if args.table else names
    todo += [n for n in names if n not in todo]
    try:
        measured = measure(todo, args.P, args.M, args.repeats, args.steps,
                           model=model_config(args), emulate=emulate,
                           timeout=args.timeout, progress=progress, pin=args.pin)
    except RunError as e:
        print(f"pplab: calibration run failed: {e}", file=sys.stderr)
        return 1
    available = recorded_cores(measured) if args.cores is None else (args.cores or None)
    costs, cores = calibrate(measured, names, cores=available, statistic=args.statistic)
    out = {"costs": costs_to_dict(costs), "cores": cores, "cores_available": available,
           "P": args.P, "M": args.M,
           "fitted_on": names, "repeats": args.repeats, "emulate": emulate,
           "pinned": args.pin, "statistic": args.statistic}
    rows = comparison(measured, costs, cores, args.statistic) if args.table else []
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    if args.json:
        print(json.dumps(dict(out, table=rows)))
        return 0
    print("calibrated costs (seconds): " + ", ".join(
        f"{k}={v * 1e3:.3f} ms" for k, v in out["costs"].items()))
    print(f"fitted on {', '.join(names)} at P={args.P}, M={args.M}, {args.repeats} repeat(s), "
          f"ranks sharing {'%.3g' % cores if cores else 'a core each, not'} cores"
          + (f" (effectively, of {available:g})" if cores else "")
          + (f"; written to {args.out} (pplab simulate --costs {args.out})" if args.out else ""))
    if rows:
        print(table_text(rows))
    return 0
