"""docs/classroom.md and docs/teaching.md say what the tests do: every file classroom.md
quotes (``<!-- quote PATH -->`` before a fenced block) is that file verbatim, the kit's main
files are all quoted, and every command the two docs tell the instructor to type (a line of
a shell block, or an inline code span that starts with a command) is either one a test runs
(or CI runs before the tests) or checked as far as it can be here: ``pplab`` commands parse
with pplab's own argparse, ``nbgrader`` subcommands and their options exist, ``make``
targets exist in the Makefile, scripts and job files exist, system tools are the ones
named with arguments of the right form."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path

import pytest

import classroom_hub as C
import test_journey_local as local
import test_kit as kit

from pplab.cli import SUBCOMMANDS, UsageError, build_parser

ROOT = Path(__file__).resolve().parents[2]
CLASSROOM, TEACHING = ROOT / "docs" / "classroom.md", ROOT / "docs" / "teaching.md"
QUOTE = re.compile(r"<!-- quote (\S+) -->\n```\w*\n(.*?)```", re.S)
MUST_QUOTE = ("pplab/classroom/kit/classroom.ini", "pplab/classroom/kit/jupyterhub_config.py",
              "pplab/classroom/kit/jupyter/nbgrader_config.py",
              "pplab/classroom/kit/jupyter/jupyter_server_config.json",
              "pplab/classroom/kit/course/nbgrader_config.py",
              "pplab/classroom/kit/jupyter/student/labconfig/page_config.json",
              "pplab/classroom/kit/jupyter/student/jupyter_server_config.json")
#: what the tests run, as the docs write it (test_kit.py: the kit's course folder and the
#: repository's without a class; test_journey_local.py: the term in a real hub)
TESTED = {C.INIT_CMD, C.UP_CMD, kit.RELEASE_CMD, kit.FETCH_CMD, kit.SUBMIT_CMD,
          kit.COLLECT_CMD, kit.EXPORT_CMD, kit.DUEDATE_CMD, *kit.NO_CLASS_EXCHANGE_CMDS,
          local.COLLECT_CMD, local.GRADE_CMD, local.RELEASE_FEEDBACK_CMD, local.CERT_CMD,
          local.UP_TLS_CMD}
#: what .ci/run runs before any test (the test suite's own set-up)
BEFORE_TESTS = {"npm install -g configurable-http-proxy": ROOT / ".ci" / "run"}
#: first words of an inline code span that make it a command to type
COMMANDS = ("pplab", "nbgrader", "make", "python", "sysctl", "passwd", "chpasswd", "useradd",
            "srun", "salloc", "sbatch", "npm", "nvidia-smi", "mkdir", "chmod", "openssl")
#: commands of the system, not run by the tests (they change the kernel, the accounts, a
#: cluster, or need a GPU): the form of their arguments
SYSTEM = {"sysctl": r"(kernel\.[\w.]+=\d+)?", "passwd": r"(NAME)?", "chpasswd": "",
          "salloc": r"(-N\d+)?", "nvidia-smi": ""}
#: commands the docs show inline or in a block, which the extraction must find (a span it
#: missed would escape every check)
MUST_FIND = {"nbgrader export --to lms.csv", "make site", "python benchmarks/bench_grading.py",
             "passwd NAME", "chpasswd", "salloc -N2", "sbatch examples/slurm/cpu.sbatch",
             "srun -N2 pplab run --schedule 1f1b -P 4 -M 8",
             "pplab memory --preset tiny --pp 4 --schedule 1f1b -M 8 --mbs 2"}


def shell_lines(text: str) -> list[str]:
    """Every line of the doc's bash/sh blocks (a ``# comment`` line is not a command)."""
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S)
    return [ln.strip() for b in blocks for ln in b.splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def inline_commands(text: str) -> list[str]:
    """Inline code spans (outside fenced blocks, possibly across a line break) whose first
    word is a command, with whitespace made single."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose))
    return [span for span in spans if span.split(" ")[0] in COMMANDS]


def documented_commands() -> list[str]:
    return [cmd for doc in (CLASSROOM, TEACHING) for cmd in
            shell_lines(doc.read_text()) + inline_commands(doc.read_text())]


def make_targets() -> set[str]:
    """The Makefile's targets, from make's own database (nothing is run)."""
    r = subprocess.run(["make", "-npq", ".DEFAULT"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    return {m.group(1) for m in re.finditer(r"^([^\s#:=][^:=]*?):(?!=)", r.stdout, re.M)}


def pplab_problem(argv: list[str]) -> str | None:
    """None if ``pplab ARGV`` parses (or names a command: ``pplab classroom up``)."""
    if not argv or argv[0] not in SUBCOMMANDS:
        return f"no pplab subcommand {argv[:1]}"
    parser = build_parser(argv[0])
    try:
        parser.parse_args(argv)
        return None
    except (UsageError, SystemExit) as e:
        why = str(e) or "does not parse"
    sub = parser._subparsers._group_actions[0].choices[argv[0]]
    choices = {c for a in sub._actions if a.choices for c in a.choices}
    return None if all(t in choices for t in argv[1:]) else why


def nbgrader_problem(argv: list[str]) -> str | None:
    """None if ``nbgrader ARGV`` names a subcommand nbgrader has, with options it takes."""
    from nbgrader.apps import NbGraderApp
    if not argv or argv[0] not in NbGraderApp.subcommands:
        return f"nbgrader has no subcommand {argv[:1]}"
    app = NbGraderApp.subcommands[argv[0]][0]
    names = {n for k in (*app.aliases, *app.flags) for n in ([k] if isinstance(k, str) else k)}
    unknown = [t for t in argv[1:] if t.startswith("--") and t[2:].split("=")[0] not in names]
    return f"nbgrader {argv[0]} has no {unknown}" if unknown else None


def problem(cmd: str, targets: set[str]) -> str | None:
    """None if a test runs ``cmd``, or it checks out as far as it can without running."""
    useradd = re.escape(C.USERADD).replace(r"\{group\}", r"\S+").replace(r"\{name\}", r"\S+")
    if cmd in TESTED or re.fullmatch(useradd, cmd):
        return None
    if cmd in BEFORE_TESTS:
        return None if cmd in BEFORE_TESTS[cmd].read_text() else f"not in {BEFORE_TESTS[cmd]}"
    argv = shlex.split(cmd.replace("[", " ").replace("]", " "))
    tool, args = argv[0], argv[1:]
    if not args and tool != "chpasswd":
        return None                                 # a program named, not a command
    if tool == "srun":                              # srun's flags, then the command it runs
        while args and args[0].startswith("-"):
            args = args[1:]
        return problem(" ".join(args), targets) if args else "srun runs nothing"
    if tool == "pplab":
        return pplab_problem(args)
    if tool == "nbgrader":
        return nbgrader_problem(args)
    if tool == "make":
        missing = [t for t in args if t not in targets and "=" not in t]   # VAR=value
        return f"no make target {missing}" if missing else None
    if tool == "python":
        if args[:1] == ["-m"]:
            return None if find_spec(args[1]) else f"no module {args[1]}"
        return None if (ROOT / args[0]).is_file() else f"no script {args[0]}"
    if tool == "sbatch":
        missing = [a for a in args if not list(ROOT.glob(a))]
        return f"no job file {missing}" if missing else None
    if tool in SYSTEM:
        if not shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") and tool != "nvidia-smi":
            return f"no {tool} on this system"
        return None if re.fullmatch(SYSTEM[tool], " ".join(args)) else f"{tool} takes {args}"
    return "no test runs it, and nothing here checks it"


def test_every_quoted_file_is_the_file_itself():
    quotes = QUOTE.findall(CLASSROOM.read_text())
    assert {path for path, _ in quotes} >= set(MUST_QUOTE)
    for path, body in quotes:
        assert body == (ROOT / path).read_text(), f"docs/classroom.md quotes an old {path}"


def test_every_command_shown_is_tested_or_checked():
    found, targets = documented_commands(), make_targets()
    assert MUST_FIND <= set(found), MUST_FIND - set(found)
    bad = [f"{cmd!r}: {why}" for cmd in found if (why := problem(cmd, targets))]
    assert not bad, bad
    blocks = set(shell_lines(CLASSROOM.read_text()) + shell_lines(TEACHING.read_text()))
    assert TESTED <= blocks, TESTED - blocks             # and each tested command is shown
    assert {".venv/.installed", "site", "lab"} <= targets
    assert "test: $(STAMP)" in (ROOT / "Makefile").read_text()      # make test makes the venv


@pytest.mark.slow
def test_the_command_check_can_fail():
    targets = make_targets()
    for cmd in ("pplab run --no-such-flag", "pplab classroom down", "nbgrader publish",
                "nbgrader export --too x.csv", "make no-such-target", "python tools/nope.py",
                "python -m pplab.nope", "sbatch examples/slurm/nope.sbatch",
                "sysctl kernel.x", "salloc --whatever", "srun -N2 pplab nope",
                "rm -rf /", "npm install -g something-else"):
        assert problem(cmd, targets), cmd
    assert inline_commands("run `make site`, then `make\n   lab`; `pplab.cli` is a module") \
        == ["make site", "make lab"]


def test_the_tested_commands_are_the_ones_the_journey_runs():
    """The constants this file trusts are what the journey passes to the shell."""
    source = (Path(__file__).parent / "test_journey_local.py").read_text()
    assert "await in_terminal(teacher, cmd)" in source         # typed in the terminal
    assert all(name in source for name in ("COLLECT_CMD", "GRADE_CMD", "RELEASE_FEEDBACK_CMD"))
    assert "UP_TLS_CMD.split()[1:]" in source and "CERT_CMD.split()" in source
    kit_source = (Path(__file__).parent / "test_kit.py").read_text()
    for name in ("RELEASE_CMD", "FETCH_CMD", "SUBMIT_CMD", "COLLECT_CMD", "EXPORT_CMD",
                 "GRADE_CMD", "DUEDATE_CMD"):
        assert f"run({name}, " in kit_source, name
