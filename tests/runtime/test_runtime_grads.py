"""Real runs under torchrun: every schedule's gradients equal a single-process reference.

Configurations with the same P share one torchrun launch (run_many) to save start-up time.
Every generator runs for real three times, each launch proving what the others cannot:
P = 1 and 2 with tagged messages (one rank alone; two ranks, plus the student's schedule, Adam,
recomputation and the negative controls), P = 4 with messages matched by posting order alone
(NCCL's recipe, and its misordered control), and P = 4 with emulated op durations (tagged
messages, the simulated order and in-flight peaks, the loss of one process).
"""
import math

import pytest

from pplab.ir import Schedule
from pplab.runtime import run_many
from pplab.registry import NAMES

TOL = 1e-5
# every generator (a new one is covered automatically), plus interleaved at V=1
ALL = [(name, None) for name in NAMES] + [("interleaved", 1)]


def _items(P):
    from pplab.registry import make_schedule
    out = []
    for name, V in ALL:
        M = 8 if P > 1 else 2
        try:
            make_schedule(name, P, M, V)
        except ValueError:
            continue            # e.g. dualpipe needs an even P
        out.append((name, dict(M=M, V=V, steps=2)))
    return out


def _assert_matches(r):
    assert len(r.grad_errors) == 2
    assert max(r.grad_errors) <= TOL, (r.schedule.name, r.grad_errors, r.worst_parameter)
    for a, b in zip(r.losses, r.reference_losses):
        assert math.isclose(a, b, rel_tol=1e-6), (r.schedule.name, r.losses, r.reference_losses)
    assert r.executed == r.schedule.rank_texts()
    assert r.timeline.source == "measured" and r.simulated is None
    assert r.backend == "gloo" and len(r.peak_saved_bytes) == r.schedule.P


@pytest.mark.parametrize("P", [1, 2])
def test_every_schedule_matches_reference(P):
    """P = 4 with tagged messages is the emulated test below (every generator, the same
    checks); P = 4 without emulation is the in-order test."""
    items = _items(P)
    if P == 2:   # extra configurations sharing this launch
        student = Schedule.from_text(["0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"], name="student")
        items += [(student, dict(steps=2)),
                  ("1f1b", dict(M=4, steps=2)),
                  ("1f1b", dict(M=4, steps=2, optimizer="adam", lr=0.001)),
                  ("zb-h1", dict(M=4, steps=2, recompute="full")),
                  ("zbv", dict(M=4, steps=2, recompute="selective")),
                  ("1f1b", dict(M=4, steps=2, recompute="full")),
                  ("gpipe", dict(M=4, steps=2, recompute="stage")),
                  ("1f1b", dict(M=4, steps=2, control="seed")),
                  ("1f1b", dict(M=4, steps=2, control="drop"))]
    results = run_many(items, P, timeout=400, comm_timeout=60)
    names = [n if isinstance(n, str) else n.name for n, _ in items]
    assert {"naive", "gpipe", "1f1b", "zb-h1"} <= set(names)
    for (name, opts), r in zip(items, results):
        print(f"P={P} {getattr(name, 'name', name)} {opts} grad err {max(r.grad_errors):.2e} "
              f"step {r.step_time_s * 1e3:.1f} ms saved {r.peak_saved_bytes}")
        if opts.get("control"):
            # negative controls must FAIL the same check
            with pytest.raises(AssertionError):
                _assert_matches(r)
            continue
        _assert_matches(r)
    if P == 2:
        by = {(n, o.get("recompute", "none"), o.get("control")): r
              for (n, o), r in zip(items[-6:], results[-6:])}
        plain = [r for (n, o), r in zip(items, results) if n == "1f1b" and o.get("M") == 4
                 and not o.get("recompute") and not o.get("control") and o.get("optimizer") != "adam"]
        full = by[("1f1b", "full", None)]
        print("1f1b P=2 M=4 saved bytes per rank: none", plain[0].peak_saved_bytes,
              "full", full.peak_saved_bytes)
        assert sum(full.peak_saved_bytes) < 0.5 * sum(plain[0].peak_saved_bytes)


