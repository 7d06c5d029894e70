"""The schedule registry is the one place a schedule is declared: every consumer agrees."""
import pytest

from pplab import NAMES, make_schedule, simulate
from pplab.canvases.interleaved import INTERLEAVED_SCHEDULES
from pplab.canvases.timeline import render_compare
from pplab.canvases.zero_bubble import ZB_SCHEDULES
from pplab.cli import main as cli_main
from pplab.registry import REGISTRY, default_V, excess_closed_form, spec


@pytest.mark.parametrize("name", NAMES)
def test_each_spec_builds_its_schedule_with_its_default_V(name):
    s = spec(name)
    P = 4
    M = 8
    sched = make_schedule(name, P, M)
    assert sched.name == name and sched.V == s.default_V == default_V(name)
    kinds = {a.kind for _, _, op in sched.actions() for a in op.parts}
    assert ("W" in kinds) == s.split_backward, "split_backward must say whether W's exist"


@pytest.mark.parametrize("name", NAMES)
def test_V_rule_is_what_the_generator_enforces(name):
    s = spec(name)
    for V in (1, 2, 3, 4):
        try:
            make_schedule(name, 4, 24, V)
            built = True
        except ValueError:
            built = False
        assert built == s.accepts_V(V), f"{name} V={V}: registry says {s.accepts_V(V)}"


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].excess is not None])
def test_closed_form_excess_matches_the_simulator_where_stated(name):
    """At the costs each paper states its formula for, simulated excess = closed form."""
    costs = dict(tf=1.0, tb=2.0, tw=1.0, tfb=3.0) if spec(name).split_backward \
        else dict(tf=1.0, tb=2.0, tw=0.0)
    P, M = 4, 16
    tl = simulate(make_schedule(name, P, M), **costs)
    form, note = excess_closed_form(name, P, M, **costs)
    assert note
    assert tl.makespan - M * (costs["tf"] + costs["tb"]) == pytest.approx(form), note


def test_aliases_and_unknown_names():
    assert spec("AFAB").name == "gpipe" and spec("zb_v").name == "zbv"
    with pytest.raises(ValueError, match="unknown schedule 'magic'; choose one of naive"):
        spec("magic")


def test_consumers_read_the_registry():
    assert set(INTERLEAVED_SCHEDULES) == {n for n in NAMES if spec(n).stages_per_rank == "any"}
    assert set(ZB_SCHEDULES) - {"1f1b"} == {n for n in NAMES if spec(n).split_backward}


def test_compare_passes_V_only_to_schedules_that_take_it():
    """Was a drift: render_compare(("zb-h2", "interleaved"), V=2) refused zb-h2."""
    fig, msg = render_compare(("zb-h2", "interleaved"), 4, 8, V=2, draw=False)
    assert msg.startswith("zb-h2: makespan") and "\ninterleaved: makespan" in msg


def test_cli_lists_the_registry(capsys):
    assert cli_main(["simulate", "-s", "magic", "-P", "2", "-M", "2"]) == 2
    assert ", ".join(NAMES) in capsys.readouterr().err
