"""Lesson 13: schedules for a memory budget (the V family, search under a cap, DualPipe's F&B)."""
from functools import lru_cache

from ...registry import make_schedule
from ...timeline import peak_inflight
from ..measure import timeline
from ..questions import Option, Question

_COSTS = dict(tf=1, tb=2, tw=1)


def peak_share_pct(name: str, P: int, M: int) -> float:
    """A schedule's peak activations (stage-equivalents, worst rank) as % of 1F1B's."""
    def peak(n):
        return max(peak_inflight(make_schedule(n, P, M), stage_equivalents=True))
    return 100 * peak(name) / peak("1f1b")


# The budget of the lesson's own search cell, so an answer here is what the student's cell finds.
SEARCH_EVALUATIONS = 100


@lru_cache(maxsize=None)
def searched(P: int, M: int, V: int, cap: int):
    """What ``pplab.search`` finds under a cap of ``cap`` microbatches per rank (kept: the
    answer and its measurement ask for the same searches)."""
    from ...search import search
    from ...sim import Costs
    return search(P, M, V, Costs(**_COSTS), cap=cap, evaluations=SEARCH_EVALUATIONS)


def searched_makespan(P: int, M: int, cap: int) -> float:
    """The makespan the search finds with one stage per rank."""
    return searched(P, M, 1, cap).makespan


QUESTIONS = (
    Question(
        "13.vhalf-peak", "predict", "number",
        "P = 16, M = 64, tf = 1, tb = 2, tw = 1. V-Half's peak activations on its worst rank, "
        "as a % of 1F1B's peak (both in stage-equivalents)?",
        answer=lambda: peak_share_pct("v-half", 16, 64), unit="%",
        traps=((50.0, "Half is the paper's round name; pplab's V-Half holds one "
                      "stage-equivalent more than an exact half."),
               (100.0, "That is V-ZB (and ZB-V): the V placement alone does not save memory."),
               (33.3, "About a third is what V-Min tends to as P grows, not V-Half.")),
        explain="Peaks are counted in stage-equivalents: a V chunk is half a stage, so V-Half's "
                "peak is a whole number of half-stages over 1F1B's P."),
    Question(
        "13.search-cap2", "predict", "number",
        "P = 4, M = 8, tf = 1, tb = 2, tw = 1, one stage per rank (V = 1), and a cap of C = 2 "
        "activations per rank: among the built-ins with one stage per rank only `naive` "
        "(makespan 96) fits. What makespan will the search find?",
        answer=lambda: searched_makespan(4, 8, 2), tol=0.0,
        traps=((96, "The search starts from every built-in that fits, then improves on it: "
                    "it does much better than naive."),
               (27, "27 is ZB-H1, which needs 4 microbatches per rank; C = 2 forbids its "
                    "warm-up.")),
        explain="With two microbatches per rank each rank still overlaps a forward with a "
                "backward; the fill is what the cap takes away."),
    Question(
        "13.search-vs-zbh1", "predict", "choice",
        "Same costs, but C = 4: ZB-H1 fits (peak 4 per rank, makespan 27). The search's best "
        "schedule is…",
        options=(Option("shorter: moving single ops finds slack a hand-made order leaves",
                        "Under this cap ZB-H1 already sits at its (P−1)(tf + tb − 2tw) bound; "
                        "single-op moves find nothing shorter, so the search ties it."),
                 Option("the same: ZB-H1 already reaches what this cap allows",
                        "The search starts from every built-in that fits, so it cannot lose, "
                        "and here it finds nothing better.", True),
                 Option("longer: a search on a time budget misses what ZB-H1 found",
                        "ZB-H1 fits C = 4 and is one of the search's starting points, so the "
                        "search never returns anything longer.")),
        explain="The search starts from ZB-H1 here and keeps any move that does not lengthen "
                "the step; none shortens it."),
    Question(
        "13.dualpipe-tfb", "predict", "number",
        "DualPipe at P = 4, M = 16, with no all-to-all: every pass is its compute, tf = 1, "
        "tb = 2, tw = 1, and an F&B pair hides nothing, F&B = tf + tb = 3. ZB-H1's makespan is "
        "51. What is DualPipe's?",
        answer=lambda: timeline("dualpipe", 4, 16, tfb=3.0, **_COSTS).makespan, tol=0.0,
        traps=((48, "48 is the work alone, M·(tf + tb): DualPipe still fills and drains, "
                    "from both ends."),
               (51, "Close, but DualPipe's bidirectional fill still saves a little over ZB-H1."),
               (57, "57 is 1F1B: DualPipe keeps its split backward and its two directions.")),
        explain="DualPipe's bubble, (P/2 − 1)(F&B + B − 3W) in DeepSeek-V3's Table 2 (B the "
                "whole backward, tb here; W the weight pass, tw), grows with the pair's cost F&B, "
                "and so does every steady-state pair: without the overlap DualPipe is about "
                "one time unit shorter than ZB-H1, for twice the parameters."),
    Question(
        "13.q-half-budget", "quiz", "choice",
        "P = 8: you can afford half of 1F1B's peak activations per rank. Which built-in fits "
        "with the smallest bubble?",
        options=(Option("V-Half", "Measured in section 1: pplab's V-Half needs more than half "
                        "(a little over 60%)."),
                 Option("V-Min", "At P = 8 its peak, (P + 4)//3 = 4, is exactly half of "
                        "1F1B's (it tends to a third as P grows); it pays with the largest "
                        "bubble of the V family.", True),
                 Option("ZB-H1", "ZB-H1 holds as much as 1F1B's first rank, on every rank."),
                 Option("naive", "It fits, but runs one microbatch at a time through the "
                        "whole pipeline: its bubble is far larger."))),
    Question(
        "13.q-overlap", "quiz", "choice",
        "A lone forward lasts F = tf + fa (its compute, then its expert all-to-all), a lone "
        "backward B = tb + ba. What must be true for DualPipe's F&B pair to last less than "
        "F + B?",
        options=(Option("Each chunk's all-to-all runs under the other chunk's compute",
                        "The computations still run back to back; the pair is shorter than "
                        "F + B by the all-to-all it hides (DeepSeek-V3 gives 20 of 132 SMs "
                        "to the communication).", True),
                 Option("The two chunks' computations run at once on the same SMs",
                        "They share the SMs and run one after the other, so a pair never "
                        "lasts less than tf + tb; only communication overlaps compute."),
                 Option("Each all-to-all is shorter than the compute it hides under",
                        "Not needed: a pair lasts its longest chain, max(tf + tb, fa + ba, "
                        "tf + fa, tb + ba), below F + B whenever there is an all-to-all. "
                        "At fa = 3, ba = 0.5 the pair lasts 4 against F + B = 6.5."),
                 Option("The microbatches outnumber the ranks by a wide margin",
                        "M sets how many pairs a step has, not whether a pair overlaps; the "
                        "overlap is up to the kernels."))),
)


