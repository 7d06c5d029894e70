"""The measurement behind each prediction, shown under the question once the guess is in.

A reveal is registered here by question id and computed only when the student commits a
guess (``widgets.question_widget`` calls :func:`measurement`), so nothing on the page, not
even after Run All, shows it before. Each one recomputes its figures with the simulator (or
the runtime) and asserts the closed forms they must equal, so the course's own numbers are
checked every time a student, or the Run-All test, commits a guess. A reveal returns its text,
or a list of parts: text and pictures (a figure, a scene) shown in order.

Several questions can share one reveal (it answers them all): it is then shown under the
last of them to be committed, and the others say which question still waits. Pure Python,
like the rest of ``pplab.course``.
"""
from __future__ import annotations

from typing import Callable

from ..registry import make_schedule
from ..sim import Costs, simulate

_REVEALS: dict[str, Callable[[], object]] = {}
_GROUPS: dict[str, tuple[str, ...]] = {}


def _reveals(*qids: str):
    def register(fn):
        for q in qids:
            _REVEALS[q] = fn
            _GROUPS[q] = qids
        return fn
    return register


def reveal_ids() -> list[str]:
    """Every question id that has a measurement."""
    return list(_REVEALS)


def group(qid: str) -> tuple[str, ...]:
    """The questions whose answers ``qid``'s measurement shows (just ``qid`` if alone)."""
    return _GROUPS.get(qid, (qid,))


def measurement(qid: str) -> list:
    """The parts of ``qid``'s measurement (text first, then any pictures); [] if it has none."""
    if qid not in _REVEALS:
        return []
    out = _REVEALS[qid]()
    return [out] if isinstance(out, str) else list(out)


def measurement_text(qid: str) -> str:
    """The measurement as words only: its text parts and each picture's plain-text form."""
    return "\n".join(part if isinstance(part, str) else repr(part) for part in measurement(qid))


def reveal(*qids: str, progress=None, show: bool = False) -> None:
    """Print the measurement for ``qids`` if they were all answered (or ``show=True``).

    Lessons no longer call this: the measurement appears under the question itself once the
    guess is committed. It stays for copies of lessons saved before, and for instructors
    (``show=True``). It returns nothing, so a cell ending in it shows no ``Out[]``.
    """
    from .bank import get, renamed
    from .progress import Progress
    qids = tuple(renamed().get(q, q) for q in qids)
    unknown = [q for q in qids if q not in _REVEALS]
    if unknown:
        print(f"no measurement for {', '.join(unknown)}: this copy of the lesson is older than "
              f"the course.")
        return
    prog = progress or Progress()
    if show or all(prog.done(get(q)) for q in qids):
        for text in dict.fromkeys(measurement_text(qid) for qid in qids):
            print(text)
    else:
        print(f"The measurement for {', '.join(qids)} now appears under the question itself "
              f"once you commit your guess there.")


@_reveals("00.first-makespan")
def _first_makespan() -> list:
    from ..draw import draw_timeline
    P, M, tf, tb = 4, 8, 1, 2
    tl = simulate(make_schedule("1f1b", P, M), Costs(tf=tf, tb=tb))
    assert tl.makespan == M * (tf + tb) + (P - 1) * (tf + tb) == 33
    return [f"1F1B, P = {P}, M = {M}, tf = {tf}, tb = {tb}: makespan {tl.makespan:g} = "
            f"{M * (tf + tb)} units of work per rank + {(P - 1) * (tf + tb)} of fill and drain; "
            f"bubble {tl.bubble_fraction:.1%} of the total, {tl.bubble_ratio:.1%} of the ideal",
            draw_timeline(tl)]


@_reveals("00.busiest-memory")
def _busiest_memory() -> str:
    peaks = simulate(make_schedule("1f1b", 4, 8)).peak_inflight
    assert list(peaks) == [4, 3, 2, 1]
    return (f"1F1B, P = 4, M = 8: peak in-flight microbatches per rank {list(peaks)}. Rank 0 "
            f"starts {peaks[0]} forwards before its first backward comes back; the last rank "
            f"turns each microbatch around at once.")


@_reveals("00.grad-error")
def _grad_error() -> str:
    from ..probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("the accumulation check in pplab.runtime.accumulate")
    from ..runtime.accumulate import accumulation_error
    err = accumulation_error(8)
    assert err < 1e-5
    return (f"One process, the course's tiny model in fp32: the gradient summed over 8 "
            f"microbatches (each loss × 1/8) against one backward of the whole batch differs "
            f"by at most {err:.1e} (relative): float round-off, the same sums added in another "
            f"order. The panel below measures the same between the 4-process pipeline and one "
            f"process.")


@_reveals("01.model-states")
def _model_states() -> str:
    from ..memory import get_preset, model_states_bytes
    lines = ["Per parameter (the ZeRO paper, §3.1): bf16 weights 2 + bf16 gradients 2 + an fp32 "
             "master copy 4 + Adam's momentum 4 + Adam's variance 4 = 16 bytes; the last three "
             "(12 bytes) are the optimizer states."]
    for label, psi in (("70B, rounded", 70e9),
                       ("Llama 3 70B, exact", get_preset("llama3-70b").num_params())):
        p, g, o = model_states_bytes(psi)
        assert p + g + o == 16 * psi
        lines.append(f"{label:20s} params {p / 1e9:7.1f} GB + grads {g / 1e9:6.1f} GB + "
                     f"optimizer {o / 1e9:7.1f} GB = {(p + g + o) / 1e9:7.1f} GB = "
                     f"{(p + g + o) / 80e9:4.1f} × an 80 GB GPU")
    lines.append("1.12 TB of model states for a 70B model, fourteen 80 GB GPUs' worth before "
                 "any activation. Even the bf16 weights alone (140 GB) do not fit one GPU: the "
                 "model must be split.")
    return "\n".join(lines)


