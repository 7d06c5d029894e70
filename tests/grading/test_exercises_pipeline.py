"""Exercise 04: the solution passes every grader, the unsolved exercise fails every grader cell,
and the graders reject typical wrong answers with a message that helps."""
from pathlib import Path

import nbformat
import pytest

from pplab.exercises.pipeline import (PARTITION_CASES, check_balanced_partition,
                                      check_hand_written_1f1b, check_real_run,
                                      check_send_recv_plan, reference_plan, steady_state_pairs)
from pplab.partition import balanced_split

ROOT = Path(__file__).resolve().parents[2]
NAME = "04_real_pipeline/04_real_pipeline.ipynb"


@pytest.fixture(autouse=True)
def unblocked(monkeypatch):
    """The wrong answers here are built from the library's own answers; switch the blocking
    off so what is tested is the grader's other messages (tests/grading/test_grading.py tests the
    blocking)."""
    from pplab.exercises import guard
    monkeypatch.setattr(guard, "call", lambda fn, *a, **k: fn(*a, **k))








def test_real_run_cells_are_skipped_by_nbval():
    """The exercise's torchrun cell must never run under nbval (CI has 2 cores and no GPU)."""
    raw = nbformat.read(ROOT / "exercises" / NAME, as_version=4)
    skip = [c for c in raw.cells if "run_schedule(" in c.source]
    assert skip and all(c.source.startswith("# NBVAL_SKIP") for c in skip)


def _dp(costs, k):
    return balanced_split(costs, k)


def test_partition_grader():
    assert check_balanced_partition(_dp)
    with pytest.raises(AssertionError, match="is not implemented yet"):
        check_balanced_partition(lambda c, k: (_ for _ in ()).throw(NotImplementedError("x")))

    def equal_layers(costs, k):      # the even split: ignores the costs
        from pplab.partition import even_split
        return even_split(len(costs), k)
    with pytest.raises(AssertionError, match="max stage cost"):
        check_balanced_partition(equal_layers)
    with pytest.raises(AssertionError, match="parts, expected"):
        check_balanced_partition(lambda c, k: _dp(c, k)[:-1])
    with pytest.raises(AssertionError, match="contiguous"):
        check_balanced_partition(lambda c, k: list(reversed(_dp(c, k))) if k > 1 else _dp(c, k))
    with pytest.raises(AssertionError, match="empty"):
        check_balanced_partition(lambda c, k: [range(0, 0)] + [range(0, len(c))] * (k - 1)
                                 if k > 1 else _dp(c, k))
    assert any(max(costs) > 2 for costs, _ in PARTITION_CASES)


def test_plan_grader():
    assert check_send_recv_plan(reference_plan)

    def gpipe_order(P, M, r):
        plan = reference_plan(P, M, r)
        return [p for p in plan if "F" in p[0]] + [p for p in plan if "B" in p[0]]
    with pytest.raises(AssertionError, match="warm-up forwards"):
        check_send_recv_plan(gpipe_order)

    def last_rank_sends(P, M, r):
        return [(op, rv, (r + 1, "act", int(op.split("F")[1])) if "F" in op else sd)
                for op, rv, sd in reference_plan(P, M, r)]
    with pytest.raises(AssertionError, match="your send is"):
        check_send_recv_plan(last_rank_sends)

    def swapped(P, M, r):
        return [(op, (rv[0], "grad" if rv[1] == "act" else "act", rv[2]) if rv else None, sd)
                for op, rv, sd in reference_plan(P, M, r)]
    with pytest.raises(AssertionError, match="your receive is"):
        check_send_recv_plan(swapped)


def test_steady_state_pairs():
    pairs = steady_state_pairs(4, 8, 1)
    assert pairs[0] == ("1F2", "1B0") and len(pairs) == 6
    assert steady_state_pairs(4, 8, 3) == []


def test_hand_written_grader_and_real_run_grader():
    ok = "0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3\n1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"
    assert check_hand_written_1f1b(ok).P == 2
    with pytest.raises(AssertionError, match="rank 0 runs"):
        check_hand_written_1f1b("0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3\n"
                                "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3")
    with pytest.raises(AssertionError, match="does not validate"):
        check_hand_written_1f1b("0F0 0F1 0B0 0F2 0B1 0F3 0B2\n1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3")

    class R:
        grad_max_rel_error, worst_parameter = 0.7, "head.weight"
    with pytest.raises(AssertionError, match="head.weight"):
        check_real_run(R())
    R.grad_max_rel_error = 3e-7
    assert check_real_run(R())


def test_posting_order_grader():
    from pplab.lower import in_order_plan, up_front_plan
    from pplab.exercises.pipeline import check_in_order_plan
    assert check_in_order_plan(in_order_plan)
    with pytest.raises(AssertionError, match="is not implemented yet"):
        check_in_order_plan(lambda s: (_ for _ in ()).throw(NotImplementedError("x")))
    # the gloo recipe: every receive up front
    with pytest.raises(AssertionError, match="like NCCL this plan hangs .* Hint: give every"):
        check_in_order_plan(up_front_plan)

    def drop_last_batch(s):
        return [row[:-1] for row in in_order_plan(s)]
    with pytest.raises(AssertionError, match="batches; it runs"):
        check_in_order_plan(drop_last_batch)

    def forget_one(s):
        plan = in_order_plan(s)
        for row in plan:
            for batch in row:
                if batch:
                    batch.pop()
                    return plan
        return plan
    with pytest.raises(AssertionError, match="exactly once; missing"):
        check_in_order_plan(forget_one)

    def strings(s):
        return [[[str(m) for m in batch] for batch in row] for row in in_order_plan(s)]
    with pytest.raises(AssertionError, match="not a Message"):
        check_in_order_plan(strings)

    def everything_first(s):       # sends too, before the data exists
        plan = in_order_plan(s)
        return [[[m for b in row for m in b]] + [[] for _ in row[1:]] for row in plan]
    with pytest.raises(AssertionError, match="sends the .* before"):
        check_in_order_plan(everything_first)
