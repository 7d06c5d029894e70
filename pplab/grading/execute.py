"""nbgrader's Execute step, sandboxed: ``SandboxExecute`` stands where nbgrader's
``Execute`` stands in ``Autograde.autograde_preprocessors``.

The student's cells run in the sandbox's kernel, in order. A grade cell is never sent
there: at its place in the order the trusted grader judges it (:func:`.verdict.judge`)
and writes its outputs, which nbgrader's ``SaveAutoGrades`` then scores as usual.

A task whose honest answer may use more of the library than another's (the planner's
``estimate`` builds schedules; a derivation may not) gets its own run with its own
student edition: tasks are grouped by what their sandbox must cut (:func:`plan_runs`).
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from ..exercises.guard import always, sandbox_cut
from ..exercises.tasks import TASKS
from .untrusted import student_edition
from .untrusted.sandbox import Limits, Sandbox, SandboxError
from .verdict import hidden_call, judge


class Session:
    """One notebook run in one sandbox; after a failure every later request fails with the
    same reason (the kernel is gone)."""

    def __init__(self, library: Path, timeout: float, isolate: bool, limits: Limits):
        self.timeout, self.stopped = timeout, None
        self.library, self.isolate, self.limits = library, isolate, limits
        self.box = Sandbox(library, limits, isolate=isolate)

    def fresh_sandbox(self) -> Sandbox:
        """Another sandbox like this one's, that has run nothing yet: a real-code task's
        ranks run there, out of reach of what the notebook's kernel did."""
        return Sandbox(self.library, self.limits, isolate=self.isolate)

    def ask(self, req: dict) -> dict:
        if self.stopped:
            raise SandboxError(self.stopped)
        try:
            return self.box.request(req, self.timeout)
        except SandboxError as e:
            self.stopped = str(e)
            raise

    def close(self):
        self.box.close()


def _grade_check(cell) -> str | None:
    meta = cell.metadata.get("nbgrader", {})
    if cell.cell_type != "code" or not meta.get("grade"):
        return None
    call = hidden_call(cell.source)
    return call[0] if call else ""


def plan_runs(nb) -> list[tuple[tuple[str, ...], set[int]]]:
    """(what the sandbox cuts, which grade cells it judges) per run: the tasks that block
    the whole library share one run; a task that lets the library help gets its own."""
    strict, strict_cells, own = set(), set(), {}
    for i, cell in enumerate(nb.cells):
        check = _grade_check(cell)
        if check is None:
            continue
        if check not in TASKS:              # judged as an error: any run will do
            strict_cells.add(i)
            continue
        cut = sandbox_cut(check)
        if set(cut) >= _whole_library():
            strict |= set(cut)
            strict_cells.add(i)
        else:
            own.setdefault(cut, set()).add(i)
    runs = [(tuple(sorted(strict)), strict_cells)] if strict_cells else []
    return runs + [(cut, cells) for cut, cells in own.items()]


def _whole_library() -> set[str]:
    return set(always())


def _stopped_output(why: str) -> dict:
    return {"output_type": "error", "ename": "SandboxStopped", "evalue": why,
            "traceback": [f"SandboxStopped: not run — {why}"]}


class SandboxExecute(NbGraderPreprocessor):
    """Run the notebook in bubblewrap; judge its grade cells in this (trusted) process."""

    timeout = Integer(180, help="seconds a cell (or one graded call) may run").tag(config=True)
    isolate = Bool(True, help="False only for --no-sandbox: the kernel then runs as a "
                   "plain child process (still without the answer code)").tag(config=True)
    memory = Float(3.0, help="GiB of address space per sandboxed process").tag(config=True)

    def preprocess(self, nb, resources):
        seed = int(os.environ.get("PPLAB_GRADE_SEED", "0"))
        limits = Limits(memory=int(self.memory * (1 << 30)))
        cache = Path(os.environ.get("PPLAB_EDITION_CACHE") or tempfile.mkdtemp(
            prefix="pplab-edition-"))
        outputs: dict[int, list] = {}
        for n, (cut, graded) in enumerate(plan_runs(nb)):
            library = student_edition.cached(cut, cache)
            self._run(nb, library, graded, seed, limits, outputs, keep_cells=(n == 0))
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                cell.outputs = [nbformat.from_dict(o) for o in outputs.get(i, [])]
                cell.execution_count = None
        return nb, resources

    def _run(self, nb, library, graded, seed, limits, outputs, keep_cells: bool):
        session = Session(library, self.timeout, self.isolate, limits)
        last = max(graded, default=-1)
        try:
            for i, cell in enumerate(nb.cells):
                if i > last and not keep_cells:
                    break
                if cell.cell_type != "code":
                    continue
                if _grade_check(cell) is not None:
                    if i in graded:
                        outputs[i] = self._judge(session, cell, seed)
                    continue
                out = self._execute(session, cell)
                if keep_cells:
                    outputs[i] = out
        finally:
            session.close()

    def _judge(self, session, cell, seed):
        if session.stopped:
            return [_stopped_output(session.stopped)]
        start = time.monotonic()
        out = judge(session, cell.source, seed)
        self.log.info("graded %s in %.1f s", cell.metadata["nbgrader"]["grade_id"],
                      time.monotonic() - start)
        return out

    def _execute(self, session, cell):
        if session.stopped:
            return [_stopped_output(session.stopped)]
        try:
            reply = session.ask({"op": "execute", "code": cell.source})
        except SandboxError as e:
            return [_stopped_output(f"this cell {e}")]
        outputs = _clean(reply.get("outputs"))
        if reply.get("timed_out"):
            why = f"the cell ran past {reply['timed_out']:g} s and was interrupted"
            outputs = [o for o in outputs if o["output_type"] != "error"] + [
                {"output_type": "error", "ename": "CellTimeoutError", "evalue": why,
                 "traceback": [f"CellTimeoutError: {why}"]}]
        return outputs


TEXT_CAP = 250_000      # characters of one stream output kept (the kernel keeps 200,000)


def _cut(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n… {len(text) - cap} more characters of output dropped"


def _clean(outputs) -> list[dict]:
    """The sandbox's outputs as nbformat outputs: text and PNG only, sizes capped."""
    out = []
    for o in outputs if isinstance(outputs, list) else []:
        if not isinstance(o, dict):
            continue
        kind = o.get("output_type")
        if kind == "stream" and o.get("name") in ("stdout", "stderr"):
            out.append({"output_type": "stream", "name": o["name"],
                        "text": _cut(str(o.get("text", "")), TEXT_CAP)})
        elif kind == "display_data" and isinstance(o.get("data"), dict):
            data = {k: str(v)[:2_000_000] for k, v in o["data"].items()
                    if k in ("text/plain", "image/png")}
            if data:
                out.append({"output_type": "display_data", "data": data, "metadata": {}})
        elif kind == "error":
            name, value = str(o.get("ename", "Error"))[:200], str(o.get("evalue", ""))[:2000]
            out.append({"output_type": "error", "ename": name, "evalue": value,
                        "traceback": [f"{name}: {value}"]})
    return out[:50]