@_reveals("01.tp16")
def _tp16() -> str:
    from ..memory import get_preset
    from ..memory.comm import Network
    m, net = get_preset("llama3-70b").with_(seq=4096), Network()
    act = m.seq * 1 * m.hidden * 2                       # one s·b·h activation in bf16
    flops = m.train_flops_per_token() * m.seq / m.layers  # one layer, one microbatch, F + B
    lines = [f"Llama 3 70B, s = 4096, b = 1: one activation s·b·h is {act / 1e6:.0f} MB; "
             f"compute at 40% of an H100's bf16 peak (989 TFLOP/s)"]
    ratio = {}
    for t in (2, 4, 8, 16):
        bw = net.intra_node if t <= net.gpus_per_node else net.inter_node
        per_ar = 2 * (t - 1) / t * act                   # ring all-reduce: bytes sent per GPU
        comm, compute = 4 * per_ar / bw, flops / t / (0.4 * 989e12)
        ratio[t] = comm / compute
        lines.append(f"TP={t:2d}: {'NVLink' if t <= 8 else 'InfiniBand':10s} 4 all-reduces = "
                     f"{comm * 1e3:5.2f} ms vs compute {compute * 1e3:5.2f} ms per layer per "
                     f"microbatch")
    assert max(ratio[t] for t in (2, 4, 8)) < 0.15 and 2.5 < ratio[16] < 3
    inside = [ratio[t] for t in (2, 4, 8)]
    lines.append(f"Inside the node the all-reduces cost {min(inside):.0%}–{max(inside):.0%} of "
                 "the layer's compute; across two nodes they take nearly three times the "
                 "compute, and they cannot be "
                 "hidden: the next operation needs the sum. That is why TP stays inside a node, "
                 "and pipeline parallelism (PP) across nodes and data parallelism (DP) take "
                 "over beyond it (lesson 09).")
    return "\n".join(lines)


@_reveals("01.dp-copies")
def _dp_copies() -> str:
    from ..memory import ParallelConfig, get_preset, memory_report
    m = get_preset("llama3-70b").with_(seq=4096)
    lines, peak = [], {}
    for tp, dp, zero in ((1, 1, 0), (8, 1, 0), (8, 8, 0), (8, 8, 3)):
        rep = memory_report(m, ParallelConfig(tp=tp, dp=dp, zero=zero, sp=tp > 1,
                                              recompute="full"))
        r, peak[tp, dp, zero] = rep.per_rank[0], rep.peak_bytes
        lines.append(f"TP={tp} DP={dp} ZeRO-{zero}: model states "
                     f"{(r.params + r.grads + r.optimizer) / 1e9:7.1f} GB + activations "
                     f"{r.activations / 1e9:5.1f} GB = {rep.peak_bytes / 1e9:7.1f} GB per GPU")
    assert peak[8, 8, 0] == peak[8, 1, 0] > 80e9 > peak[8, 8, 3]
    lines.append("Plain DP copies everything, so more replicas do not lower the memory at all "
                 "(the same GB with DP = 8 as with DP = 1). Sharding the model states over the "
                 "replicas (ZeRO-3, lesson 07) or splitting the layers over nodes (PP, lessons "
                 "02–06) is what makes it fit.")
    return "\n".join(lines)


@_reveals("02.naive-makespan")
def _naive_makespan() -> list:
    from ..draw import draw_timeline
    tl = simulate(make_schedule("naive", P=4, M=1), Costs(tf=1, tb=2))
    assert tl.makespan == 4 * (1 + 2) and tl.busy[0] == 1 + 2
    return [f"naive, P = 4, one batch: makespan {tl.makespan:g}; each rank busy "
            f"{tl.busy[0]:g} of it",
            draw_timeline(tl, metrics=False, title="naive P=4 M=1")]


@_reveals("02.naive-idle-p8")
def _naive_idle() -> str:
    lines = [" P  simulated idle share   (P-1)/P   lecture's (P-1)/(2P-1)"]
    for P in (1, 2, 4, 8):
        idle = simulate(make_schedule("naive", P=P, M=1)).bubble_fraction
        assert abs(idle - (P - 1) / P) < 1e-12
        assert P == 1 or abs(idle - (P - 1) / (2 * P - 1)) > 0.15
        lines.append(f"{P:2d}  {idle:20.3f}   {(P - 1) / P:7.3f}   {(P - 1) / (2 * P - 1):13.3f}")
    lines += [
        "At any moment exactly one rank works: the step takes P·(tf + tb), and each rank is "
        "busy only tf + tb of it, so the idle share is (P−1)/P: 7/8 = 87.5% at P = 8.",
        "The lecture's slip: the CS336 lecture notes derive the bubble of one microbatch as "
        "(P−1)/(P+P−1) = (P−1)/(2P−1), \"7/15 = 47% at P = 8\". Their own general formula, "
        "(P−1)/(m+P−1), gives (P−1)/P at m = 1, as the simulator does. The slip counts 2P − 1 "
        "time slots, but there are as many backward slots as forward ones, and each rank is "
        "busy in only two of them."]
    return "\n".join(lines)


@_reveals("02.ratio-to-ideal")
def _naive_ratio() -> str:
    tl = simulate(make_schedule("naive", P=4, M=1))
    assert tl.bubble_ratio == 4 - 1 and tl.bubble_fraction == 3 / 4
    return (f"naive, P = 4: bubble ÷ total {tl.bubble_fraction:.3f}, bubble ÷ ideal "
            f"{tl.bubble_ratio:.3f}\n"
            f"One idle time, two numbers: {tl.bubble_fraction:.0%} of the hardware-time is "
            f"wasted, and the bubble alone lasts P − 1 = {tl.bubble_ratio:g} times the ideal "
            f"step, on top of it. A bubble means nothing until you say which denominator it "
            f"uses.")


@_reveals("03.gpipe-bubble")
def _gpipe_bubble() -> list:
    from ..draw import draw_timeline
    from .measure import idle_split
    P, M, tf, tb = 4, 6, 1, 2
    tl = simulate(make_schedule("gpipe", P, M), Costs(tf=tf, tb=tb))
    assert abs(tl.bubble_fraction - 3 / 9) < 1e-12 and abs(tl.bubble_ratio - 3 / 6) < 1e-12
    lines = [f"GPipe P = {P}, M = {M}: makespan {tl.makespan:g}; bubble "
             f"{tl.bubble_fraction:.1%} of the total, {tl.bubble_ratio:.1%} of the ideal",
             "Where each rank waits:",
             "rank  waits at start  in the middle  at the end"]
    for r, (head, middle, tail) in enumerate(idle_split(tl)):
        assert (head, middle, tail) == (r * tf, (P - 1 - r) * (tf + tb), r * tb)
        lines.append(f"{r:4d}  {head:14g}  {middle:13g}  {tail:10g}")
    lines += [
        "Rank r waits r·tf before its first forward (microbatch 0 crosses r ranks), "
        "(P − 1 − r)(tf + tb) between its last forward and its first backward (the forwards "
        "still travel to the last rank and the backwards come back), and r·tb after its last "
        "backward (the ranks before it still run theirs). The three add up to "
        f"(P − 1)(tf + tb) = {(P - 1) * (tf + tb)} on every rank whatever M is, while the "
        f"work, M·(tf + tb) = {M * (tf + tb)}, grows with M: idle ÷ total = (P − 1)/(M + P − 1) "
        f"= 3/9.",
        f"At P = {P} for other M, measured and by formula:",
        " M  makespan  idle÷total  (P-1)/(M+P-1)  idle÷ideal  (P-1)/M"]
    for m in (1, 2, 4, 8, 16, 32):
        t = simulate(make_schedule("gpipe", P, m))
        total, ideal = (P - 1) / (m + P - 1), (P - 1) / m
        assert abs(t.bubble_fraction - total) < 1e-12 and abs(t.bubble_ratio - ideal) < 1e-12
        lines.append(f"{m:2d}  {t.makespan:8g}  {t.bubble_fraction:10.3f}  {total:13.3f}  "
                     f"{t.bubble_ratio:10.3f}  {ideal:7.3f}")
    return ["\n".join(lines), draw_timeline(tl)]


