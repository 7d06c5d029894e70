"""The ``pplab`` command: ``simulate``, ``run``, ``search``, ``memory`` and ``plan`` mirror
the library for terminals and graders. Bad arguments exit with status 2 and one line on
stderr, never a traceback; every flag says its default in ``--help``.

Subcommands live next to what they drive (``pplab/cli/*.py``) and are imported only when
used, so ``pplab simulate`` never imports torch.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# subcommand -> module defining add_arguments(parser) and main(args) -> int
SUBCOMMANDS = {
    "simulate": ("pplab.cli.simulate", "simulate a schedule and print its timeline"),
    "run": ("pplab.cli.run", "run a schedule for real across torchrun processes"),
    "search": ("pplab.cli.search", "find a schedule under a cap on in-flight activations"),
    "memory": ("pplab.cli.memory", "per-stage memory and communication for TP×PP×DP"),
    "plan": ("pplab.cli.plan", "rank every TP×PP×DP layout of a model on N GPUs; export one"),
    "calibrate": ("pplab.cli.calibrate", "fit the simulator's costs to real runs on this machine"),
    "grade": ("pplab.cli.grade", "autograde a class's notebooks with nbgrader, write a CSV"),
    "classroom": ("pplab.cli.classroom", "set up a class on JupyterHub (init), start it (up)"),
}


#: the cost flags, declared once: what each means (``pplab.sim.Costs`` has the same fields)
COST_FLAGS = {
    "tf": "forward time per rank-share of layers",
    "tb": "full backward time (input grads + weight grads)",
    "tw": "weight-gradient part of tb",
    "tfb": "overlapped F+B pair",
    "comm": "latency between ranks",
    "fixed": "fixed overhead per op",
    "msg": "CPU time per message an op sends or receives across ranks",
}


def add_cost_arguments(p, unit: str = "", **defaults) -> None:
    """Add the cost flags a subcommand takes, each with its default (tfb=None: tf + tb)."""
    for name, default in defaults.items():
        shown = "tf + tb" if default is None else f"{default:g}"
        p.add_argument(f"--{name}", type=float, default=default,
                       help=COST_FLAGS[name] + (f", {unit}" if unit else "")
                       + f" (default: {shown})")


def cost_values(args, *names: str) -> dict:
    """The given cost flags' values, by ``Costs`` field name (tfb left out when not given)."""
    out = {n: getattr(args, n) for n in names}
    return {n: v for n, v in out.items() if not (n == "tfb" and v is None)}


class UsageError(Exception):
    """Raised for bad arguments; main() turns it into one stderr line and exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line instead of usage + traceback
        raise UsageError(message)


def build_parser(which: str | None = None) -> argparse.ArgumentParser:
    from .. import __version__
    parser = _Parser(prog="pplab", description="pipeline parallelism you can see and run")
    parser.add_argument("--version", action="version", version=f"pplab {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if which == name:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    which = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    try:
        args = build_parser(which).parse_args(argv)
        if args.command is None:
            raise UsageError(f"choose a command: {', '.join(SUBCOMMANDS)} (pplab CMD --help)")
        module = importlib.import_module(SUBCOMMANDS[args.command][0])
        return int(module.main(args) or 0)
    except UsageError as e:
        print(f"pplab: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # invalid P/M/V/layers etc.: the library's message is the answer
        print(f"pplab: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `pplab simulate ... --json | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

