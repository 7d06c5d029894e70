"""Generators, the validator, bad input and the text form."""
import pytest
from hypothesis import given, settings, strategies as st

from pplab import (NAMES, Action, Costs, Schedule, ScheduleError, check, make_schedule,
                   parse_op, simulate, validate)
from pplab.partition import balanced_split, even_split, stage_layers
from schedule_cases import valid_schedules


ALL = valid_schedules(Ps=(1, 2, 3, 4, 5), Ms=range(1, 13), Vs=(1, 2, 3))


def test_every_generator_has_valid_cases():
    assert {s.name for s in ALL} == set(NAMES)


@pytest.mark.parametrize("schedule", ALL, ids=lambda s: f"{s.name}-P{s.P}-M{s.M}-V{s.V}")
def test_generated_schedules_validate_and_run_once(schedule):
    validate(schedule)
    tl = simulate(schedule, tf=1, tb=2, tw=0.5, comm=0.1)
    ran = sorted(str(a) for e in tl.events for a in e.op.parts)
    want = sorted(str(a) for ops in schedule.ranks for op in ops for a in op.parts)
    assert ran == want and len(set(ran)) == len(ran)
    assert len(tl.events) == sum(len(r) for r in schedule.ranks)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(NAMES)), P=st.integers(1, 10), M=st.integers(1, 40),
       V=st.integers(1, 4), tf=st.floats(0.1, 5), tb=st.floats(0.1, 5), wshare=st.floats(0, 1),
       comm=st.floats(0, 2), fixed=st.floats(0, 1))
def test_property_valid_inputs_simulate_completely(name, P, M, V, tf, tb, wshare, comm, fixed):
    try:
        s = make_schedule(name, P, M, V)
    except ValueError as e:
        assert "try" in str(e) or "use" in str(e)     # every refusal suggests a fix
        return
    validate(s)
    tl = simulate(s, Costs(tf=tf, tb=tb, tw=tb * wshare, comm=comm, fixed=fixed))
    assert len(tl.events) == sum(len(r) for r in s.ranks)
    work = sum(tl.busy)
    assert tl.makespan * P >= work - 1e-9
    assert 0 <= tl.bubble_fraction < 1


BAD = [
    ("1f1b", 0, 4, 1, "P (pipeline ranks) must be at least 1"),
    ("1f1b", 4, 0, 1, "M (microbatches) must be at least 1"),
    ("interleaved", 4, 8, 0, "V (virtual stages per rank) must be at least 1"),
    ("1f1b", 4, 8, 2, "one stage per rank, got V=2"),
    ("gpipe", 4, 8, 3, "one stage per rank, got V=3"),
    ("naive", 2, 2, 2, "one stage per rank"),
    ("zb-h1", 2, 2, 2, "one stage per rank"),
    ("interleaved", 4, 6, 2, "multiple of P"),
    ("dualpipe", 3, 12, 1, "even number of ranks, got P=3; try P=2 or P=4"),
    ("dualpipe", 4, 9, 1, "M even"),
    ("dualpipe", 4, 6, 1, "M ≥ 2P"),
    ("dualpipe", 4, 8, 2, "got V=2"),
    ("dualpipev", 4, 7, 2, "M ≥ 2P"),
    ("dualpipev", 4, 8, 3, "2 stages per rank"),
    ("zbv", 4, 8, 1, "2 stages per rank"),
    ("zbv", 4, 8, 4, "2 stages per rank"),
    ("nosuch", 4, 8, 1, "unknown schedule"),
    ("1f1b", 2.5, 8, 1, "whole number"),
]


@pytest.mark.parametrize("name,P,M,V,msg", BAD)
def test_bad_input_message(name, P, M, V, msg):
    with pytest.raises(ValueError) as e:
        make_schedule(name, P, M, V)
    assert msg in str(e.value)


def test_suggested_values_are_valid():
    for name, P, M, V, _ in BAD:
        if name == "interleaved" and M % P:
            make_schedule(name, P, 8, V)     # message suggests M=4 or M=8
    assert make_schedule("dualpipe", 4, 8).M == 8
    assert make_schedule("zbv", 4, 8).V == 2 and make_schedule("dualpipev", 4, 8).V == 2


def test_text_roundtrip():
    for s in ALL[::7]:
        back = Schedule.from_text(s.rank_texts(), stage_to_rank=s.stage_to_rank,
                                  num_microbatches=s.M, copies=s.copies)
        assert back.ranks == s.ranks
    s = make_schedule("1f1b", 3, 4)
    assert Schedule.from_text(s.to_text().split("\n", 1)[1]).ranks == s.ranks
    assert str(parse_op("(0F3;5B1)")) == "(0F3;5B1)" and parse_op("2W5") == Action(2, "W", 5)


@pytest.mark.parametrize("text", ["F0", "0X1", "0F", "(0F1)", "abc"])
def test_parse_errors(text):
    with pytest.raises(ValueError, match="cannot read action|overlapped"):
        parse_op(text)


def rows(*texts):
    return Schedule.from_text(list(texts))


def test_validator_finds_deadlock_and_explains_it():
    # Rank 1 wants the backward of microbatch 1 before its forward of 1 came through.
    s = rows("0F0 0F1 0B0 0B1", "1F0 1B1 1F1 1B0")
    with pytest.raises(ScheduleError) as e:
        validate(s)
    msg = str(e.value)
    assert "rank 1 step 1: 1B1 needs 1F1, which this same rank runs later" in msg
    assert msg.endswith("deadlock")


def test_validator_cross_rank_cycle():
    s = rows("0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0")
    msg = check(s)
    assert "rank 0 step 1: 0B0 needs 1B0, which rank 1 runs only after waiting on 1F1" in msg
    assert "deadlock" in msg


@pytest.mark.parametrize("rows_,msg", [
    (["0F0 0F1 0B0", "1F0 1B0 1F1 1B1"], "0B1 never runs"),
    (["0F0 0F0 0B0", "1F0 1B0"], "0F0 runs 2 times"),
    (["0F0 0I0", "1F0 1B0"], "0W0 never runs"),
    (["0F0 0B0 0W0 0I0", "1F0 1B0"], "both B and I/W"),
    (["0F0 1B0", "1F0 0B0"], None),
])
def test_validator_structural(rows_, msg):
    if msg is None:   # a stage placed on two ranks is refused while parsing
        with pytest.raises(ValueError, match="appears on rank"):
            rows(*rows_)
        return
    assert msg in check(rows(*rows_))


def test_validator_wrong_rank_and_range():
    s = Schedule("x", 2, 1, (0, 1), ((Action(0, "F", 0), Action(0, "B", 0), Action(1, "F", 0)),
                                     (Action(1, "B", 0),)))
    assert "lives on rank 1" in check(s)
    s = Schedule("x", 1, 1, (0,), ((Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 3)),))
    assert "microbatch 3" in check(s)


def test_costs_reject_nonsense():
    with pytest.raises(ValueError, match="tw"):
        Costs(tb=1, tw=2)
    with pytest.raises(ValueError, match="≥ 0"):
        Costs(tf=-1)


def test_partition():
    assert [len(r) for r in even_split(10, 4)] == [3, 3, 2, 2]
    with pytest.raises(ValueError, match="at least 4 layers"):
        even_split(3, 4)
    s = make_schedule("interleaved", 2, 2, 2)
    assert [list(r) for r in stage_layers(s, 8)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError, match="only 3 layers"):
        stage_layers(s, 3)
    assert [list(r) for r in balanced_split([1, 1, 1, 3], 2)] == [[0, 1, 2], [3]]