@_reveals("03.smallest-m")
def _smallest_m() -> str:
    from .measure import smallest_M
    lines = []
    for ideal in (False, True):
        M = smallest_M(8, 0.20, ideal=ideal)
        tl = simulate(make_schedule("gpipe", 8, M))
        lines.append(f"÷ {'ideal' if ideal else 'total'}: smallest M = {M} "
                     f"(bubble {tl.bubble_ratio if ideal else tl.bubble_fraction:.1%})")
    assert smallest_M(8, 0.20) == 4 * 7 + 1 and smallest_M(8, 0.20, ideal=True) == 36
    return "\n".join(lines)


@_reveals("03.forget-1-over-m")
def _forget_1_over_m() -> str:
    from ..probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("the accumulation check in pplab.runtime.accumulate")
    from ..runtime.accumulate import accumulation_error
    lines = [" M   loss × 1/M: error vs one batch     loss × 1: error"]
    for M in (2, 4, 8):
        ok, bad = accumulation_error(M), accumulation_error(M, scale_by_1_over_M=False)
        assert ok < 1e-5 and abs(bad - (M - 1)) < 1e-4
        lines.append(f"{M:2d}   {'< 1e-6 (round-off)' if ok < 1e-6 else f'{ok:.1e}':>28s}"
                     f"     {bad:14.2f}")
    lines.append(
        "Scaled by 1/M, the summed gradients are the gradient of the mean loss over the whole "
        "batch, up to float round-off. Unscaled, they add M gradients of means: M times the "
        "full-batch gradient, a relative error of M − 1 (one process, the course's tiny "
        "model). Stepping after every microbatch instead runs later microbatches on other "
        "weights: a different, asynchronous algorithm (PipeDream's), not a faster GPipe. "
        "Lesson 10 checks the scaled sum across real processes; lesson 12 shows torch's "
        "switch for it (scale_grads).")
    return "\n".join(lines)


@_reveals("03.remat-cost")
def _remat_cost() -> str:
    P, M = 4, 64
    plain = simulate(make_schedule("gpipe", P, M), Costs(tf=1, tb=2))
    remat = simulate(make_schedule("gpipe", P, M), Costs(tf=1, tb=3))  # re-run forward + backward
    assert abs(remat.makespan / plain.makespan - 4 / 3) < 1e-9
    ratio = remat.makespan / plain.makespan
    # the last rank runs M forwards, M re-runs, M backwards in series, after (P − 1)·tf of
    # fill, and the last gradient still crosses P − 1 ranks: a floor however early re-runs go
    floor = (P - 1) * 1 + M * (1 + 1 + 2) + (P - 1) * 2
    assert floor == plain.makespan + M * 1 and remat.makespan - floor == (P - 1) * 1
    return "\n".join([
        f"GPipe P = {P}, M = {M}, the re-run charged inside each backward (tb = 2 + 1): "
        f"makespan {plain.makespan:g} → {remat.makespan:g}, ×{ratio:.3f}",
        "The re-run repeats the forward only, once per microbatch, and a backward costs two "
        "forwards: each microbatch's 3 units of work become 4 on every rank, a third more "
        "compute. Charged inside the backward, every re-run waits for its gradient and sits "
        "on the critical path, so the step grows by exactly 4/3 for any P and M: that is "
        "the simulator's assumption.",
        "The GPipe paper (§2.3) points out that a re-run needs only the stored input, not the "
        "gradient, so it can be scheduled earlier, into a rank's wait before its first "
        "backward. The compute added stays a third, and only the waits can absorb it: the "
        "last rank waits not at all, so its M forwards, M re-runs and M backwards run one "
        "after another, and the last gradient still crosses P − 1 ranks. However early the "
        f"re-runs go, the step takes at least (M + P − 1)(tf + tb) + M·tf = {floor} here, "
        f"against {remat.makespan:g}: scheduling them early saves at most (P − 1)·tf = "
        f"{remat.makespan - floor:g} units, so 4/3 is close whenever M is large against P.",
        "Measured: Korthikanti et al. (2022, Reducing Activation Recomputation in Large "
        "Transformer Models) time one layer of their 22B GPT, forward and backward, in "
        "Table 4: full recomputation adds 39%. Their per-layer breakdown across models up to "
        "1T parameters (§6.2, Figure 8) puts it near 36%. Both sit close to the one forward "
        "in three units that the simulator adds."])


@_reveals("04.order-grid")
def _order_grid() -> list:
    from ..draw import draw_timeline
    s = make_schedule("1f1b", P=3, M=4)
    return [s.to_text() + "\nEach rank starts with a few forwards (the warm-up), then "
            "alternates one forward and one backward (the steady state), then drains its "
            "remaining backwards.",
            draw_timeline(simulate(s), metrics=False, title="1f1b P=3 M=4")]


@_reveals("04.same-bubble")
def _same_bubble() -> str:
    tls = {name: simulate(make_schedule(name, P=5, M=10)) for name in ("gpipe", "1f1b")}
    assert tls["1f1b"].makespan == tls["gpipe"].makespan == 42
    return "\n".join([f"{name:5s} P=5 M=10: makespan {tl.makespan:g}, bubble "
                       f"{tl.bubble_fraction:.1%} of total" for name, tl in tls.items()] + [
        "The total work and the fill and drain are unchanged, so the bubble is the same. "
        "What changes is how many microbatches each rank keeps alive."])


