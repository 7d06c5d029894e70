"""Every graded task is declared once, in ``pplab.exercises.tasks.TASKS``.

The notebooks' graded cells name only tasks of the table, the table names only tasks a
notebook grades, every grader reads its row (``@graded``), and no other module of pplab
names a task or a task's own block list: a second declaration anywhere fails here.
"""
import ast
import json
import re
from pathlib import Path

import pytest

import pplab.exercises
from pplab.exercises import guard
from pplab.exercises.tasks import TASKS
from pplab.grading.verdict import hidden_call

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "pplab" / "exercises" / "tasks.py"


def _graded_cells(folder: str):
    """(notebook, cell source) of every cell nbgrader scores."""
    for path in sorted((ROOT / folder).glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                yield path.stem, "".join(cell["source"])


def _called_checks(source: str) -> set[str]:
    return set(re.findall(r"\b(check_\w+)\(", source))


def test_the_table_holds_exactly_the_tasks_the_solutions_grade():
    graded = {}
    for notebook, source in _graded_cells("solutions"):
        call = hidden_call(source)
        assert call is not None, f"{notebook}: a graded cell has no hidden grade(...) line"
        check = call[0]
        assert check in TASKS, f"{notebook} grades {check!r}, which the task table lacks"
        assert _called_checks(source) == {check}, (
            f"{notebook}: the public check and the hidden grade line name different tasks")
        graded.setdefault(check, notebook)
    assert set(graded) == set(TASKS), f"rows no notebook grades: {set(TASKS) - set(graded)}"


def test_every_exercise_task_cell_checks_a_task_of_the_table():
    cells = list(_graded_cells("exercises"))
    assert len(cells) >= len(TASKS)
    for notebook, source in cells:
        checks = _called_checks(source)
        assert len(checks) == 1 and checks <= set(TASKS), (notebook, sorted(checks))


def test_each_grader_is_where_its_row_says_and_reads_its_row():
    for check, task in TASKS.items():
        fn = task.grader()
        assert fn is getattr(pplab.exercises, check), check
        assert fn.__module__ == f"pplab.{task.module}", check
        assert fn.__code__ is guard.graded(fn.__wrapped__).__code__, f"{check} is not @graded"
    assert set(TASKS) <= set(pplab.exercises.__all__)


def test_a_grader_the_table_lacks_fails_at_import():
    def check_something_new(answer):
        return True
    check_something_new.__module__ = "pplab.exercises.bubble"
    with pytest.raises(LookupError, match="no row of the task table"):
        guard.graded(check_something_new)
    misplaced = TASKS["check_puzzle"].grader().__wrapped__
    moved = type(misplaced)(misplaced.__code__, misplaced.__globals__, "check_inflight")
    with pytest.raises(LookupError, match="check_inflight is no row"):
        guard.graded(moved)


def _declarations():
    """Each task's name and each pattern of its own rows (blocks, answer key), as text."""
    names = set(TASKS)
    patterns = {p for t in TASKS.values() for p in t.blocks + t.answer_key}
    return names | patterns


def test_no_module_but_the_table_names_a_task_or_its_block_list():
    """A string naming a task (``hidden.TASKS``' keys were one) or one of a row's own
    patterns (``guard.ANSWER_KEYS``, a ``derive_without(...)`` list) outside the table is
    a second declaration."""
    declared = _declarations()
    found = []
    for path in sorted((ROOT / "pplab").rglob("*.py")):
        if path == TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in declared:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not found, "declared outside pplab/exercises/tasks.py:\n" + "\n".join(found)


def test_the_scan_finds_a_second_declaration(tmp_path):
    """The scan above is not blind: the old places' forms are caught."""
    declared = _declarations()
    old = ('TASKS = {"check_inflight": ("exercises.bubble", None)}\n'
           'ANSWER_KEYS = ("exercises.memory.step_bound",)\n'
           '@derive_without("partition.*")\ndef check_layer_placement(): ...\n')
    hits = [n.value for n in ast.walk(ast.parse(old))
            if isinstance(n, ast.Constant) and n.value in declared]
    assert hits == ["check_inflight", "exercises.memory.step_bound", "partition.*"]


def test_the_answer_keys_and_cuts_come_from_the_rows():
    assert set(guard.ANSWER_KEYS) == {k for t in TASKS.values() for k in t.answer_key}
    for check, task in TASKS.items():
        cut = set(guard.sandbox_cut(check))
        assert set(task.blocks) | set(guard.ANSWER_KEYS) <= cut, check
        assert (cut >= set(guard.always())) is not task.uses_library, check
