"""Docs that cannot go stale: every marked figure in README.md and docs/*.md is the one in
docs/figures.json (which ``make bench`` rewrites), the computed ones are what the code
computes today, every repository path the docs name exists, every ``pplab …`` command they
show parses (argparse only: nothing runs), the lists of schedules, docs and lessons are
complete, and the README speaks of the project, never of its issues."""
import glob
import importlib
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

from pplab.cli import SUBCOMMANDS, UsageError, build_parser
from pplab.registry import NAMES

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
sys.path.insert(0, str(ROOT / "benchmarks"))
import figures  # noqa: E402

#: paths the docs name that exist only at run time (git-ignored)
RUN_TIME = {"notebooks/.pplab-progress.json"}
PATH = re.compile(r"(?<![\w/.-])((?:pplab|tests|docs|benchmarks|notebooks|solutions|exercises|"
                  r"tools|examples|\.ci)/[\w./*{}-]*[\w*/])")
TOP_FILES = re.compile(r"`((?:README|Makefile|pyproject|environment|nbgrader_config)"
                       r"[\w.]*)`")


def _lines(doc: Path):
    for i, line in enumerate(doc.read_text().splitlines(), 1):
        yield i, line


def repository_paths() -> list[tuple[str, int, str]]:
    out = []
    for doc in DOCS:
        for i, line in _lines(doc):
            for m in [*PATH.finditer(line), *TOP_FILES.finditer(line)]:
                out.append((doc.name, i, m.group(1).rstrip(".")))
    return out


def _exists(path: str) -> bool:
    pattern = path.replace("NN", "[0-9][0-9]").replace("_name", "_*")  # lesson NN, its name
    return path in RUN_TIME or (ROOT / path).exists() or bool(glob.glob(str(ROOT / pattern)))


def test_every_repository_path_in_the_docs_exists():
    paths = repository_paths()
    missing = [f"{d}:{i} {p}" for d, i, p in paths if not _exists(p)]
    assert len(paths) > 150 and not missing, missing


def commands() -> list[tuple[str, int, str, bool]]:
    """(doc, line, command, typed) for every ``pplab …`` in a shell block (typed: a user
    runs it as written) or an inline code span (may name a flag without its value)."""
    out = []
    for doc in DOCS:
        block, lang, pending = False, "", ""
        for i, line in _lines(doc):
            if line.lstrip().startswith("```"):
                block, lang = not block, line.strip().strip("`")
                continue
            if block and lang not in ("", "bash", "sh", "shell", "console"):
                continue
            if block:
                line, pending = pending + line, ""
                if line.rstrip().endswith("\\"):
                    pending = line.rstrip()[:-1] + " "
                    continue
            if block:      # a command line: pplab first (after a prompt or srun's flags)
                m = re.match(r"\s*(?:\$\s*)?(?:srun\b[^#]*?\s)?pplab (?=[a-z])([^#;|]*)", line)
                found = [m] if m else []
            else:
                found = [m for span in re.findall(r"`([^`]+)`", line) for m in
                         re.finditer(r"(?<![\w/.-])pplab (?=[a-z])([^#;|`]*)", span)]
            out += [(doc.name, i, "pplab " + m.group(1).strip(), block) for m in found]
    return out


def _alternatives(text: str) -> str:
    """A doc's shorthand made typeable: ``[--json]`` → ``--json``, ``a|b`` → ``a``."""
    text = text.replace("[", " ").replace("]", " ").replace("…", " ")
    return re.sub(r"(\S+)\|\S+", r"\1", text)


def _parse(command: str, typed: bool) -> str | None:
    """None if it parses, else why."""
    argv = shlex.split(_alternatives(command))[1:]
    if argv[0] not in SUBCOMMANDS:
        return f"no subcommand {argv[0]!r}"
    parser = build_parser(argv[0])
    try:
        parser.parse_args(argv)
        return None
    except UsageError as e:
        if typed:
            return str(e)
    sub = parser._subparsers._group_actions[0].choices[argv[0]]
    known = {f for a in sub._actions for f in a.option_strings}
    unknown = [t for t in argv[1:] if t.startswith("-") and t.split("=")[0] not in known]
    return f"unknown flags {unknown}" if unknown else None


