"""Real-code verdicts (exercises 06 and 07) from nothing the student can patch.

The trusted grader takes only the functions' source from the student's kernel, starts the
ranks itself in a fresh sandbox (the harness loaded first, each rank given only its own
stage and share of the batch, never the seed) and reads what they report strictly before
comparing. The fast tests hand a verdict results that are short, missing a rank or oddly
shaped and expect a fail with a reason. The slow ones grade notebooks in the real sandbox
(where the solutions score full marks and the stubs 0: test_grading.py): a submission that
patches every harness object its code can reach (the old collectors, the checks' measuring
and reading functions, the worker's report, torch.distributed, the module dict), at
definition time and at first call, with the real functions left as stubs, scores 0. Before
this design the kernel-side half of that attack (collectors rebuilt from the public
``build_stages``) gave 10/10 on 06.

On 07 one process holds both stages by the task's nature, so code that computes the
whole-batch gradient there is an answer, not an attack; the attack here forges the answer
from the seed (as the old collectors could), which the ranks are never given.
"""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from pplab.grading.untrusted import sandbox
from pplab.runtime import exercises, rank_data

ROOT = Path(__file__).resolve().parents[2]
NB06 = ROOT / "solutions" / "06_real_processes" / "06_real_processes.ipynb"
NB07 = ROOT / "solutions" / "07_bug_hunt" / "07_bug_hunt.ipynb"


# ---- fast: a verdict takes exactly what it asked for, or fails -----------------------------

class FakeRemote:
    """Stands where the trusted grader's handle stands; answers what a test forges."""

    remote = True

    def __init__(self, answer):
        self.answer, self.__name__, self.name = answer, "fn", "fn"

    def measure(self, kind, fns, request):
        return self.answer(kind, request)


def _honest(kind: str, request: dict) -> list:
    """What honest ranks would report: the reference, per rank, in the report's format."""
    out = []
    for rank, cases in enumerate(request["ranks"]):
        reports = []
        for case in cases:
            mods = case["modules"]
            grads = [{n: rank_data.tensor_data(torch.zeros(p["shape"])) for n, p in
                      m["params"].items()} for m in mods]
            last = kind.startswith("p2p") and rank == len(request["ranks"]) - 1
            reports.append({"loss": 0.5 if last else None, "modules": grads})
        out.append({"cases": reports})
    return out


def _fails(check, answer, match: str, **kw):
    fn = FakeRemote(answer)
    args = (fn, fn) if check is exercises.check_pipeline_step else (fn,)
    with pytest.raises(AssertionError, match=match):
        check(*args, cases=[3, 4], **kw)


def test_the_well_formed_forgery_is_read_then_judged_wrong():
    """Shapes right, numbers made up: read, compared, failed on the numbers."""
    _fails(exercises.check_stage_backward, _honest, "loss|gradient")
    _fails(exercises.check_loss_scaling, _honest, "gradient")


@pytest.mark.parametrize("check", [exercises.check_stage_forward, exercises.check_loss_scaling,
                                   exercises.check_dp_average, exercises.check_global_clip])
def test_zero_results_fail_closed(check):
    _fails(check, lambda kind, req: [], "0 ranks instead of")
    _fails(check, lambda kind, req: [{"cases": []} for _ in req["ranks"]],
           "0 cases instead of 2")


def test_a_missing_rank_or_case_fails_closed():
    full = _honest
    _fails(exercises.check_stage_backward, lambda k, r: full(k, r)[:1], "1 ranks instead of 2")
    _fails(exercises.check_pipeline_step,
           lambda k, r: [{"cases": rep["cases"][:1]} for rep in full(k, r)],
           "1 cases instead of 2")


def _mutate(change):
    def answer(kind, request):
        out = _honest(kind, request)
        change(out[0]["cases"][0])
        return out
    return answer


@pytest.mark.parametrize("change, match", [
    (lambda c: c["modules"][0].popitem(), "not the stage's"),
    (lambda c: c["modules"].append({}), "modules instead of"),
    (lambda c: next(iter(c["modules"][0].values())).update(shape=[1]), "expected"),
    (lambda c: next(iter(c["modules"][0].values())).update(dtype="torch.float64"), "expected"),
    (lambda c: next(iter(c["modules"][0].values()))["data"].pop(), "gradient values"),
    (lambda c: next(iter(c["modules"][0].values()))["data"].__setitem__(0, "1"), "not a float"),
    (lambda c: c.update(loss=1.0), "a loss came from a rank that has none"),
    (lambda c: c.update(extra=1), "not a loss and its modules"),
])
def test_an_odd_result_fails_closed_with_one_line(change, match):
    _fails(exercises.check_stage_backward, _mutate(change), match)


