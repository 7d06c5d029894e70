"""torch#188833 on real processes: interleaved 1F1B over gloo with blocking receives. Posted
where a unit-time run makes their data (front-loaded), they end the warm-up measurably later
than posted right before the op that needs them (just-in-time), as the stream model says."""
from pplab.canvases.head_of_line import measure_head_of_line, measured_text
from pplab.sim.streams import warmup_end


def test_front_loaded_receives_end_the_warm_up_later_on_real_processes():
    res = measure_head_of_line(P=2, M=8, V=2, tf=0.1, tb=0.2, timeout=240)
    front, jit = res["front-loaded"], res["just-in-time"]
    sim_gap = warmup_end(front.simulated) - warmup_end(jit.simulated)
    assert abs(sim_gap - 0.1) < 1e-9                       # one forward's worth, simulated
    gap = warmup_end(front.timeline) - warmup_end(jit.timeline)
    assert gap > 0.5 * sim_gap, measured_text(res)
    assert front.timeline.makespan > jit.timeline.makespan, measured_text(res)
    for r in (front, jit):                                  # same training, other order
        assert r.grad_max_rel_error is not None and r.grad_max_rel_error < 1e-5
