"""docs/classroom.md and the term in docs/teaching.md say what the tests do: every file they
quote (``<!-- quote PATH -->`` before a fenced block) is that file verbatim, the kit's main
files are all quoted, and every command in their shell blocks is one a test runs (or CI
runs before the tests)."""
from __future__ import annotations

import re
from pathlib import Path

import classroom_hub as C
import test_journey_local as local
import test_kit as kit

ROOT = Path(__file__).resolve().parents[2]
CLASSROOM, TEACHING = ROOT / "docs" / "classroom.md", ROOT / "docs" / "teaching.md"
QUOTE = re.compile(r"<!-- quote (\S+) -->\n```\w*\n(.*?)```", re.S)
MUST_QUOTE = ("pplab/classroom/kit/classroom.ini", "pplab/classroom/kit/jupyterhub_config.py",
              "pplab/classroom/kit/jupyter/nbgrader_config.py",
              "pplab/classroom/kit/course/nbgrader_config.py",
              "pplab/classroom/kit/jupyter/student/labconfig/page_config.json",
              "pplab/classroom/kit/jupyter/student/jupyter_server_config.json")
#: what the tests run, as the docs write it
TESTED = {C.INIT_CMD, C.UP_CMD, kit.RELEASE_CMD, local.COLLECT_CMD, local.GRADE_CMD,
          local.RELEASE_FEEDBACK_CMD}
#: what .ci/run and make test run before any test (the test suite's own set-up)
CI = ROOT / ".ci" / "run"
BEFORE_TESTS = {"npm install -g configurable-http-proxy": CI,
                "make .venv/.installed": ROOT / "Makefile"}


def term_section() -> str:
    text = TEACHING.read_text()
    start = text.index("## A term, step by step")
    return text[start:text.index("\n## ", start + 1)]


def shell_lines(text: str) -> list[str]:
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip()]


def test_every_quoted_file_is_the_file_itself():
    quotes = QUOTE.findall(CLASSROOM.read_text())
    assert {path for path, _ in quotes} >= set(MUST_QUOTE)
    for path, body in quotes:
        assert body == (ROOT / path).read_text(), f"docs/classroom.md quotes an old {path}"


def test_every_command_shown_is_one_the_tests_run():
    lines = shell_lines(CLASSROOM.read_text()) + shell_lines(term_section())
    assert len(lines) >= 8
    useradd = re.compile(re.escape(C.USERADD).replace(r"\{group\}", r"\S+")
                         .replace(r"\{name\}", r"\S+") + "$")
    for line in lines:
        if line in BEFORE_TESTS:
            assert line in BEFORE_TESTS[line].read_text() or line == "make .venv/.installed"
            continue
        assert line in TESTED or useradd.match(line), f"no test runs: {line}"
    assert "test: $(STAMP)" in (ROOT / "Makefile").read_text()      # make test makes the venv
    assert TESTED <= set(lines)                        # and each tested command is shown


def test_the_tested_commands_are_the_ones_the_journey_runs():
    """The constants this file trusts are what the journey passes to the shell."""
    source = (Path(__file__).parent / "test_journey_local.py").read_text()
    assert "as_grader(hub, cmd.split())" in source
    assert all(name in source for name in ("COLLECT_CMD", "GRADE_CMD", "RELEASE_FEEDBACK_CMD"))