@_reveals("04.peaks")
def _peaks() -> list:
    from ..draw import draw_inflight
    lines = []
    for P, M in ((6, 4), (4, 8), (8, 3)):
        peaks = simulate(make_schedule("1f1b", P, M)).peak_inflight
        lines += [f"1F1B at P={P} M={M}, peak in flight per rank:",
                  "  rank  measured  min(P-r,M)  claim1:P  claim2:min(k,P-k) "
                  "k=r  k=r+1  claim3:1"]
        for r, peak in enumerate(peaks):
            lines.append(f"  {r:4d}  {peak:8d}  {min(P - r, M):10d}  {P:8d}  {min(r, P - r):21d}"
                         f"  {min(r + 1, P - r - 1):5d}  {1:8d}")
            assert peak == min(P - r, M) >= 1
        # min(k, P − k) gives some stage nothing, whichever way the stages are numbered
        assert 0 in [min(r, P - r) for r in range(P)]
        assert 0 in [min(r + 1, P - r - 1) for r in range(P)]
    lines += [
        "Rank r runs P − r − 1 warm-up forwards and then its first steady-state forward "
        "before its first backward comes back: it holds min(P − r, M) microbatches at its "
        "peak. The first rank holds the most, the last holds one, and when M < P nobody can "
        "hold more than M.",
        "Claim 1 (P on every stage) is true only for rank 0, and only when M ≥ P; claim 2 "
        "gives some stage nothing to hold whichever way the stages are numbered (k = r gives "
        "rank 0 zero, k = r + 1 the last rank), and its shape peaks in the middle where "
        "1F1B's falls from rank 0; claim 3 is true only for the last rank."]
    return ["\n".join(lines), draw_inflight(simulate(make_schedule("1f1b", P=6, M=4)))]


@_reveals("04.fastest-m")
def _fastest_m() -> str:
    from .measure import fit_fixed_cost, fixed_cost_step
    P, reported = 8, {1: 2920, 8: 875}          # ms per step, the guide's runs R1 and R4
    W, c = fit_fixed_cost(P, reported)
    lines = [f"fitted: work per rank W = {W:.1f} ms, fixed cost per action c = {c:.2f} ms "
             f"(c/W = {c / W:.4f})",
             " M   modelled ms   reported   bubble÷ideal   [no fixed cost]"]
    times = {}
    for M in (1, 2, 4, 8, 16, 32):
        times[M] = fixed_cost_step(P, M, W, c)
        lines.append(f"{M:2d}  {times[M]:11.0f}  {reported.get(M, ''):>9}  {(P - 1) / M:13.3f}"
                     f"   [{fixed_cost_step(P, M, W, 0):6.0f}]")
    assert all(abs(times[M] - t) < 1e-6 for M, t in reported.items())
    assert min(times, key=times.get) == 16 and times[32] > times[8]
    lo, hi = 7 / 256, 7 / 64      # M = 8 beats M = 16 and M = 4 only for 7/256 ≤ c/W ≤ 7/64
    lines.append(f"M = 8 is the fastest only for {lo:.4f} ≤ c/W ≤ {hi:.4f}")
    lines.append(
        f"Fitted to R1 and R4, the fixed cost is about {c / W:.0%} of the work per action "
        f"({c:.1f} ms against {W:.0f} ms). That is enough to make the step slower at M = 32, "
        f"as the guide saw in R6, while the bubble ÷ ideal keeps falling as (P−1)/M: queueing "
        f"is not needed to explain a slowdown. But the same fit puts M = 16 about "
        f"{1 - times[16] / times[8]:.0%} ahead of M = 8, and the guide measured R5 (M = 16) "
        f"slower than R4. A constant cost per action cannot reproduce that ordering together "
        f"with R1 and R4: making M = 8 the fastest needs c/W of at least 7/256, which no "
        f"longer fits R1. What the data point to is a cost that grows faster than a constant "
        f"as the microbatch shrinks (GEMMs at microbatch sizes 2 and 1 run well below peak); "
        f"telling these apart needs a profile of step time against microbatch size.")
    return "\n".join(lines)


@_reveals("06.zbh1-idle", "06.zbh1-memory")
def _zbh1() -> str:
    from ..memory.accounting import peak_split
    P, M = 4, 12
    lines = ["tf tb tw   1F1B idle  ZB-H1 idle  (P-1)(tf+tb-2tw)"]
    for tf, tb, tw in ((1, 2, 1), (1, 2, 0.5), (2, 3, 1), (1, 3, 1)):
        one = simulate(make_schedule("1f1b", P, M), Costs(tf=tf, tb=tb, tw=tw))
        zb = simulate(make_schedule("zb-h1", P, M), Costs(tf=tf, tb=tb, tw=tw))
        busy = M * (tf + tb)
        lines.append(f"{tf:2g} {tb:2g} {tw:3g}   {one.makespan - busy:9g}  {zb.makespan - busy:10g}"
                     f"  {(P - 1) * (tf + tb - 2 * tw):16g}")
        assert zb.makespan - busy == (P - 1) * (tf + tb - 2 * tw)
    # at each rank's peak: (whole microbatches, microbatches whose W is still pending)
    split = [(n, w) for _, n, w in peak_split(make_schedule("zb-h1", P, M),
                                             dict.fromkeys(range(P), 1.0),
                                             dict.fromkeys(range(P), 0.5))]
    assert split == [(P - r, r) for r in range(P)]
    lines.append(f"ZB-H1 (whole microbatches, pending Ws) at each rank's peak: {split}")
    why = ("Zero Bubble's Table 2 gives ZB-H1's idle time as (P−1)(tf + tb − 2tw) (written "
           "there as (P−1)(T_F + T_B − T_W) with T_B the input-gradient part only), valid while "
           "tw ≤ tf and tw ≤ tI: with tw = 1 of tb = 2, a third of 1F1B's. To fill the "
           "cool-down, ZB-H1 lets rank r postpone up to r of its Ws.")
    from ..draw import draw_timeline
    return ["\n".join(lines), why,
            draw_timeline(simulate(make_schedule("zb-h1", P, 8), Costs(tf=1, tb=2, tw=1)))]


