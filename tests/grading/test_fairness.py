"""One comparison in two places (issue 29, item 7): for every graded task, the honest answer
in every shape a student may reasonably return gets full marks from the public check (the
check run on the raw answer in the student's kernel) and from the grade (the same check in
the trusted grader, on what came back across the wire: ``wire.encode`` in the sandbox, JSON,
``wire.decode``), and the two agree.

The honest answers are the solution notebooks' own cells. Shapes are applied to what each
of the student's functions returns (or to the answer itself, for an answer that is data).
The real-process tasks of exercises 06 and 07 compare measured tensors, not answers read
by ``normalise``; they are not in this table.
"""
from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from pplab.exercises.tasks import TASKS
from pplab.exercises.normalise import Unreadable, as_data, normalise
from pplab.grading.untrusted import wire
from pplab.grading.verdict import grader, hidden_call
from pplab.ir import Schedule, parse_op

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["01_bubble_and_1f1b", "02_schedules", "03_memory", "04_real_pipeline",
             "05_puzzles", "08_derivations"]
REAL_PROCESS = {c for c, task in TASKS.items() if task.module.startswith("runtime.")}

#: what each task's answer is, which decides the shapes it can honestly take
KIND = {
    "check_bubble_formulas": "real", "check_one_f_one_b_rank": "actions",
    "check_inflight": "count", "check_text_schedule": "rows",
    "check_layer_placement": "ints", "check_split_backward_schedule": "rows",
    "check_fixed_schedule": "rows", "check_p2p_messages": "count",
    "check_zero_bytes": "real", "check_layer_activations": "real",
    "check_peak_1f1b": "real", "check_layout_for_budget": "object",
    "check_balanced_partition": "parts", "check_send_recv_plan": "plan",
    "check_hand_written_1f1b": "rows", "check_in_order_plan": "postings",
    "check_puzzle": "rows", "check_derived_makespan": "real",
    "check_derived_bubble": "real", "check_derived_peak": "count",
}


def _gen(v):
    return (x for x in v)


def _actions(row):
    return [parse_op(t) for t in (row.split() if isinstance(row, str) else row)]


def _rows(v):
    return [ln for ln in v.strip().splitlines() if ln.strip()] if isinstance(v, str) else v


#: shape name -> kinds it applies to -> what it makes of an honest value
SHAPES = {
    "as written": lambda v: v,
    "tuple": lambda v: tuple(_rows(v)),
    "generator": lambda v: _gen(_rows(v)),
    "numpy array": lambda v: np.array(_rows(v)),
    "numpy 0-d": lambda v: np.array(v),
    "numpy scalar": lambda v: np.array(v)[()],
    "numpy float32 scalar": lambda v: np.float32(v),
    "torch float64": lambda v: torch.tensor(v, dtype=torch.float64),
    "torch float32": lambda v: torch.tensor(v, dtype=torch.float32),
    "torch int64": lambda v: torch.tensor(v, dtype=torch.int64),
    "Fraction": lambda v: Fraction(v),
    "Decimal": lambda v: Decimal(v),
    "one text": lambda v: " ".join(v) if not isinstance(v, str) else v,
    "pplab actions": lambda v: _actions(v),
    "rows of actions": lambda v: [_actions(r) for r in _rows(v)],
    "rows of tokens": lambda v: [r.split() for r in _rows(v)],
    "pplab Schedule": lambda v: Schedule.from_text(_rows(v)),
    "ops as actions": lambda v: [(parse_op(op), rv, sd) for op, rv, sd in v],
    "inner lists": lambda v: [[list(x) if isinstance(x, tuple) else x for x in t] for t in v],
    "tuples inside": lambda v: tuple(tuple(tuple(b) for b in row) for row in v),
    "ranges as pairs": lambda v: [(r.start, r.stop) for r in v],
    "numpy pairs": lambda v: np.array([(r.start, r.stop) for r in v]),
    "torch pairs": lambda v: torch.tensor([(r.start, r.stop) for r in v]),
}
BY_KIND = {
    "real": ["as written", "numpy 0-d", "numpy scalar", "torch float64", "Fraction",
             "Decimal"],
    "count": ["as written", "numpy 0-d", "numpy scalar", "numpy float32 scalar",
              "torch float64", "torch float32", "torch int64", "Fraction", "Decimal"],
    "ints": ["as written", "tuple", "generator", "numpy array", "torch int64",
             "torch float64"],
    "actions": ["as written", "tuple", "generator", "numpy array", "one text",
                "pplab actions"],
    "rows": ["as written", "tuple", "generator", "numpy array", "rows of actions",
             "rows of tokens", "pplab Schedule"],
    "parts": ["as written", "tuple", "generator", "ranges as pairs", "numpy pairs",
              "torch pairs"],
    "plan": ["as written", "tuple", "generator", "ops as actions", "inner lists"],
    "postings": ["as written", "tuple", "generator", "tuples inside"],
    "object": ["as written"],
}
#: a schedule whose placement is not one stage per rank cannot be read off its rows alone
NO_SCHEDULE = {"check_puzzle"}


