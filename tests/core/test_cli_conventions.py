"""The ``pplab`` command follows its ecosystem: --version, help and defaults on every flag,
the same short flags and defaults across subcommands, bounds with one clear line, torch's
schedule names, schedule files in and out, output paths checked before any work, suggestions
never repeated."""
import argparse
import importlib
import re
import resource
import subprocess
import sys
from importlib import metadata

import pytest

import pplab
from pplab.cli import SUBCOMMANDS, build_parser, main
from pplab.registry import NAMES, TORCH_CLASSES, make_schedule, spec
from pplab.sim import simulate
from pplab.torch_format import to_csv


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "pplab.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def cpu_seconds(*args) -> tuple[subprocess.CompletedProcess, float]:
    """``cli(*args)`` and the CPU seconds it and everything it waited for used: a busy
    machine stretches the wall clock, not this."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = cli(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def one_line_error(r, text):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1 and text in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"pplab {pplab.__version__}"
    assert pplab.__version__ == metadata.version("pplab")


def _subparsers():
    for name in SUBCOMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        yield name, sub.choices[name]


#: defaults computed at run time, described in words in the help
COMPUTED = {("grade", "--source"), ("grade", "--jobs")}


@pytest.mark.parametrize("name,parser", list(_subparsers()), ids=list(SUBCOMMANDS))
def test_every_flag_has_help_and_shows_its_default(name, parser):
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        flag = max(action.option_strings, key=len) if action.option_strings else action.dest
        assert action.help, f"pplab {name} {flag} has no help"
        if not action.option_strings or action.required or action.nargs == 0:
            continue                       # positional, required or on/off: no default to show
        text = action.help % {"default": action.default}
        assert "(default: " in text, f"pplab {name} {flag}: help shows no default: {text!r}"
        literal = action.default not in (None, "") and (name, flag) not in COMPUTED
        if literal and isinstance(action.default, (int, float, str)):
            shown = text.split("(default: ", 1)[1]
            assert re.match(rf"{re.escape(f'{action.default:g}' if isinstance(action.default, float) else str(action.default))}\b", shown), \
                f"pplab {name} {flag}: default {action.default!r} but help says {shown!r}"


SHARED = ("-P", "-M", "-V", "--schedule", "--json", "--seed", "--timeout", "--steps")
#: differences on purpose, and why
DIFFERENT = {
    ("calibrate", "-P"): "two processes keep a fit quick; it needs ≥ 2",
    ("search", "-V"): "the stages per rank it searches: 1 unless asked",
    ("grade", "--timeout"): "seconds per notebook, not per job",
    ("calibrate", "--timeout"): "a launch of many runs",
    ("calibrate", "--steps"): "a warm-up step plus five to take the least disturbed",
    ("grade", "--seed"): "drawn at grading time: students must not know it",
    ("memory", "--schedule"): "a layout always has one: 1F1B, Megatron-LM's",
    ("simulate", "--schedule"): "none: --file may give the schedule instead",
    ("plan", "-M"): "a named layout's M follows from the global batch unless given",
    ("plan", "--schedule"): "a named layout's: 1F1B, or interleaved when -V > 1",
}


def test_shared_flags_mean_the_same_everywhere():
    """Each shared flag has the same spellings, destination and default in every subcommand
    (simulate stores None for -P/-M to tell them from --file, and applies run's 4 and 8)."""
    seen: dict[str, tuple] = {}
    for name, parser in _subparsers():
        for action in parser._actions:
            flag = next((f for f in action.option_strings if f in SHARED), None)
            if flag is None:
                continue
            default = action.default
            if name == "simulate" and flag in ("-P", "-M"):
                default = {"-P": 4, "-M": 8}[flag]
            if (name, flag) in DIFFERENT or action.required:
                default = "-"
            facts = (tuple(sorted(action.option_strings)), action.dest, default)
            first = seen.setdefault(flag, (name,) + facts)
            if "-" in (default, first[3]):
                facts, ref = facts[:2], first[1:3]
            else:
                ref = first[1:]
            assert facts == ref, f"{flag}: pplab {first[0]} has {first[1:]}, pplab {name} " \
                                 f"has {facts}"
    assert {"-P", "-M", "-V", "--schedule", "--json"} <= set(seen)


def test_simulate_defaults_P_and_M_like_run():
    r = cli("simulate", "-s", "1f1b")
    assert r.returncode == 0 and "P=4 M=8" in r.stdout.splitlines()[0]


@pytest.mark.parametrize("args,text", [
    (("simulate", "-s", "1f1b", "-P", "100000"), "P (pipeline ranks) must be at most 1024"),
    (("simulate", "-s", "1f1b", "-M", "100000"), "M (microbatches) must be at most 16384"),
    (("simulate", "-s", "interleaved", "-V", "1000"), "V (virtual stages per rank) must be at"),
    (("simulate", "-s", "1f1b", "-P", "1024", "-M", "16384"), "stage-microbatches"),
    (("search", "-P", "5000"), "must be at most 1024"),
    (("run", "-s", "1f1b", "-P", "100"), "more than 64"),
])
def test_bounds_one_line_quickly(args, text):
    r, cpu = cpu_seconds(*args)
    one_line_error(r, text)
    assert r.stdout == "" and cpu < 60, cpu     # building what was asked would take minutes


def test_torch_schedule_class_names_are_aliases():
    torch_sched = pytest.importorskip("torch.distributed.pipelining.schedules")
    for short in ("1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                  "ZBVZeroBubble", "DualPipeV"):
        cls = torch_sched.get_schedule_class(short).__name__
        ours = spec(short).name
        assert spec(cls).name == ours
        # the same order torch runs: its class is ours, or (InterleavedZeroBubble) ZB-H1's,
        # which interleaved-zb is at V = 1
        assert TORCH_CLASSES.get(ours, TORCH_CLASSES["zb-h1"]) == cls
    assert make_schedule("InterleavedZeroBubble", 4, 8, 1).ranks == \
        make_schedule("zb-h1", 4, 8).ranks
    r = cli("simulate", "-s", "ZBVZeroBubble", "-P", "4", "-M", "8")
    assert r.returncode == 0 and r.stdout.startswith("zbv: P=4 M=8 V=2")


# ---- schedule files --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_simulate_reads_back_its_own_grid(tmp_path, name):
    P, M = (4, 8)
    built = make_schedule(name, P, M)
    path = tmp_path / "s.txt"
    path.write_text(cli("simulate", "-s", name, "-P", str(P), "-M", str(M)).stdout)
    r = cli("simulate", "--file", str(path), "--json")
    assert r.returncode == 0, r.stderr
    import json
    d = json.loads(r.stdout)
    assert d["makespan"] == pytest.approx(simulate(built).makespan)
    assert d["ranks"] == built.rank_texts() and d["V"] == built.V


def test_csv_out_and_back_in(tmp_path):
    out = tmp_path / "zbv.csv"
    assert main(["simulate", "-s", "zbv", "-P", "4", "-M", "8", "--json", "--csv",
                 str(out)]) == 0
    assert out.read_text() == to_csv(make_schedule("zbv", 4, 8))
    r = cli("simulate", "--file", str(out))
    assert r.returncode == 0 and "makespan" in r.stdout


def test_dualpipe_csv_refused_before_any_work(tmp_path):
    out = tmp_path / "d.csv"
    r = cli("simulate", "-s", "dualpipe", "--csv", str(out))
    one_line_error(r, "trains 2 copies")
    assert not out.exists()


@pytest.mark.parametrize("text,msg", [
    ("rank 0: 0F0 0B0 0F1 0B1\nrank 1: 1B0 1F0 1F1 1B1\n", "— deadlock"),
    ("0F0 0F1 0B0\n1F0 1B0 1F1 1B1\n", "0B1 never runs"),
    ("0F0 0Q1\n", "0Q1"),
    ("", "empty; write one line of actions per rank"),
    ("0F0 0B0\n2F0 2B0\n", "stage 1 never appears"),
])
def test_bad_schedule_files_are_explained_in_one_line(tmp_path, text, msg):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    one_line_error(cli("simulate", "--file", str(path)), msg)


@pytest.mark.parametrize("text,msg", [
    ("0F0,0X1\n", "cannot read action '0X1'"),
    ("0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n", "— deadlock"),
    ("0F0,0B0\n2F0,2B0\n", "stage 1 never appears"),
])
def test_bad_torch_csv_files_are_explained_in_one_line(tmp_path, text, msg):
    """A torch-format CSV (one row per rank, comma-separated) gets the same one-line
    explanations as a text grid: a bad action, a deadlock, a missing stage."""
    path = tmp_path / "bad.csv"
    path.write_text(text)
    one_line_error(cli("simulate", "--file", str(path)), msg)


@pytest.mark.slow
def test_file_flags_that_contradict(tmp_path):
    one_line_error(cli("simulate", "--file", str(tmp_path / "none.txt")), "no such file")
    path = tmp_path / "g.txt"
    path.write_text("0F0 0B0\n")
    one_line_error(cli("simulate", "--file", str(path), "-P", "2"), "drop -P")
    one_line_error(cli("simulate", "--file", str(path), "-s", "1f1b"), "one of them")


# ---- output paths and checkpoints: checked before any work ----------------------------------
@pytest.mark.parametrize("args,text", [
    (("simulate", "-s", "1f1b", "--plot", "/nonexistent/x.png"), "folder /nonexistent does"),
    (("simulate", "-s", "1f1b", "--trace", "/proc/x.json"), "cannot write in /proc"),
    (("simulate", "-s", "1f1b", "--csv", "/"), "is a folder"),
    (("run", "-s", "1f1b", "--plot", "/nonexistent/x.png"), "--plot /nonexistent/x.png"),
    (("run", "-s", "1f1b", "--trace", "/proc/t.json"), "--trace"),
    (("run", "-s", "1f1b", "--load-checkpoint", "/nonexistent"), "no such folder"),
    (("run", "-s", "1f1b", "--save-checkpoint", "/proc/ck"), "cannot write"),
    (("calibrate", "--out", "/nonexistent/c.json"), "folder /nonexistent does not exist"),
])
def test_output_paths_are_checked_before_any_work(args, text):
    r, cpu = cpu_seconds(*args)
    one_line_error(r, text)
    assert cpu < 30, cpu                       # no torchrun was started


def test_a_folder_without_a_checkpoint_is_refused(tmp_path):
    one_line_error(cli("run", "-s", "1f1b", "--load-checkpoint", str(tmp_path)),
                   "not a pplab checkpoint")


def test_run_checks_before_importing_torch(monkeypatch, tmp_path):
    """`pplab run` refuses a bad --plot before it imports the runtime (and torch)."""
    code = ("import sys; from pplab.cli import main; "
            "rc = main(['run', '-s', '1f1b', '--plot', '/nonexistent/x.png']); "
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.split() == ["2", "False"], r.stderr


# ---- suggestions ------------------------------------------------------------------------------
@pytest.mark.slow
def test_no_suggestion_names_the_same_value_twice():
    repeated = re.compile(r"try (\w+)=(\d+) or \1=\2\b")
    for name in NAMES:
        for P in range(1, 9):
            for M in range(1, 21):
                for V in (None, 1, 2, 3):
                    try:
                        make_schedule(name, P, M, V)
                    except ValueError as e:
                        assert not repeated.search(str(e)), str(e)
    with pytest.raises(ValueError, match=r"try M=4$"):
        make_schedule("interleaved", 4, 2, 2)


def test_every_subcommand_module_declares_its_flags():
    for module, _ in SUBCOMMANDS.values():
        m = importlib.import_module(module)
        assert callable(m.add_arguments) and callable(m.main)