def test_every_pplab_command_in_the_docs_parses():
    found = commands()
    bad = [f"{d}:{i} {c!r}: {why}" for d, i, c, typed in found
           if (why := _parse(c, typed)) is not None]
    assert len(found) > 50 and not bad, bad


def test_the_command_check_can_fail():
    assert _parse("pplab simulate --schedule 1f1b --no-such-flag", True)
    assert _parse("pplab planner --gpus 8", True)
    assert _parse("pplab plan --model tiny", True)           # --gpus is required
    assert _parse("pplab memory --zero", False) is None       # a flag named in prose
    assert _parse("pplab memory --zeroo", False)
    assert not _exists("pplab/commands_run.py") and _exists("tests/runtime/test_runtime_*.py")


def test_every_marked_figure_is_the_measured_one():
    data = figures.load()
    assert set(data) >= {"simulator", "search", "planner", "tests"}
    assert all(s["measured"] and s["by"] and s["machine"] for s in data.values())
    assert not figures.differences(data)
    marked = sum(len(figures.MARKER.findall(d.read_text())) for d in DOCS)
    assert marked >= 20


def test_a_stale_figure_is_found(tmp_path):
    data = figures.load()
    section = next(iter(data))
    key = next(iter(data[section]["values"]))
    data[section]["values"][key] = "not what the docs say"
    assert any(f"{section}.{key}" in d for d in figures.differences(data)) or \
        not any(f"fig {section}.{key}-->" in d.read_text() for d in DOCS)


@pytest.mark.slow
def test_computed_figures_are_what_the_code_computes_today():
    spec = importlib.util.spec_from_file_location("bench_planner",
                                                  ROOT / "benchmarks" / "bench_planner.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.answers() == figures.load()["planner_answers"]["values"]


@pytest.mark.slow
def test_the_search_table_is_what_the_search_finds_today():
    spec = importlib.util.spec_from_file_location("bench_search",
                                                  ROOT / "benchmarks" / "bench_search.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = figures.load()
    rows = bench.table(4, 8, int(data["search"]["values"]["evaluations"]))
    assert "\n" + "\n".join(rows) + "\n" == data["search_table"]["values"]["p4_m8"]


def test_the_readme_lists_are_complete_and_speak_of_the_project():
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"\bissues? \d+", readme, re.I), "the README names an issue"
    schedules = re.search(r"Schedules: (.*?)\. ", readme, re.S).group(1)
    assert set(re.findall(r"`([\w-]+)`", schedules)) == set(NAMES)
    for doc in (ROOT / "docs").glob("*.md"):
        assert f"docs/{doc.name}" in readme, f"the README does not list docs/{doc.name}"
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        assert f"`{nb.stem}`" in readme, f"the README's lessons table lacks {nb.stem}"
    for name in SUBCOMMANDS:
        assert f"pplab {name}" in readme, f"the README never shows pplab {name}"


def test_dotted_module_names_in_the_docs_import():
    """`pplab.memory.planner`, `pplab.runtime` …: the modules (or their attributes) exist."""
    bad = []
    for doc in DOCS:
        for i, line in _lines(doc):
            for name in re.findall(r"`(pplab(?:\.\w+)+)", line):
                parts = name.split(".")
                for cut in range(len(parts), 0, -1):
                    try:
                        if importlib.util.find_spec(".".join(parts[:cut])) is not None:
                            break
                    except ModuleNotFoundError:      # a module's attribute, not a module
                        continue
                obj = importlib.import_module(".".join(parts[:cut]))
                for attr in parts[cut:]:
                    if not hasattr(obj, attr):
                        bad.append(f"{doc.name}:{i} {name}")
                        break
                    obj = getattr(obj, attr)
    assert not bad, bad
