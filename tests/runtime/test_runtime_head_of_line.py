"""torch#188833 on real processes: interleaved 1F1B over gloo with blocking receives. Posted
where a unit-time run makes their data (front-loaded), they end the warm-up later than posted
right before the op that needs them (just-in-time), as the stream model says.

Judged on what machine load cannot move: every op lasts at least its emulated time and the
ranks share one clock, so neither run can end its warm-up before its simulated twin does; the
front-loaded run's twin ends one forward later than the just-in-time one's, so a run whose
receives did not block where posted would end its warm-up a forward early and fail on a
quiet machine. How close the measured gap comes: ``head_of_line_canvas``'s measured panel."""
from pplab.canvases.head_of_line import measure_head_of_line, measured_text
from pplab.streams import warmup_end


def test_front_loaded_receives_end_the_warm_up_later_on_real_processes():
    res = measure_head_of_line(P=2, M=8, V=2, tf=0.1, tb=0.2, timeout=240)
    front, jit = res["front-loaded"], res["just-in-time"]
    print(measured_text(res))
    sim_gap = warmup_end(front.simulated) - warmup_end(jit.simulated)
    assert abs(sim_gap - 0.1) < 1e-9                       # one forward's worth, simulated
    for r in (front, jit):
        assert warmup_end(r.timeline) >= warmup_end(r.simulated) - 1e-3, measured_text(res)
        assert r.timeline.makespan >= r.simulated.makespan - 1e-3, measured_text(res)
        assert r.executed == r.schedule.rank_texts()       # same training, other order
        assert r.grad_max_rel_error is not None and r.grad_max_rel_error < 1e-5