def test_the_last_rank_must_report_a_float_loss():
    def answer(kind, request):
        out = _honest(kind, request)
        out[1]["cases"][0]["loss"] = [1.0]
        return out
    _fails(exercises.check_stage_forward, answer, "the loss is a list")


def test_no_cases_asked_is_no_pass():
    with pytest.raises(AssertionError, match="no cases"):
        exercises.check_stage_forward(FakeRemote(_honest), cases=[])


def test_a_rank_is_handed_its_own_stage_and_share_only():
    """No rank's inputs let it compute the whole model's answer: rank 0 has stage 0 and the
    batch, rank 1 stage 1 and the targets; neither gets the seed."""
    request, expected = exercises.ranks_request("p2p-step", [11, 12])
    first, last = request["ranks"]
    assert all(set(c["modules"][0]["params"]) == {"0.weight", "0.bias"} for c in first)
    assert all(set(c["modules"][0]["params"]) == {"weight", "bias"} for c in last)
    assert all(c["y"] is None and c["x"] for c in first)
    assert all(c["x"] is None and c["y"] for c in last)
    assert "seed" not in json.dumps(request)
    assert [w["loss"] for w in (expected[0][0], expected[1][0])] == [False, True]


# ---- slow: notebooks graded in the sandbox ------------------------------------------------

GRADE = r'''import json, sys, tempfile
from pathlib import Path
import nbformat
from pplab.grading.untrusted import student_edition
from pplab.grading.execute import Session, plan_runs, _grade_check
from pplab.grading.untrusted.sandbox import Limits
from pplab.grading.verdict import judge
nb = nbformat.read(sys.argv[1], as_version=4)
cache, scores = Path(tempfile.mkdtemp()), {}
for cut, graded in plan_runs(nb):
    session = Session(student_edition.cached(cut, cache), 120, True, Limits())
    try:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if _grade_check(cell) is None:
                session.ask({"op": "execute", "code": cell.source})
            elif i in graded:
                out = judge(session, cell.source, int(sys.argv[2]))
                bad = [o.get("evalue", "") for o in out if o["output_type"] == "error"]
                scores[meta["grade_id"]] = [0 if bad else meta["points"], " ".join(bad)]
    finally:
        session.close()
print(json.dumps(scores))
'''


