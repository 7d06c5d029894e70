"""Verdicts in the trusted process: a grade cell's hidden test is read, not run.

A source notebook's hidden test is one line, ``grade("check_x", answer, ..., P=3)``. The
trusted grader parses it (it comes from the gradebook, restored by nbgrader's
``OverwriteCells``, never from the student), draws the hidden cases, and runs the real
``check_x`` *here*, handing it remote handles for the student's functions: each call
crosses into the sandbox as data and comes back as data (:mod:`.wire`). Expected answers
and comparisons never exist in the process that runs student code, so nothing the
student's code does there (frame inspection, import hooks, patched graders, objects that
claim to equal anything) reaches a comparison.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json

from ..exercises.hidden import TASKS, draw_cases
from .sandbox import SandboxError
from .wire import decode, encode

HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


class StudentAnswerError(AssertionError):
    """The student's code raised, or could not be reached, while answering a case."""


def hidden_call(source: str) -> tuple[str, list, dict] | None:
    """``(check, args, kwargs)`` of a grade cell's hidden ``grade(...)`` line: arguments
    that are names stay ``ast.Name`` (the student's variables), the rest are literals."""
    if HIDDEN[0] not in source:
        return None
    section = source.split(HIDDEN[0], 1)[1].split(HIDDEN[1], 1)[0]
    for node in ast.walk(ast.parse(section)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "grade" and node.args
                and isinstance(node.args[0], ast.Constant)):
            args = [_arg(a) for a in node.args[1:]]
            return node.args[0].value, args, {k.arg: _arg(k.value) for k in node.keywords}
    return None


def _arg(node):
    return node if isinstance(node, ast.Name) else ast.literal_eval(node)


class Remote:
    """A handle on one of the student's functions inside the sandbox. Each distinct call is
    made once; its first answer is final."""

    remote = True

    def __init__(self, session, name: str):
        self.session, self.name, self.__name__ = session, name, name
        self.answers: dict[str, object] = {}

    def __call__(self, *args, **kwargs):
        key = json.dumps([encode(list(args)), encode(kwargs)], sort_keys=True)
        if key not in self.answers:
            reply = self.session.ask({"op": "call", "name": self.name,
                                      "args": encode(list(args)),
                                      "kwargs": {k: encode(v) for k, v in kwargs.items()}})
            self.answers[key] = reply
        return _value(self.answers[key], f"{self.name}{_shown(args)}")

    def collect(self, kind: str, fns: dict, cases: list):
        names = {role: f.name for role, f in fns.items()}
        reply = self.session.ask({"op": "collect", "kind": kind, "names": names,
                                  "cases": encode(cases)})
        return _value(reply, ", ".join(names.values()))


def _shown(args) -> str:
    text = repr(tuple(args))
    return text if len(text) < 120 else text[:117] + "…)"


def _value(reply: dict, what: str):
    if reply.get("timed_out"):
        raise StudentAnswerError(f"{what} ran past {reply['timed_out']:g} s and was stopped")
    if "error" in reply:
        raise StudentAnswerError(f"{what} raised {str(reply['error'])[:1500]}")
    if "value" not in reply:
        raise StudentAnswerError(f"{what} gave no answer")
    return decode(reply["value"])


def _student_arg(session, node):
    if not isinstance(node, ast.Name):
        return node
    reply = session.ask({"op": "value", "name": node.id})
    if reply.get("callable"):
        return Remote(session, node.id)
    return _value(reply, node.id)


def grader(check: str):
    module, _ = TASKS[check]
    return getattr(importlib.import_module(f"pplab.{module}"), check)


def judge(session, source: str, seed: int) -> list[dict]:
    """The outputs a grade cell gets: the trusted grader's message, or an error output
    (nbgrader scores a code grade cell 0 when it has one)."""
    call = hidden_call(source)
    if call is None:
        return [_error("GradingError", "this grade cell has no hidden grade(...) line")]
    check, args, kwargs = call
    printed = io.StringIO()
    try:
        args = [_student_arg(session, a) for a in args]
        kwargs = {k: _student_arg(session, v) for k, v in kwargs.items()}
        cases = draw_cases(check, seed)
        if cases is not None:
            kwargs["cases"] = cases
        with contextlib.redirect_stdout(printed):
            grader(check)(*args, **kwargs)
    except SandboxError as e:
        return _with_text(printed, _error("SandboxStopped", f"not graded: {e}"))
    except Exception as e:                      # noqa: BLE001 — any failure scores 0
        name = "AssertionError" if isinstance(e, AssertionError) else type(e).__name__
        return _with_text(printed, _error(name, str(e)))
    printed.write(f"hidden tests passed (seed {seed}) ✓\n")
    return [{"output_type": "stream", "name": "stdout", "text": printed.getvalue()}]


def _with_text(printed, error: dict) -> list[dict]:
    text = printed.getvalue()
    return ([{"output_type": "stream", "name": "stdout", "text": text}] if text else []) + [error]


def _error(name: str, message: str) -> dict:
    return {"output_type": "error", "ename": name, "evalue": message[:4000],
            "traceback": [f"{name}: {message[:4000]}"]}