@_reveals("06.dualpipe-m")
def _dualpipe_m() -> str:
    lines = [" P    M   idle/rank  (P/2-1)(F&B+B-3W)  ÷total   ÷ideal   article's (P-1)/(2M)"]
    for P in (4, 8):
        for M in (2 * P, 4 * P, 8 * P, 16 * P):
            tl = simulate(make_schedule("dualpipe", P, M), Costs(tf=1, tb=2, tw=1, tfb=3))
            lines.append(f"{P:2d}  {M:3d}  {tl.makespan - 3 * M:9g}  {(P // 2 - 1) * 2:17g}"
                         f"  {tl.bubble_fraction:6.1%}  {tl.bubble_ratio:6.1%}"
                         f"   {(P - 1) / (2 * M):9.1%}")
            assert tl.makespan - 3 * M == (P // 2 - 1) * (3 + 2 - 3)
    lines.append("The idle time per rank is constant in M: DualPipe's bubble does not shrink with "
                 "M. It is a fixed (P/2−1)(F&B + B − 3W) per step (DeepSeek-V3, Table 2), like "
                 "every flushed schedule's fill and drain; percentages fall only because the "
                 "denominator grows.")
    from ..draw import draw_timeline
    return ["\n".join(lines), draw_timeline(simulate(make_schedule("dualpipe", 4, 8),
                                                     Costs(tf=1, tb=2, tw=1, tfb=3)))]


@_reveals("05.bubble-v2")
def _bubble_v2() -> str:
    P, M = 6, 18
    lines = [" V  makespan  idle÷ideal  (P-1)/(V·M)  idle÷total  (P-1)/(V·M+P-1)"]
    for V in (1, 2, 4, 8):
        tl = simulate(make_schedule("interleaved", P, M, V))
        lines.append(f"{V:2d}  {tl.makespan:8g}  {tl.bubble_ratio:10.4f}  {(P - 1) / (V * M):11.4f}"
                     f"  {tl.bubble_fraction:10.4f}  {(P - 1) / (V * M + P - 1):15.4f}")
        assert abs(tl.bubble_ratio - (P - 1) / (V * M)) < 1e-12
    from ..draw import draw_timeline
    why = ("Rank P−1 waits for the first microbatch to cross P−1 chunks on the ranks above "
           "it: in 1F1B each costs tf, interleaved tf/V, and the same holds for the drain. "
           "The fill-and-drain idle time per rank becomes (P−1)(tf+tb)/V while the work "
           "M·(tf+tb) stays: ÷ ideal (P−1)/(V·M) (Megatron-LM's form), ÷ total "
           "(P−1)/(V·M + P−1), GPipe's form with M replaced by V·M.")
    return ["\n".join(lines), why,
            draw_timeline(simulate(make_schedule("interleaved", P, M, 2)))]


@_reveals("05.best-v")
def _best_v() -> str:
    from ..canvases.interleaved import makespan_vs_V
    P, M, Vs = 4, 8, (1, 2, 3, 4, 6)
    lines = ["makespan at P = 4, M = 8, by the cost of one hop",
             "comm   " + "  ".join(f"V={v:<5d}" for v in Vs) + " best V"]
    best = {}
    for comm in (0.0, 0.1, 0.25, 0.5, 1.0):
        pts = makespan_vs_V(P, M, comm, Vs=Vs)
        best[comm] = min(pts, key=lambda x: (x[1], x[0]))[0]
        lines.append(f"{comm:4.2f}   " + "  ".join(f"{t:7.2f}" for _, t in pts)
                     + f"  {best[comm]}")
    assert best[0.25] == 2 and best[0.0] == 6
    lines.append("With free hops more chunks always help; at 0.25 a hop the best is V = 2, and "
                 "V = 6 is already slower than plain 1F1B.")
    return "\n".join(lines)


@_reveals("05.messages")
def _messages() -> str:
    from ..lower import p2p_messages
    P, M, lines = 4, 8, []
    for V in (1, 2, 4):
        n = p2p_messages(make_schedule("interleaved", P, M, V))
        lines.append(f"V={V}: {n:4d} messages per step, 2·M·(P·V−1) = {2 * M * (P * V - 1)}")
        assert n == 2 * M * (P * V - 1)
    return "\n".join(lines)


@_reveals("07.zero1-70b")
def _zero1_70b() -> str:
    from ..memory import model_states_bytes
    psi, nd, GB = 70e9, 64, 1e9
    claims = {1: "~230 GB", 2: "~160 GB", 3: "17.5 GB"}
    assert abs(sum(model_states_bytes(psi, nd, 1)) / GB - (4 * 70 + 12 * 70 / 64)) < 1e-9
    return "\n".join(f"ZeRO-{z}: {sum(model_states_bytes(psi, nd, z)) / GB:6.1f} GB   "
                     f"(lecture: {claims[z]})" for z in (1, 2, 3))


def _schedules_memory(names) -> tuple[list, dict]:
    """Rank 0's in-flight count and each schedule's peak rank, Llama 3 70B at TP = PP = DP = 8."""
    from ..memory import ParallelConfig, get_preset, memory_report
    GB = 1e9
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(tp=8, pp=8, dp=8, zero=1, sp=True, recompute="selective",
                         microbatches=32)
    lines, reps = [], {}
    for name, V in names:
        rep = reps[name] = memory_report(m, cfg.with_(schedule=name, virtual=V))
        r0 = rep.per_rank[0]
        lines.append(f"{name:11s} rank 0: in-flight {r0.inflight:5.2f} rank-shares, params "
                     f"{r0.params / GB:5.2f} GB, activations {r0.activations / GB:6.2f} GB, peak "
                     f"{rep.peak_bytes / GB:6.2f} GB on rank {rep.peak_rank}")
    return lines, reps


@_reveals("07.gpipe-vs-1f1b")
def _gpipe_vs_1f1b() -> str:
    lines, reps = _schedules_memory((("gpipe", None), ("1f1b", None)))
    assert reps["gpipe"].per_rank[0].inflight == 4 * reps["1f1b"].per_rank[0].inflight
    return "\n".join(lines + ["GPipe's rank 0 holds all M = 32 microbatches, 1F1B's P = 8."])


@_reveals("07.zbh1-peak-rank")
def _zbh1_peak_rank() -> str:
    lines, reps = _schedules_memory((("gpipe", None), ("1f1b", None), ("interleaved", 2),
                                     ("zb-h1", None), ("dualpipev", None), ("dualpipe", None)))
    assert reps["zb-h1"].peak_rank == 7
    return "\n".join(["Each schedule's peak rank, Llama 3 70B at TP = PP = DP = 8, M = 32:"]
                     + lines + [
        "Under ZB-H1 the last rank holds 1 whole microbatch and 7 with a pending W; with "
        "selective recomputation a pending W keeps 32 of a whole one's 34 bytes per token and "
        "hidden unit, and with the output layer and the fp32 logits that rank becomes the peak."])


@_reveals("08.layer-gb")
def _layer_gb() -> str:
    from ..memory.activations import layer_activation_bytes
    from .layer_tensors import GPT_LAYER, gpt_layer_bytes
    s, b, h, a, GB = 4096, 1, 8192, 64, 1e9
    lines = [f"{k.name:30s} {(k.per_h * h + k.per_score * a * s) * s * b / GB:6.3f} GB"
             for k in GPT_LAYER]
    total = gpt_layer_bytes(s, b, h, a)
    assert total == layer_activation_bytes(s, b, h, a)
    lines.append(f"{'kept for the backward':30s} {total / GB:6.3f} GB  "
                 f"({total / (s * b * h):.0f}·s·b·h)")
    return "\n".join(lines)


@_reveals("08.selective", "08.full-saving")
def _selective() -> str:
    from ..canvases.memory import recompute_rows
    GB = 1e9
    g, rows = recompute_rows("gpt3-175b", tp=8, sp="on")
    L, h, s, v = g.layers, g.hidden, g.seq, g.vocab
    none = rows[0][1]
    lines = [f"{rc:9s} {byts / GB:6.3f} GB/layer  ({1 - byts / none:5.1%} less)  +{extra:5.1%} "
             f"FLOPs (pplab count)" for rc, byts, extra in rows]
    kor = (s / (6 * h)) / (1 + s / (6 * h) + v / (12 * L * h))
    lines.append(f"Korthikanti's selective overhead (s/6h)/(1 + s/6h + v/12Lh) = {kor:.1%}")
    assert abs(1 - rows[1][1] / none - 80 / 114) < 1e-9
    assert abs(1 - rows[2][1] / none - (1 - 2 / 14.25)) < 1e-9
    return "\n".join(lines)


@_reveals("09.loudest-axis", "09.dp")
def _axes() -> str:
    from ..memory import ParallelConfig, get_preset, memory_report
    from ..memory.comm import Network, comm_times, comm_volumes
    GB = 1e9
    m = get_preset("llama3-70b").with_(seq=4096)
    cfg = ParallelConfig(tp=8, pp=4, dp=2, zero=1, sp=True, recompute="selective", microbatches=32)
    vol = comm_volumes(m, cfg, memory_report(m, cfg).schedule)
    tim = comm_times(vol, cfg, Network())
    assert vol["tp"] > vol["dp"] > vol["pp"] and 64 // (cfg.tp * cfg.pp) == cfg.dp
    return "\n".join([f"{k.upper()}: {vol[k] / GB:8.2f} GB per GPU per step, {tim[k]:6.2f} s at "
                      f"its bandwidth" for k in ("tp", "pp", "dp")]
                     + ["TP's bytes are spread over every layer and microbatch, on the critical "
                        "path: they need NVLink, inside the node. PP's are a few small "
                        "point-to-point messages; DP's come once a step, 2Ψ of the rank's share.",
                        f"DP for 96 GPUs at TP = 8, PP = 4: 96 / (8 · 4) = {96 // (8 * 4)}"])


@_reveals("09.planner-tp")
def _planner_tp() -> str:
    from ..canvases.memory import plan_table
    from ..memory import get_preset
    from ..memory.planner import plan
    table = plan_table(plan(get_preset("llama3-70b").with_(seq=4096), 64), top=8)
    assert " 1. TP=4 " in table
    return [table, "The winners use TP = 4 and little or no pipeline: half the node's TP "
                   "traffic, and ZeRO-2 plus selective recomputation make the model fit. Deeper "
                   "pipelines with TP = 2 fit too, but the stage that also runs the LM head (a "
                   "128k vocabulary: about 1.1 layers of work) is the slowest, and the slowest "
                   "stage sets the pace of the whole pipeline."]


@_reveals("10.messages")
def _messages_1f1b() -> str:
    from ..lower import p2p_messages
    lines = []
    for P, M in [(2, 4), (4, 6), (8, 32)]:
        sched = make_schedule("1f1b", P, M)
        lines.append(f"1F1B P={P} M={M}: {p2p_messages(sched)} point-to-point messages per step "
                     f"(2·M·(P−1) = {2 * M * (P - 1)})")
        assert p2p_messages(sched) == 2 * M * (P - 1)
    return "\n".join(lines)


@_reveals("10.nccl-order")
def _nccl_order() -> str:
    from ..lower import check_in_order, in_order_plan, up_front_plan
    sched = make_schedule("1f1b", 2, 4)
    try:
        check_in_order(sched, up_front_plan(sched))
    except ValueError as e:
        stuck = str(e)
    else:
        raise AssertionError("posting every receive up front completed in order")
    check_in_order(sched, in_order_plan(sched))       # the in-order plan completes
    return ("1F1B, P = 2, M = 4, played on the strictest in-order model (one queue per rank, "
            f"every message waits for its partner), receives posted up front: {stuck}.\n"
            "The in-order plan (pplab/lower.py) completes on the same model.")


@_reveals("11.slow-stage", "11.slow-first")
def _slow_stage() -> str:
    sched = make_schedule("1f1b", 4, 8)
    lines, spans = [], {}
    for scale in ((1, 1, 1, 1), (1, 1, 1, 1.3), (1.3, 1, 1, 1)):
        tl = simulate(sched, Costs(tf=1, tb=2, stage_scale=list(scale)))
        spans[scale] = tl.makespan
        lines.append(f"stage_scale {list(scale)}: makespan {tl.makespan:.4g}, bubble "
                     f"{tl.bubble_fraction:.1%} of total")
    assert abs(spans[(1, 1, 1, 1.3)] - (33 + 8 * 0.9)) < 1e-9
    assert spans[(1.3, 1, 1, 1)] < spans[(1, 1, 1, 1.3)]
    last, first = (spans[k] - spans[(1, 1, 1, 1)] for k in ((1, 1, 1, 1.3), (1.3, 1, 1, 1)))
    lines += [f"A 30 % slower last stage adds 0.3 × (tf + tb) = 0.9 per microbatch, 8 times: "
              f"+{last:.1f}. In 1F1B's steady state every rank waits for the slowest, so the "
              f"step grows by up to M times the slow stage's extra time, not 1/P of it.",
              f"A slow first stage costs less, +{first:.1f}: the other ranks absorb part of it "
              f"in their warm-up and drain. Where the slow stage sits matters, so the simulator, "
              f"not a formula, gives the answer."]
    return "\n".join(lines)


@_reveals("11.head-layers")
def _head_layers() -> str:
    from ..canvases.balance import balance_timeline, layer_costs, partition_costs
    from .measure import lm_head_layers
    h, ffn, vocab = 4096, 14336, 128_256
    head = lm_head_layers(h, ffn, vocab)
    lines = [f"one layer 2·(4h² + 3h·ffn) = {2 * (4 * h * h + 3 * h * ffn) / 1e9:.3f} GFLOP per "
             f"token, the LM head 2·h·vocab = {2 * h * vocab / 1e9:.3f}: {head:.2f} layers"]
    costs = layer_costs(32, embed=0.0, head=head)       # the embedding is a lookup: ~free
    spans = {}
    for method in ("even", "balanced"):
        parts, stage = partition_costs(costs, 4, method)
        spans[method] = balance_timeline(stage, M=8).makespan
        lines.append(f"{method:8s}: layers per stage {[len(r) for r in parts]}, stage cost "
                     f"{[round(c, 2) for c in stage]}, 1F1B makespan {spans[method]:.4g}")
    perfect = (8 + 4 - 1) * 3
    assert [len(r) for r in partition_costs(costs, 4, "balanced")[0]] == [8, 9, 9, 6]
    assert perfect < spans["balanced"] < spans["even"]
    even, balanced = (spans[k] / perfect - 1 for k in ("even", "balanced"))
    lines.append(f"perfect balance {perfect}: the even split is {even:+.0%}, the balanced one "
                 f"{balanced:+.1%}; what remains is granularity, a stage holds whole layers.")
    return "\n".join(lines)


@_reveals("13.vhalf-peak")
def _vhalf_peak() -> str:
    from ..timeline import peak_inflight
    lines = []
    for P in (4, 8, 16):
        one, half = (max(peak_inflight(make_schedule(n, P, 4 * P), stage_equivalents=True))
                     for n in ("1f1b", "v-half"))
        assert one == P and half == (P + 2) // 2
        lines.append(f"P={P:2d}, M={4 * P:2d}: V-Half peak {half:g} of 1F1B's {one:g} "
                     f"stage-equivalents ({half / one:.1%})")
    lines.append("V-Half holds one stage-equivalent more than an exact half, (P + 2)//2: the "
                 "paper's names are round, and the extra stage matters less as P grows.")
    return "\n".join(lines)


_SEARCH_COSTS = dict(tf=1, tb=2, tw=1)


def _searched(P: int, M: int, V: int, cap: int):
    from ..search import search
    return search(P, M, V, Costs(**_SEARCH_COSTS), cap=cap, evaluations=300)


@_reveals("13.search-cap2")
def _search_cap2() -> list:
    from ..draw import draw_timeline
    from ..timeline import peak_inflight
    r = _searched(4, 8, 1, 2)
    naive = simulate(make_schedule("naive", 4, 8), Costs(**_SEARCH_COSTS))
    lines = [f"search, V = 1, C = 2: makespan {r.makespan:g} (naive {naive.makespan:g}), "
             f"peak per rank {r.peak_inflight}",
             "The same memory in a V (a chunk is half a stage, so C half-stage chunks hold "
             "C/2 stage-equivalents):",
             "  stage-equiv.  V = 1 search   V family          V = 2 search"]
    for name in ("v-min", "v-half", "v-zb"):
        s = make_schedule(name, 4, 8)
        held = max(peak_inflight(s, stage_equivalents=True))
        v1, v2 = _searched(4, 8, 1, int(held)), _searched(4, 8, 2, int(2 * held))
        tl = simulate(s, Costs(**_SEARCH_COSTS))
        assert v2.makespan <= tl.makespan < v1.makespan
        lines.append(f"  {held:12g}  {v1.makespan:12g}   {name:6s} {tl.makespan:6g}    "
                     f"{v2.makespan:6g}")
    assert r.makespan < naive.makespan and max(r.peak_inflight) <= 2
    lines.append("Under the same memory the V placement beats every order of one stage per "
                 "rank the search finds: each rank's two chunks keep it busy while a microbatch "
                 "travels to the V's bottom and back.")
    return ["\n".join(lines), draw_timeline(r.timeline, title="search, V = 1, cap C = 2")]


@_reveals("13.search-vs-zbh1")
def _search_vs_zbh1() -> str:
    z = simulate(make_schedule("zb-h1", 4, 8), Costs(**_SEARCH_COSTS))
    r = _searched(4, 8, 1, 4)
    assert r.makespan == z.makespan == 3 * 8 + 3 * (1 + 2 - 2 * 1)
    return (f"C = 4: ZB-H1 {z.makespan:g}, search {r.makespan:g} (grown from {r.seed}), peak "
            f"per rank {r.peak_inflight}. ZB-H1 idles (P − 1)(tf + tb − 2tw) = 3 per rank; no "
            f"single-op move from it, or from the list scheduler's start, found less.")


@_reveals("13.dualpipe-tfb")
def _dualpipe_tfb() -> str:
    P, M = 4, 16
    tls = {n: simulate(make_schedule(n, P, M), Costs(**_SEARCH_COSTS, tfb=3.0))
           for n in ("1f1b", "zb-h1", "dualpipe")}
    busy = M * 3
    assert tls["dualpipe"].makespan == busy + (P // 2 - 1) * (3 + 2 - 3 * 1)
    assert tls["zb-h1"].makespan == busy + (P - 1) * (1 + 2 - 2 * 1)
    return "\n".join([
        f"P = {P}, M = {M}, tf = 1, tb = 2, tw = 1, no all-to-all, F&B = tf + tb = 3:",
        f"  DualPipe {tls['dualpipe'].makespan:g} = M·(tf + tb) + (P/2 − 1)(F&B + B − 3W) = "
        f"{busy} + {(P // 2 - 1) * 2}  (DeepSeek-V3, Table 2)",
        f"  ZB-H1    {tls['zb-h1'].makespan:g} = M·(tf + tb) + (P − 1)(tf + tb − 2tw) = {busy} + 3",
        f"  1F1B     {tls['1f1b'].makespan:g}",
        "With nothing to hide DualPipe keeps one time unit over ZB-H1, for two copies of the "
        "parameters."])


@_reveals("12.m-lt-p")
def _m_lt_p() -> str:
    from ..probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("torch_refuses(\"Schedule1F1B\", P=4, M=2), pplab.runtime.torch_bridge")
    from ..runtime.torch_bridge import torch_refuses
    assert torch_refuses("Schedule1F1B", P=4, M=2)
    assert torch_refuses("Schedule1F1B", P=4, M=4) is None
    inflight = simulate(make_schedule("1f1b", 4, 2)).peak_inflight
    return "\n".join([
        f"pplab 1f1b P=4 M=2: in flight per rank {inflight}",
        f"torch Schedule1F1B, 4 stages, M=2: {torch_refuses('Schedule1F1B', P=4, M=2)}",
        f"torch ScheduleGPipe, 4 stages, M=2: "
        f"{torch_refuses('ScheduleGPipe', P=4, M=2) or 'accepted'}"])


@_reveals("12.scale-grads")
def _scale_grads() -> str:
    from ..probe.env import browser_note, in_browser
    if in_browser():
        return browser_note("torch_pipeline_grad_ratio(M=4) from pplab.runtime.torch_bridge")
    from ..runtime.torch_bridge import torch_pipeline_grad_ratio
    ratios = {s: torch_pipeline_grad_ratio(M=4, scale_grads=s) for s in (True, False)}
    assert abs(ratios[False] - 4) < 1e-4 and abs(ratios[True] - 1) < 1e-4
    return "\n".join(f"scale_grads={s!s:5s}: |pipeline gradient| / |full-batch gradient| = "
                     f"{r:.4f}" for s, r in ratios.items())


@_reveals("14.m-per-replica")
def _m_per_replica() -> str:
    from ..memory.published_run import TABLE4, check_row
    assert [r.batch_per_dp for r in TABLE4[:2]] == [32, 16]
    assert TABLE4[0].sequences // 16 == 128          # the CS336 notes' 128: this batch over DP 16
    return "\n".join(line for r in TABLE4 for line in check_row(r))


@_reveals("14.denominators")
def _denominators() -> str:
    from ..memory.published_run import bubble
    lines = ["P=16, M=32, equal chunks",
             " V  V·M  idle÷busy  (P-1)/(V·M)  idle÷total  (P-1)/(V·M+P-1)"]
    for V in (1, 2, 4, 8):
        b = bubble(16, 32, V, uneven=False)
        assert abs(b["ratio"] - 15 / (32 * V)) < 1e-12
        assert abs(b["fraction"] - 15 / (32 * V + 15)) < 1e-12
        lines.append(f"{V:2d}  {32 * V:3d}  {b['ratio']:9.1%}  {b['closed_ratio']:11.1%}  "
                     f"{b['fraction']:10.1%}  {b['closed_fraction']:15.1%}")
    lines.append("the CS336 notes' 15/79 is the V·M = 64 row ÷ total, their 15/143 the "
                 "V·M = 128 row")
    lines.append("idle ÷ (P·makespan) is GPipe's and Zero Bubble's \"bubble rate\"; idle ÷ busy "
                 "is Megatron-LM's, and the Llama 3 paper's (PP − 1)/(V·M). With equal chunks "
                 "the simulator gives (P−1)/(V·M + P−1) and (P−1)/(V·M) exactly (lesson 05): "
                 "each pass of a microbatch through the fill and drain idles (P−1)/V of a "
                 "rank's time.")
    from ..closed_forms import bubble_fraction
    from ..memory.published_run import lecture_claims
    assert abs(bubble_fraction(16, 128) - 15 / 143) < 1e-12
    lines.append("The CS336 notes' inputs against Table 4 (section 4 reads them):")
    for c in lecture_claims():
        assert not c["ok"]
        lines.append(f"  notes: {c['claim']}\n     Table 4: {c['table']}")
    return "\n".join(lines)


@_reveals("14.lighter-ends")
def _lighter_ends() -> str:
    from ..memory.published_run import bubble, chunk_scales
    lines = [f"chunk FLOPs ÷ the mean chunk: first {chunk_scales(16, 32, 8)[0]:g}, others "
             f"{chunk_scales(16, 32, 8)[1]:g}, last {chunk_scales(16, 32, 8)[-1]:g}"]
    for M in (32, 16):
        eq, ll = bubble(16, M, 8, uneven=False), bubble(16, M, 8)
        assert abs(ll["fraction"] - eq["fraction"]) < 0.005
        lines.append(f"M={M}: idle÷total {eq['fraction']:.2%} equal → {ll['fraction']:.2%} "
                     f"Llama 3's; idle÷busy {eq['ratio']:.2%} → {ll['ratio']:.2%}")
    return "\n".join(lines)


@_reveals("14.grad-gb")
def _grad_gb() -> str:
    from ..memory.published_run import TABLE4, gradient_ways, memory_table
    lines = []
    for row in TABLE4[:2]:
        for w in gradient_ways(row):
            how = "summed whole, reduced once a step" if w["mode"] == "per_step" else \
                "reduce-scattered every microbatch"
            lines.append(f"{row.label}, gradients {how}: rank {w['rank']} holds "
                         f"{w['grads'] / 1e9:.2f} GB of them, {w['total'] / 1e9:.1f} GB in all "
                         f"({'fits in' if w['fits'] else 'over'} 80 GB); DP sends "
                         f"{w['dp_bytes'] / 1e9:.1f} GB a step")
    once, every = gradient_ways(TABLE4[0])
    assert once["grads"] > 7 * every["grads"] and every["dp_bytes"] > 20 * once["dp_bytes"]
    assert not once["fits"] and not every["fits"]
    rows = memory_table(TABLE4[0])
    lines += ["", "memory per GPU of each pipeline rank, 8,192 GPUs (GB):"] + rows[:4] + \
        ["   ..."] + rows[-2:]
    return "\n".join(lines)


@_reveals("14.mfu-bubble")
def _mfu_bubble() -> str:
    from ..memory.published_run import TABLE4, mfu_budget
    lines = ["row                        MFU   bubble÷total  busy util.  bubble costs  rest"]
    for row in TABLE4:
        b = mfu_budget(row)
        lines.append(f"{row.label:25s} {b['mfu']:5.1%}  {b['bubble_fraction']:12.1%}  "
                     f"{b['busy']:10.1%}  {b['bubble_points'] * 100:9.1f} pt  "
                     f"{b['rest_points'] * 100:4.1f} pt")
    first = mfu_budget(TABLE4[0])
    assert 0.02 < first["bubble_points"] < 0.035 and first["rest_points"] > 0.5
    lines.append("An idle rank computes nothing, so MFU = (1 − bubble ÷ total) × (share of peak "
                 "reached while the ranks compute). The rest is whatever slows the busy ranks: "
                 "matmuls below peak, communication not hidden, stragglers. The CS336 notes' "
                 "\"~47%, ~9 points\" is the same identity applied to the long-context row's 38% "
                 "and a 19% bubble the run did not have.")
    return "\n".join(lines)
