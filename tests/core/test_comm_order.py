"""The message order for in-order transports (NCCL): every schedule's plan completes on the
strictest in-order model, and the gloo recipe (all receives up front) provably does not."""
import itertools

import pytest
from hypothesis import given, settings, strategies as st

from pplab.lower import (Message, check_in_order, in_order_plan, messages,
                              up_front_plan)
from pplab.ir import Schedule
from pplab.registry import NAMES, make_schedule
from pplab.sim import DeadlockError
from schedule_cases import valid_schedules


SCHEDULES = valid_schedules(Ps=(1, 2, 3, 4, 6, 8), Ms=(1, 2, 3, 4, 8, 16), Vs=(None, 2, 3))


@pytest.fixture(scope="module")
def plans():
    """Each schedule's in-order plan, made once for the tests that read it."""
    return [in_order_plan(s) for s in SCHEDULES]


@pytest.mark.slow
def test_every_generated_schedule_completes_in_order(plans):
    assert len(SCHEDULES) > 400 and {s.name for s in SCHEDULES} == set(NAMES)
    for s, plan in zip(SCHEDULES, plans):
        check_in_order(s, plan)


@pytest.mark.slow
def test_each_message_is_posted_once_per_side_in_one_order_per_pair(plans):
    for s, plan in zip(SCHEDULES, plans):
        all_msgs = {m for m, _, _ in messages(s)}
        for r in range(s.P):
            posted = [m for batch in plan[r] for m in batch]
            assert len(posted) == len(set(posted))
            assert set(posted) == {m for m in all_msgs if r in (m.src, m.dst)}
        for a, b in itertools.permutations(range(s.P), 2):   # FIFO: NCCL matches by order
            sent = [m for batch in plan[a] for m in batch if (m.src, m.dst) == (a, b)]
            received = [m for batch in plan[b] for m in batch if (m.src, m.dst) == (a, b)]
            assert sent == received, (s.name, s.P, s.M, a, b)


@pytest.mark.parametrize("name, P, M", [("gpipe", 2, 4), ("1f1b", 2, 8), ("1f1b", 4, 8),
                                        ("interleaved", 4, 8), ("zbv", 4, 8),
                                        ("dualpipev", 4, 8), ("dualpipe", 4, 8)])
def test_receives_posted_up_front_deadlock_in_order(name, P, M):
    # what gloo tolerates (tag matching, buffered sends) hangs an in-order transport
    s = make_schedule(name, P, M)
    with pytest.raises(DeadlockError, match="in-order transport deadlock: rank 0 waits on"):
        check_in_order(s, up_front_plan(s))


def test_checker_rejects_a_plan_that_runs_an_op_before_its_receive():
    s = make_schedule("1f1b", 2, 2)
    plan = in_order_plan(s)
    first = plan[1][0].pop(0)               # rank 1's activation for its first forward
    plan[1][1].insert(0, first)
    with pytest.raises(ValueError, match="runs 1F0 before posting the activation of microbatch 0"):
        check_in_order(s, plan)


def test_checker_rejects_a_send_before_its_data_exists():
    s = make_schedule("gpipe", 2, 2)
    plan = in_order_plan(s)
    m = Message("act", 1, 1, 0, 1)
    for batch in plan[0]:
        if m in batch:
            batch.remove(m)
    plan[0][0].append(m)
    with pytest.raises(ValueError, match="sends the activation of microbatch 1 .* before 0F1"):
        check_in_order(s, plan)


def test_student_schedule_gets_a_plan_too():
    s = Schedule.from_text(["0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"], name="student")
    plan = in_order_plan(s)
    check_in_order(s, plan)
    assert [str(m) for m in plan[1][0]] == ["activation of microbatch 0 for stage 1 (rank 0 → rank 1)"]


def test_deadlocking_schedule_has_no_plan():
    bad = Schedule.from_text(["0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"], num_microbatches=2)
    with pytest.raises(DeadlockError):
        in_order_plan(bad)


def _random_valid_schedule(rng, P, M, placement, split_backward):
    """A random order every rank could really run: repeatedly let a random rank run a random
    action whose inputs exist. Stages are placed by ``placement`` (stage → rank)."""
    S = len(placement)
    kinds = ("F", "I", "W") if split_backward else ("F", "B")
    done, rows = set(), [[] for _ in range(P)]

    def ready(stage, kind, m):
        if (stage, kind, m) in done:
            return False
        if kind == "F":
            return stage == 0 or (stage - 1, "F", m) in done
        if kind == "W":
            return (stage, "I", m) in done
        back = "I" if split_backward else "B"
        return (stage, "F", m) in done and (stage == S - 1 or (stage + 1, back, m) in done)

    todo = [(s, k, m) for s in range(S) for k in kinds for m in range(M)]
    while todo:
        options = [a for a in todo if ready(*a)]
        stage, kind, m = options[rng.randrange(len(options))]
        todo.remove((stage, kind, m))
        done.add((stage, kind, m))
        rows[placement[stage]].append(f"{stage}{kind}{m}")
    return Schedule.from_text(rows, stage_to_rank=placement, num_microbatches=M, name="random")


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(P=st.integers(1, 5), M=st.integers(1, 6), shape=st.sampled_from(["line", "loop", "v"]),
       split=st.booleans(), seed=st.integers(0, 10**6))
def test_random_valid_schedules_get_a_plan_that_cannot_hang(P, M, shape, split, seed):
    """Students write their own schedules: the plan must not hang on any valid order."""
    import random
    placement = {"line": list(range(P)),
                 "loop": [s % P for s in range(2 * P)],
                 "v": list(range(P)) + list(reversed(range(P)))}[shape]
    sched = _random_valid_schedule(random.Random(seed), P, M, placement, split)
    check_in_order(sched, in_order_plan(sched))