def _emulated_items():
    """Every generator at P = 4 with emulated op durations, "add" (compute, then the
    emulated time) and "pad" (an op lasts max(compute, emulated)) modes both present."""
    add = dict(tf=0.02, tb=0.04)
    costs = dict(tf=0.02, tb=0.04, tw=0.015, tfb=0.06, mode="pad")
    no_w = dict(costs, tw=0.0)
    items = [("gpipe", dict(M=8, steps=2, emulate=add)),
             ("1f1b", dict(M=8, steps=2, emulate=add)),
             ("1f1b", dict(M=8, steps=2, emulate=dict(add, mode="pad"))),
             ("naive", dict(M=1, steps=2, emulate=no_w))]
    items += [(name, dict(M=8, V=2, steps=2, emulate=no_w))
              for name in ("interleaved", "bfs", "bfs-1f1b")]
    items += [(name, dict(M=8, steps=2, emulate=costs))
              for name in ("interleaved-zb", "zb-h1", "zb-h2", "zbv", "dualpipe", "dualpipev",
                           "v-zb", "v-half", "v-min")]
    return items


def test_emulated_runs_keep_the_simulated_order_and_bounds():
    """What the canvases draw is what four processes do, judged on what machine load cannot
    move: each rank runs its ops in the simulated order, holds the simulated in-flight peak,
    trains exactly, every op lasts at least its emulated time, and the step is never shorter
    than the simulated one (the simulated makespan is the longest dependency chain of
    emulated durations; the ranks share one monotonic clock). How close the measured bubble
    comes to the simulated one depends on how busy the machine is:
    benchmarks/bench_emulated_bubble.py measures it (within 0.03 on a quiet machine)."""
    items = _emulated_items()
    assert {n for n, _ in items} == set(NAMES)
    for r in run_many(items, 4, timeout=400, comm_timeout=60):
        sim = r.simulated
        print(r.schedule.name, "measured bubble", round(r.bubble_fraction, 4), "simulated",
              round(sim.bubble_fraction, 4), "makespan", round(r.timeline.makespan, 3),
              "vs", round(sim.makespan, 3))
        assert r.executed == r.schedule.rank_texts()
        assert r.timeline.rank_orders() == sim.rank_orders()
        assert r.peak_inflight == sim.peak_inflight
        assert len(r.grad_errors) == 2 and max(r.grad_errors) <= TOL, r.schedule.name
        assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in
                   zip(r.losses, r.reference_losses)), (r.schedule.name, r.losses)
        assert r.backend == "gloo" and len(r.peak_saved_bytes) == r.schedule.P
        floor = {(e.rank, str(e.op)): e.duration for e in sim.events}
        assert len(r.timeline.events) == len(floor)
        for e in r.timeline.events:
            assert e.duration >= floor[(e.rank, str(e.op))] - 1e-3, (r.schedule.name, e)
        for events in r.timeline.events_by_rank():
            assert all(a.end <= b.start + 1e-6 for a, b in zip(events, events[1:]))
        assert r.timeline.makespan >= sim.makespan - 1e-3, (r.schedule.name, sim.makespan)


def test_in_order_comm_matches_reference():
    """NCCL's recipe (pplab.lower) run on gloo with every tag 0, so messages match by
    posting order alone, as on NCCL: every schedule still trains exactly, at P = 4 (every
    generator; each rank has a peer on both sides). Posting one receive before an earlier
    one from the same peer (out of the sender's order) must fail the check."""
    items = [(n, dict(o, comm="in-order")) for n, o in _items(4)]
    assert {n for n, _ in items} == set(NAMES)
    items.append(("1f1b", dict(M=8, steps=2, comm="in-order", control="misorder")))
    results = run_many(items, 4, timeout=400, comm_timeout=60)
    for (name, opts), r in zip(items, results):
        print(f"P=4 in-order {name} V={r.schedule.V} grad err {max(r.grad_errors):.2e}")
        if opts.get("control"):
            assert max(r.grad_errors) > 1e-2, r.grad_errors
            continue
        _assert_matches(r)
