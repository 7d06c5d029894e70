"""The trusted side's budget (issue 29, item 3): an answer that is cheap to send but costly
to read (a range of 10**17, a length far past the cap, nesting 10**4 deep, a huge text) is
refused by ``wire.decode`` before anything is built, quickly and in bounded memory; the task
it answers scores 0 with the reason, and the next task is graded as usual.

Each attack runs in a child process under a 1 GB address-space limit and a timeout, so the
test stays bounded even if the defence fails.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

MEMORY = 1 << 30
SECONDS = 60

PRELUDE = f"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({MEMORY}, {MEMORY}))
from pplab.grading.untrusted import wire
from pplab.exercises.normalise import Unreadable
start = time.process_time()
"""


def _bounded(code: str) -> dict:
    """Run ``code`` (which sets ``result``) in a child under the limits; its JSON report."""
    code = PRELUDE + textwrap.dedent(code) + (
        "\nprint(json.dumps({'result': result, 'cpu_seconds': time.process_time() - start}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=SECONDS)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


ATTACKS = {
    "range(10**17)": "{'__range__': [0, 10**17, 1]}",
    "a 10**8-long range claimed in 30 bytes": "{'__range__': [0, 10**8, 1]}",
    "ranges adding up past the cap": "[{'__range__': [0, 900_000, 1]}] * 4",
    "a list past the length cap": "[0] * 2_000_000",
    "a range with a 4000-digit end": "{'__range__': [0, int('9' * 4000), 1]}",
    "10**4-deep nesting": "__import__('functools').reduce(lambda a, _: [a], range(10**4), [])",
    "10**4-deep tuples": "__import__('functools').reduce("
                         "lambda a, _: {'__tuple__': [a]}, range(10**4), 0)",
    "a huge string": "'x' * (8 << 20)",
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_a_costly_answer_is_refused_before_it_is_built(attack):
    report = _bounded(f"""
        value = {ATTACKS[attack]}
        start = time.process_time()
        got = wire.decode(value)
        result = [isinstance(got, Unreadable), repr(got)]
    """)
    refused, why = report["result"]
    assert refused and why.startswith("refused: "), why
    # CPU seconds, which a busy machine does not stretch: building what was claimed would
    # take minutes of CPU, a refusal takes milliseconds
    assert report["cpu_seconds"] < 5, report


def test_json_nested_past_the_reader_is_a_refused_answer_not_a_crash():
    """``json.loads`` raises RecursionError on very deep nesting: the reply becomes a
    refused value, so the task scores 0 and the grader goes on."""
    report = _bounded("""
        line = b'{"value": ' + b'[' * 100_000 + b']' * 100_000 + b'}'
        reply = wire.read_reply(line)
        got = wire.decode(reply['value'])
        result = [isinstance(got, Unreadable), repr(got)]
    """)
    refused, why = report["result"]
    assert refused and "nested too deeply" in why


@pytest.mark.slow
def test_honest_answers_stay_under_the_caps():
    report = _bounded("""
        from pplab.registry import make_schedule
        s = make_schedule('dualpipe', 8, 32)
        got = wire.decode(json.loads(json.dumps(wire.encode(
            [s, list(range(100_000)), range(10**6), 'x' * 100_000]))))
        result = [g.__class__.__name__ for g in got]
    """)
    assert report["result"] == ["Schedule", "list", "range", "str"]


def test_a_refused_answer_scores_zero_with_the_reason_and_the_next_task_is_graded():
    """Through the trusted verdict: the sandbox (faked here) answers one task with
    range(10**17) and the next honestly."""
    report = _bounded("""
        from pplab.grading.verdict import judge

        class Session:
            def __init__(self, answer):
                self.answer = answer
            def ask(self, req):
                if req['op'] == 'value':
                    return {'callable': True}
                return {'value': self.answer(*wire.decode(req['args']))}

        def cell(call):
            return f'### BEGIN HIDDEN TESTS\\n{call}\\n### END HIDDEN TESTS\\n'

        def honest(P, M, V):
            return 0 if P == 1 else 2 * (P * V - 1) * M

        costly = Session(lambda *a: {'__range__': [0, 10**17, 1]})
        fair = Session(honest)
        first = judge(costly, cell('grade("check_layer_placement", layers_on_rank)'), 1)
        second = judge(fair, cell('grade("check_p2p_messages", p2p_messages)'), 1)
        result = [first[-1], second[-1]]
    """)
    first, second = report["result"]
    assert first["output_type"] == "error" and "refused: a range of" in first["evalue"]
    assert second["output_type"] == "stream" and "hidden tests passed" in second["text"]


DEEP_REPLIER = """
import sys
for line in sys.stdin:
    sys.stdout.write('{"value": ' + '[' * 100000 + ']' * 100000 + '}\\n')
    sys.stdout.flush()
"""


def test_the_sandbox_reads_a_reply_too_deep_for_json_as_a_refused_answer(tmp_path):
    """A kernel whose runner was patched answers JSON nested past the reader's recursion
    limit: the trusted side must not raise RecursionError (which ended the whole notebook's
    grading as "nbgrader could not grade it") but read a refused answer for that task."""
    from pplab.grading.untrusted import sandbox
    box = sandbox.Sandbox.__new__(sandbox.Sandbox)
    box.proc = subprocess.Popen([sys.executable, "-c", DEEP_REPLIER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    box._buf, box.errors, box.dir = b"", tmp_path / "err", tmp_path / "box"
    try:
        reply = box.request({"op": "call", "name": "f", "args": []}, 30)
    finally:
        box.proc.kill()
        box.proc.wait(timeout=10)
    assert "nested too deeply" in repr(wire_decode(reply["value"]))


def wire_decode(value):
    from pplab.grading.untrusted import wire
    return wire.decode(value)


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["Python's digit limit", "the limit lifted in the kernel"])
def test_a_5000_digit_answer_zeroes_only_its_own_task(tmp_path, limit):
    """A real sandboxed kernel answers one task with 10**5000: as is (Python refuses to write
    it as JSON) and with the digit limit lifted in the student's kernel (then the trusted
    side reads past Python's limit). Only that task scores 0; the kernel lives on and the
    next task is graded."""
    from pplab.grading.execute import Session
    from pplab.grading.untrusted import sandbox, student_edition
    from pplab.exercises.guard import sandbox_cut
    from pplab.grading.verdict import judge
    if sandbox.unavailable():
        pytest.skip(sandbox.unavailable())
    cut = {p for check in ("check_layer_placement", "check_p2p_messages")
           for p in sandbox_cut(check)}
    session = Session(student_edition.build(sorted(cut), tmp_path), 60, True, sandbox.Limits())
    lift = "sys.set_int_max_str_digits(0)" if "lifted" in limit else ""
    try:
        session.ask({"op": "execute", "code": f"import sys\n{lift}\n"
                     "def layers_on_rank(L, P, V, r):\n    return 10 ** 5000\n"
                     "def p2p_messages(P, M, V):\n"
                     "    return 0 if P == 1 else 2 * (P * V - 1) * M\n"})
        cell = "### BEGIN HIDDEN TESTS\ngrade({!r}, {})\n### END HIDDEN TESTS\n".format
        first = judge(session, cell("check_layer_placement", "layers_on_rank"), 1)
        second = judge(session, cell("check_p2p_messages", "p2p_messages"), 1)
    finally:
        session.close()
    assert first[-1]["output_type"] == "error", first
    why = "a whole number of 5001 digits" if lift else "cannot be sent as data"
    assert why in first[-1]["evalue"], first[-1]["evalue"]
    assert second[-1]["output_type"] == "stream", second
    assert "hidden tests passed" in second[-1]["text"] and session.stopped is None


PARSER_ATTACKS = {
    "a 65-byte range of numbers with one hash": (
        "check_layer_placement", "lambda L, P, V, r: range(0, (2**61 - 1) * 200_000, "
                                 "2**61 - 1)", "the model has only"),
    "a 1 MB row of '( ( ( …'": (
        "check_text_schedule", "['( ' * 500_000, '1F0 1B0']", "longer than any exercise"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(PARSER_ATTACKS), ids=list(PARSER_ATTACKS))
def test_a_verdict_on_a_costly_answer_costs_little(attack):
    """Answers that made one C call in a verdict quadratic (a set of colliding numbers, a
    regular expression over a long row) are refused on their length before any of it."""
    check, answer, why = PARSER_ATTACKS[attack]
    extra = ", 2, 2" if check == "check_text_schedule" else ""
    report = _bounded(f"""
        resource.setrlimit(resource.RLIMIT_CPU, (30, 30))
        from pplab import exercises
        answer = {answer}
        try:
            exercises.{check}(answer{extra})
            result = "passed"
        except AssertionError as e:
            result = str(e)
    """)
    assert why in report["result"], report
