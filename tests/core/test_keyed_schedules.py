"""Schedules made as integer keys (``Schedule.from_keys``): the same schedules as before,
one representation (each rank an ``OpRow`` of keys) whoever built them, Action objects made
only when read, and nothing written into a schedule after it is built.

``tests/data/keyed_frozen.json`` holds a hash of every rank's action list for interleaved,
bfs-1f1b, zbv, dualpipe and dualpipev, generated from the Action-building generators of
5ee32fe, before they wrote keys (P 1..10, M 1..3P+2, every V each takes up to 3, and large
(P, M) up to 64/256). A speed-up must not move an action; a deliberate change regenerates
the file (``python tests/core/test_keyed_schedules.py``) and says why in its commit.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import pickle

import pytest

from pplab import NAMES, make_schedule, simulate
from pplab import keys
from pplab.ir import Action, OpRow, Overlap, Schedule, op_of_key
from pplab.keys import key_of as key
from pplab.keys import pair_key
from pplab.schedules._common import Streams
from pplab.timeline import Event, Timeline

DATA = pathlib.Path(__file__).parent.parent / "data" / "keyed_frozen.json"
KEYED = ("interleaved", "bfs-1f1b", "zbv", "dualpipe", "dualpipev")
LARGE = ((16, 64), (32, 128), (64, 256))


def cases() -> list[tuple[str, int, int, int]]:
    out = []
    for name in KEYED:
        Vs = (1, 2, 3) if name in ("interleaved", "bfs-1f1b") else (2,) if "v" in name else (1,)
        out += [(name, P, M, V) for P in range(1, 11) for M in range(1, 3 * P + 3) for V in Vs]
        out += [(name, P, M, Vs[-1] if len(Vs) == 1 else 2) for P, M in LARGE]
    return out


def fingerprint(name: str, P: int, M: int, V: int) -> str:
    """sha256 of the rank lists (one line per rank, actions by their text), or the error."""
    try:
        s = make_schedule(name, P, M, V)
    except ValueError as e:
        return f"ValueError: {e}"
    text = "\n".join(" ".join(str(op) for op in ops) for ops in s.ranks)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def label(name, P, M, V) -> str:
    return f"{name} P={P} M={M} V={V}"


@pytest.mark.slow
def test_keyed_generators_build_the_schedules_they_built_before():
    frozen = json.loads(DATA.read_text())
    assert set(frozen) == {label(*c) for c in cases()}
    changed = [label(*c) for c in cases() if fingerprint(*c) != frozen[label(*c)]]
    assert not changed


@pytest.mark.parametrize("name", KEYED)
def test_a_schedule_has_one_representation_and_nothing_is_written_into_it(name):
    s = make_schedule(name, 4, 8)
    assert type(s) is Schedule and all(type(r) is OpRow for r in s.ranks)
    before = dict(vars(s))
    tl = simulate(s, tf=1, tb=2, tw=1)
    tl.makespan, tl.peak_inflight, tl.bubble_rate_span, tl.events
    assert vars(s) == before and set(vars(s)) == set(before)
    plain = Schedule(s.name, s.P, s.M, s.stage_to_rank, [list(ops) for ops in s.ranks], s.V,
                     s.copies)
    assert all(type(r) is OpRow for r in plain.ranks) and plain.ranks == s.ranks
    assert plain == s and s == plain and hash(plain) == hash(s) and not (plain != s)
    other = dataclasses.replace(plain, name="other")
    assert other != s and s != other
    assert pickle.loads(pickle.dumps(s)) == s
    assert dataclasses.replace(s, name="renamed").ranks == s.ranks
    assert Schedule.from_dict(s.to_dict()) == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.ranks = ()
    with pytest.raises(AttributeError):
        s.ranks[0].keys = ()


def test_a_row_reads_as_its_ops_and_refuses_what_keys_cannot_hold():
    row = OpRow.of_ops([Action(0, "F", 0), Overlap(Action(0, "F", 1), Action(3, "B", 0))])
    assert list(row) == [Action(0, "F", 0), Overlap(Action(0, "F", 1), Action(3, "B", 0))]
    assert row[1] == Overlap(Action(0, "F", 1), Action(3, "B", 0)) and len(row) == 2
    assert row[:1] == (Action(0, "F", 0),) and Action(0, "F", 0) in row
    assert row == (Action(0, "F", 0), Overlap(Action(0, "F", 1), Action(3, "B", 0)))
    with pytest.raises(ValueError, match="microbatches 0..1048575"):
        Schedule("x", 1, 1, (0,), ((Action(0, "F", -1),),))
    with pytest.raises(TypeError, match="actions and overlapped pairs"):
        Schedule("x", 1, 1, (0,), (("0F0",),))


@pytest.mark.parametrize("name", NAMES)
def test_keys_round_trip_for_every_schedule(name):
    s = make_schedule(name, 4, 8)
    again = Schedule.from_keys(s.name, s.P, s.M, s.stage_to_rank, s.rank_keys(), s.V, s.copies)
    assert again == s and again.ranks == s.ranks
    assert all(type(op) in (Action, Overlap) for ops in again.ranks for op in ops)


def test_a_timeline_has_one_storage_and_reading_it_writes_nothing():
    s = make_schedule("zbv", 4, 8)
    tl = simulate(s, tf=1, tb=2, tw=1)
    ref = simulate(s, tf=1, tb=2, tw=1, executor="reference")
    before = dict(vars(tl))
    assert tl.to_dict() == ref.to_dict() and tl.events == ref.events
    tl.metrics(), tl.events_by_rank(), tl.rank_strip_columns(), tl.spans, list(tl.events)
    assert vars(tl) == before and set(vars(tl)) == {"num_ranks", "columns", "source",
                                                     "schedule", "meta", "transfers"}
    assert pickle.loads(pickle.dumps(tl)).events == ref.events
    assert tl.shifted(1.0).makespan == tl.makespan and tl.shifted(1.0).start == 1.0
    with pytest.raises(AttributeError):
        tl.events.append(Event(0, Action(0, "F", 99), 0.0, 1.0))
    with pytest.raises(TypeError):
        tl.events[0] = Event(0, Action(0, "F", 99), 0.0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tl.columns = ref.columns
    with pytest.raises(TypeError, match="of_events"):
        Timeline(4, list(tl.events))


def test_a_key_names_its_action_and_a_pair_both_halves():
    assert op_of_key(key("W", 7, 300)) == Action(7, "W", 300)
    pair = op_of_key(pair_key(key("F", 0, 3), key("B", 5, 1)))
    assert pair == Overlap(Action(0, "F", 3), Action(5, "B", 1))
    assert str(pair) == "(0F3;5B1)"


def test_a_key_is_read_back_through_the_names_of_its_fields():
    k = key("I", 5, 300)
    assert (keys.stage_of(k), keys.kind_of(k), keys.microbatch_of(k)) == (5, "I", 300)
    assert keys.with_kind(k, "W") == key("W", 5, 300) and keys.kind_code_of(k) == 2
    assert keys.stage_of(keys.class_of("W", 5)) == 5 and k & keys.CLASS_MASK == \
        keys.class_of("I", 5)
    pair = pair_key(key("F", 0, 3), key("B", 5, 1))
    assert keys.is_pair(pair) and not keys.is_pair(k)
    assert keys.halves(pair) == (key("F", 0, 3), key("B", 5, 1))
    assert list(keys.pair_keys([key("F", 0, 3)], [key("B", 5, 1)])) == [pair]
    assert keys.stream_of("I", 5) == keys.stream_of("B", 5) != keys.stream_of("W", 5)
    assert keys.stream_of_key(k) == keys.stream_of("B", 5) == keys.stream_of_key(key("B", 5, 2))
    assert keys.of_kind([key("F", 0, 1), k, pair_key(key("F", 0, 3), key("I", 5, 1))], "I") == [k]
    assert list(keys.key_run("F", 2, 4, 3)) == [key("F", 2, m) for m in (4, 5, 6)]


def test_streams_number_each_kind_and_stage_in_order_b_and_i_sharing_one_count():
    out = Streams()
    out.repeat([("F", 0), ("B", 1)], 2)
    out.one("I", 1)                            # the next backward of stage 1 is microbatch 2
    out.repeat([(("F", 0), ("B", 1))], 1)
    text = [str(op_of_key(k)) for k in out.keys]
    assert text == ["0F0", "1B0", "0F1", "1B1", "1I2", "(0F2;1B3)"]


if __name__ == "__main__":                        # regenerate: the current generators' hashes
    DATA.write_text(json.dumps({label(*c): fingerprint(*c) for c in cases()}, indent=0,
                               sort_keys=True) + "\n")
