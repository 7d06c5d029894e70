"""Verdicts in the trusted process: a grade cell's hidden test is read, not run.

A source notebook's hidden test is one line, ``grade("check_x", answer, ..., P=3)``. The
trusted grader parses it (it comes from the gradebook, restored by nbgrader's
``OverwriteCells``, never from the student), draws the hidden cases, and runs the real
``check_x`` *here*, handing it remote handles for the student's functions: each call
crosses into the sandbox as data and comes back as data (:mod:`.wire`). Expected answers
and comparisons never exist in the process that runs student code, so nothing the
student's code does there (frame inspection, import hooks, patched graders, objects that
claim to equal anything) reaches a comparison.

A real-code task (exercises 06 and 07) measures losses and gradients by running the
student's code, so that cannot happen here: the kernel hands over only the functions'
source, the ranks run it in a fresh sandbox this process starts (:meth:`Remote.measure`),
each on its own inputs, and what they report is read strictly and compared here.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json

from ..exercises.hidden import draw_cases, seed_digest
from ..exercises.tasks import TASKS
from .untrusted.sandbox import SandboxError
from .untrusted.wire import decode, encode

HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
RANK_TIMEOUT = 60.0     # seconds the ranks of a real-code task may take together
SOURCE_CAP = 100_000    # characters of a function's source taken from the kernel


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

    def measure(self, kind: str, fns: dict, request: dict) -> list:
        """A real-code task's measurements, from nothing the student's kernel can patch:
        the kernel gives only its functions' source, as text; the ranks run in a fresh
        sandbox this trusted process starts, with the harness loaded first, and the
        caller reads their reports strictly (:func:`pplab.runtime.rank_data.read_results`)."""
        names = {}
        for role, f in fns.items():
            if not isinstance(f, Remote):
                raise StudentAnswerError(f"{role} is not a function yet: define it with def")
            names[role] = f.name
        sources = {role: _source_of(self.session, name) for role, name in names.items()}
        return _run_ranks(self.session, dict(request, sources=sources, names=names))


def _source_of(session, name: str) -> str:
    reply = session.ask({"op": "source", "name": name})
    if "error" in reply:
        raise StudentAnswerError(str(reply["error"])[:1500])
    text = reply.get("value")
    if not isinstance(text, str) or len(text) > SOURCE_CAP:
        raise StudentAnswerError(f"the source of {name} did not come back as text")
    return text


def _run_ranks(session, request: dict) -> list:
    """Start a fresh sandbox, have its (untouched) runner launch the ranks, close it."""
    box = session.fresh_sandbox()
    try:
        reply = box.request({"op": "ranks", "request": request, "timeout": RANK_TIMEOUT},
                            RANK_TIMEOUT + 60)
    except SandboxError as e:
        raise StudentAnswerError(f"the ranks could not finish: {e}") from None
    finally:
        box.close()
    if reply.get("timed_out"):
        raise StudentAnswerError(f"the ranks ran past {RANK_TIMEOUT:g} s and were stopped")
    if "error" in reply:
        raise StudentAnswerError(str(reply["error"])[:1500])
    return reply.get("ranks")


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
    """The real grader of task ``check`` (its row in the task table says where it is)."""
    return TASKS[check].grader()


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
    printed.write(f"hidden tests passed (seed digest {seed_digest(seed)}) ✓\n")
    return [{"output_type": "stream", "name": "stdout", "text": printed.getvalue()}]


def _with_text(printed, error: dict) -> list[dict]:
    text = printed.getvalue()
    return ([{"output_type": "stream", "name": "stdout", "text": text}] if text else []) + [error]


def _error(name: str, message: str) -> dict:
    return {"output_type": "error", "ename": name, "evalue": message[:4000],
            "traceback": [f"{name}: {message[:4000]}"]}