def _solutions(name: str):
    """Each graded cell's hidden call, with the namespace the solution's cells built."""
    nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    space: dict = {"__name__": "student"}
    calls = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.metadata.get("nbgrader", {}).get("grade"):
            calls.append(hidden_call(cell.source))
        elif "NBVAL_SKIP" not in cell.source and not cell.source.startswith("points_so_far("):
            exec(compile(cell.source, f"<{name}>", "exec"), space)     # noqa: S102
    return [(c, space) for c in calls if c is not None]


def _table():
    rows = []
    for name in NOTEBOOKS:
        for (check, args, kwargs), space in _solutions(name):
            for shape in BY_KIND[KIND[check]]:
                if shape == "pplab Schedule" and check in NO_SCHEDULE:
                    continue
                rows.append(pytest.param(check, args, kwargs, space, shape,
                                         id=f"{check}[{args[0].id}]-{shape}"))
    return rows


def _across(value):
    """What the trusted side gets: encoded in the sandbox, sent as JSON, decoded."""
    return wire.decode(json.loads(json.dumps(wire.encode(value))))


class Wired:
    """The grade's handle on a student's function, in-process: arguments and answer cross
    the wire as they do between the trusted grader and the sandbox."""
    remote = True

    def __init__(self, fn):
        self.fn, self.__name__ = fn, fn.__name__

    def __call__(self, *args):
        return _across(self.fn(*_across(list(args))))


def _shaped(fn, shape):
    def answer(*args):
        return SHAPES[shape](fn(*args))
    answer.__name__ = fn.__name__
    return answer


def _answers(args, space, shape, trusted: bool):
    """The student's arguments to a check, in the shape; across the wire when trusted."""
    out = []
    for a in args:
        if not hasattr(a, "id"):
            out.append(a)
        elif callable(space[a.id]):
            fn = _shaped(space[a.id], shape)
            out.append(Wired(fn) if trusted else fn)
        else:
            value = SHAPES[shape](space[a.id])
            out.append(_across(value) if trusted else value)
    return out


def _verdict(check, args, kwargs, space, shape, trusted: bool):
    try:
        grader(check)(*_answers(args, space, shape, trusted), **kwargs)
    except AssertionError as e:
        return f"fails: {e}"
    return "full marks"


def test_the_table_covers_every_graded_task():
    graded = {c for name in NOTEBOOKS for (c, _, _), _ in _solutions(name)}
    assert graded == set(TASKS) - REAL_PROCESS
    assert set(KIND) == graded


@pytest.mark.parametrize("check,args,kwargs,space,shape", _table())
def test_public_check_and_grade_agree_with_full_marks(check, args, kwargs, space, shape):
    public = _verdict(check, args, kwargs, space, shape, trusted=False)
    graded = _verdict(check, args, kwargs, space, shape, trusted=True)
    assert (public, graded) == ("full marks", "full marks")


# ---- the normaliser itself ----------------------------------------------------------------

@pytest.mark.parametrize("value,want", [
    (np.int64(3), 3), (np.float32(0.5), 0.5), (np.bool_(True), True), (np.str_("0F0"), "0F0"),
    (np.array(2.5), 2.5), (np.arange(3), [0, 1, 2]), (Fraction(3, 1), 3),
    (Fraction(1, 4), 0.25), (Decimal("2"), 2), (Decimal("0.5"), 0.5),
    ((x for x in (1, 2)), [1, 2]), ({"a": np.int8(1)}.values(), [1]),
    ((np.int64(1), [np.float64(2.0)]), (1, [2.0])), (range(3), range(3)),
])
def test_normalise_reads_foreign_values_as_plain_data(value, want):
    got = normalise(value)
    assert got == want and type(got) is type(want)


def test_a_float64_tensor_keeps_its_precision_across_the_wire():
    t = torch.tensor([1 / 3, 2 / 3], dtype=torch.float64)
    back = _across(t)
    assert back.dtype == torch.float64 and torch.equal(back, t)
    assert as_data(back) == as_data(t) == [1 / 3, 2 / 3]
    assert _across(torch.tensor([1, 2])).dtype == torch.int64