# ---- measurements: each shown under its question once its guess is committed
from ..reveals import _reveals
from ...registry import make_schedule
from ...sim import Costs, simulate


@_reveals("13.vhalf-peak")
def _vhalf_peak() -> str:
    from ...timeline import peak_inflight
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



@_reveals("13.search-cap2")
def _search_cap2() -> list:
    from ...draw import draw_timeline
    from ...timeline import peak_inflight
    r = searched(4, 8, 1, 2)
    naive = simulate(make_schedule("naive", 4, 8), Costs(**_COSTS))
    lines = [f"search, V = 1, C = 2: makespan {r.makespan:g} (naive {naive.makespan:g}), "
             f"peak per rank {r.peak_inflight}",
             "The same memory in a V (a chunk is half a stage, so C half-stage chunks hold "
             "C/2 stage-equivalents):",
             "  stage-equiv.  V = 1 search   V family          V = 2 search"]
    for name in ("v-min", "v-half", "v-zb"):
        s = make_schedule(name, 4, 8)
        held = max(peak_inflight(s, stage_equivalents=True))
        v1, v2 = searched(4, 8, 1, int(held)), searched(4, 8, 2, int(2 * held))
        tl = simulate(s, Costs(**_COSTS))
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
    z = simulate(make_schedule("zb-h1", 4, 8), Costs(**_COSTS))
    r = searched(4, 8, 1, 4)
    assert r.makespan == z.makespan == 3 * 8 + 3 * (1 + 2 - 2 * 1)
    return (f"C = 4: ZB-H1 {z.makespan:g}, search {r.makespan:g} (grown from {r.seed}), peak "
            f"per rank {r.peak_inflight}. ZB-H1 idles (P − 1)(tf + tb − 2tw) = 3 per rank; no "
            f"single-op move from it, or from the list scheduler's start, found less.")


@_reveals("13.dualpipe-tfb")
def _dualpipe_tfb() -> str:
    P, M = 4, 16
    tls = {n: simulate(make_schedule(n, P, M), Costs(**_COSTS, tfb=3.0))
           for n in ("1f1b", "zb-h1", "dualpipe")}
    busy = M * 3
    assert tls["dualpipe"].makespan == busy + (P // 2 - 1) * (3 + 2 - 3 * 1)
    assert tls["zb-h1"].makespan == busy + (P - 1) * (1 + 2 - 2 * 1)
    return "\n".join([
        f"P = {P}, M = {M}, tf = 1, tb = 2, tw = 1, no all-to-all, F&B = tf + tb = 3:",
        f"  DualPipe {tls['dualpipe'].makespan:g} = M·(tf + tb) + (P/2 − 1)(F&B + B − 3W) = "
        f"{busy} + {(P // 2 - 1) * 2}  (DeepSeek-V3, Table 2; B = tb, W = tw)",
        f"  ZB-H1    {tls['zb-h1'].makespan:g} = M·(tf + tb) + (P − 1)(tf + tb − 2tw) = {busy} + 3",
        f"  1F1B     {tls['1f1b'].makespan:g}",
        "With nothing to hide DualPipe is one time unit shorter than ZB-H1, for two copies of "
        "the parameters."])