def _grade(nb, tmp_path: Path, name: str, seed: int = 4242) -> dict:
    """Grade cell id -> [score, reason], from a separate, time-bounded process."""
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    r = subprocess.run([sys.executable, "-c", GRADE, str(path), str(seed)], capture_output=True,
                       text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _with_answers(path: Path, answers: dict):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        task = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if task.endswith("-answer") and task[:-len("-answer")] in answers:
            cell.source = answers[task[:-len("-answer")]]
    return nb


def _needs_sandbox():
    why = sandbox.unavailable()
    if why:
        pytest.skip(why)


#: the patches, as a string so a function's own source carries them into a rank
PATCH = r"""
import sys, torch, torch.distributed as dist
mods = sys.modules
harness = [m for m in (mods.get("__main__"), mods.get("pplab.runtime.exercise_worker"))
           if m is not None and hasattr(m, "run_cases")]
ew = harness[0] if harness else None
ex = mods.get("pplab.runtime.exercises")
rd = mods.get("pplab.runtime.rank_data")
F = torch.nn.functional

def reference(seed, dims, batch):
    stages = ew.build_stages(seed, dims)
    x, y = ew.make_data(seed, batch, dims)
    loss = F.mse_loss(stages[1](stages[0](x)), y)
    loss.backward()
    return float(loss), stages

def seed_of(thing):
    return thing.get("seed", 0) if isinstance(thing, dict) else int(thing)

def collector(kind):
    def run(fns, cases):
        import random
        out = []
        for case in cases:
            rng = random.Random(seed_of(case))
            dims = [rng.randint(3, 10), rng.randint(4, 16), rng.randint(1, 4)]
            loss, stages = reference(seed_of(case), dims, rng.randint(2, 5))
            out.append([{"loss": loss, "grads": {n: p.grad.tolist() for n, p in
                         s.named_parameters()}} for s in stages])
        return out
    return run

def forged(modules, seed=0, batch=4, with_loss=False):
    shapes = [dict(m.named_parameters()) for m in modules]
    first = [p for p in shapes[0].values()][0]
    last = [p for p in shapes[-1].values()][0]
    dims = [first.shape[1], first.shape[0], last.shape[0]]
    loss, stages = reference(seed, dims, batch)
    pick = stages if len(modules) > 1 else [stages[0 if len(shapes[0]) and
                                             "0.weight" in shapes[0] else 1]]
    pick = (pick * len(modules))[:len(modules)]
    return {"loss": loss if with_loss else None,
            "modules": [{n: rd.tensor_data(p.grad) for n, p in s.named_parameters()}
                        for s in pick]}

def forged_cases(request, space, rank):
    cases = []
    for case in request["cases"]:
        modules = [ew.stage_module(m) for m in case["modules"]]
        batch = case.get("in_shape", [4])[0]
        cases.append(forged(modules, seed_of(case), batch, with_loss=bool(case.get("y"))
                            and "in_shape" in case))
    return {"cases": cases}

if ex is not None:
    if hasattr(ex, "COLLECTORS"):
        for kind in list(ex.COLLECTORS):
            ex.COLLECTORS[kind] = collector(kind)
    ex.read_results = lambda raw, expected: raw
    ex._fail = lambda msg: None
    ex.measure = lambda kind, fns, cases: [[{"loss": 0.0, "grads": [{}]}] * 2 for _ in cases]
for m in harness:
    m.run_cases = forged_cases
    m.__dict__["_report"] = lambda loss, modules: forged(modules, with_loss=loss is not None)
if rd is not None:
    rd.read_results = lambda raw, expected: raw
for name in ("send", "recv", "isend", "irecv", "barrier", "all_reduce"):
    setattr(dist, name, lambda *a, **k: None)
torch.allclose = lambda *a, **k: True
mods["pplab.runtime.rank_data"] = type(sys)("pplab.runtime.rank_data")
"""

AT_DEFINITION = '''@(lambda f: [exec({patch!r}, {{"__name__": "patch"}}), f][1])
def {name}({args}):
    raise NotImplementedError()
'''

AT_FIRST_CALL = '''def {name}({args}):
    exec({patch!r}, {{"__name__": "patch"}})
    return {back}
'''

SIGNATURES = {"stage_forward": "stage, x, in_shape", "stage_backward": "x, y, loss",
              "pipelined_grads": "stages, x, y, M", "pipelined_grads_uneven": "stages, x, y, M",
              "allreduce_grads": "replicas", "clip_pipeline_grads": "stages, max_norm"}

#: what a patched first call hands back, so the harness goes on to its (patched) report
BACK = {"stage_forward": "x, stage(x if x is not None else torch.zeros(in_shape))"}


def _attack(task_names: dict, styles: list) -> dict:
    return {task: style.format(patch=PATCH, name=name, args=SIGNATURES[name],
                               back=BACK.get(name, "None"))
            for (task, name), style in zip(task_names.items(), styles)}


TASKS06 = {"task1": "stage_forward", "task2": "stage_backward"}
TASKS07 = {"task1": "pipelined_grads", "task2": "pipelined_grads_uneven",
           "task3": "allreduce_grads", "task4": "clip_pipeline_grads"}


@pytest.mark.slow
def test_exercise_06_scores_the_work_not_the_patches(tmp_path):
    """Only the attack is graded here: the solutions' full marks and the stubs' zeros in
    the same sandbox are test_grading.py's instructor workflow (every assignment)."""
    _needs_sandbox()
    attack = _grade(_with_answers(NB06, _attack(TASKS06, [AT_DEFINITION, AT_FIRST_CALL])),
                    tmp_path, "attack")
    assert set(attack) == {"task1", "task2", "task3"}
    assert all(s == 0 and why for s, why in attack.values()), attack


@pytest.mark.slow
def test_exercise_07_scores_the_work_not_the_patches(tmp_path):
    _needs_sandbox()
    styles = [AT_DEFINITION, AT_FIRST_CALL, AT_DEFINITION, AT_FIRST_CALL]
    attack = _grade(_with_answers(NB07, _attack(TASKS07, styles)), tmp_path, "attack")
    assert len(attack) == 4 and all(s == 0 and why for s, why in attack.values()), attack


def test_the_attack_is_well_formed():
    """The attack's sources compile and define the names the graders look up (so a 0 it
    scores is the grader's doing, not a syntax error)."""
    for task, src in {**_attack(TASKS06, [AT_DEFINITION, AT_FIRST_CALL]),
                      **_attack(TASKS07, [AT_DEFINITION] * 4)}.items():
        compile(src, task, "exec")