def test_pplab_actions_cross_the_wire_as_actions():
    acts = [parse_op("0F0"), parse_op("1B2")]
    assert _across(acts) == acts


def test_an_endless_generator_is_read_bounded():
    def endless():
        while True:
            yield 1
    got = normalise(endless())
    assert isinstance(got, Unreadable) and "most that is read" in repr(got)


def test_a_fraction_counts_as_its_value_in_both_places():
    """Decided once: a Fraction is its value (before, the grade passed it and the public
    check failed it)."""
    ans = Fraction(1, 3)
    assert as_data(ans) == as_data(_across(ans)) == pytest.approx(1 / 3, rel=1e-15)


def test_a_wrong_answer_fails_in_both_places_whatever_its_shape():
    """Agreement holds for failures too: an off-by-one count fails both, in every shape."""
    def p2p_messages(P, M, V):
        return 2 * (P * V - 1) * M + 1
    for shape in BY_KIND["count"]:
        verdicts = {_verdict("check_p2p_messages", [_Name("p2p_messages")], {},
                             {"p2p_messages": p2p_messages}, shape, trusted)
                    for trusted in (False, True)}
        assert len(verdicts) == 1 and verdicts.pop().startswith("fails:"), shape


class _Name:
    def __init__(self, id):
        self.id = id


# ---- end to end: the real sandbox and the trusted verdict ---------------------------------

STUDENT = '''
import numpy as np
from decimal import Decimal

def one_f_one_b_rank(P, M, rank):                   # a generator
    warm = min(P - rank - 1, M)
    yield from (f"{rank}F{i}" for i in range(warm))
    for i in range(M - warm):
        yield f"{rank}F{warm + i}"
        yield f"{rank}B{i}"
    yield from (f"{rank}B{i}" for i in range(M - warm, M))

def layers_on_rank(L, P, V, r):                     # a numpy array
    S = P * V
    base, extra = divmod(L, S)
    sizes = [base + (s < extra) for s in range(S)]
    starts = np.cumsum([0] + sizes)
    return np.concatenate([np.arange(starts[s], starts[s + 1]) for s in range(r, S, P)])

def zero_bytes(psi, nd, stage):                     # a Decimal
    p, g, o = Decimal(2) * Decimal(psi), Decimal(2) * Decimal(psi), Decimal(12) * Decimal(psi)
    shard = {0: Decimal(0), 1: o, 2: o + g, 3: o + g + p}[stage]
    return p + g + o - shard + shard / nd

my_schedule = np.array(["0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
                        "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
                        "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"])
'''
E2E = [('grade("check_one_f_one_b_rank", one_f_one_b_rank)', "check_one_f_one_b_rank"),
       ('grade("check_layer_placement", layers_on_rank)', "check_layer_placement"),
       ('grade("check_zero_bytes", zero_bytes)', "check_zero_bytes"),
       ('grade("check_text_schedule", my_schedule, P=3, M=4)', "check_text_schedule")]


def test_honest_shapes_get_full_marks_through_the_real_sandbox(tmp_path):
    from pplab.exercises import (check_layer_placement, check_one_f_one_b_rank,
                                 check_text_schedule, check_zero_bytes)
    from pplab.grading.untrusted import student_edition
    from pplab.grading.execute import Session
    from pplab.grading.untrusted.sandbox import Limits, SandboxError
    from pplab.grading.verdict import judge
    space: dict = {"__name__": "student"}
    exec(STUDENT, space)                                                # noqa: S102
    check_one_f_one_b_rank(space["one_f_one_b_rank"])                   # the public checks
    check_layer_placement(space["layers_on_rank"])
    check_zero_bytes(space["zero_bytes"])
    check_text_schedule(space["my_schedule"], P=3, M=4)
    cut = sorted({p for _, c in E2E for p in getattr(grader(c), "blocked", tuple)()})
    library = student_edition.cached(tuple(cut), tmp_path / "edition")
    try:
        session = Session(library, 120, True, Limits())
    except (SandboxError, OSError) as e:
        pytest.skip(f"no sandbox here: {e}")
    try:
        out = session.ask({"op": "execute", "code": STUDENT})
        assert not [o for o in out.get("outputs", []) if o["output_type"] == "error"], out
        for line, _ in E2E:
            cell = f"### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS\n"
            got = judge(session, cell, seed=29)
            assert got[-1]["output_type"] == "stream", (line, got)
    finally:
        session.close()
