"""``pplab plan``: every TP × PP × DP layout of a model on a number of GPUs, fastest first,
each row with whether it fits and by how much; ``--export torchtitan|megatron`` prints the
fastest layout that tool can run in its own configuration language."""
from __future__ import annotations

import argparse
import json

from ..memory.export import TOOLS, cannot_run, megatron_text, torchtitan_toml
from ..memory.plan_text import misses, plan_rows
from ..memory.activations import ACTIVATION_MODELS
from ..memory.parallel import RECOMPUTE, ZERO3_REGATHER, ParallelConfig
from ..memory.planner import LEAVES_OUT, split_ends, mfu, plan, rank_among, sized
from ..memory.units import fmt_bytes, fmt_count, fmt_seconds
from ..registry import spec
from .sizing import add_hardware_arguments, add_model_arguments, hardware_from_args, \
    hardware_title, model_flags, model_from_args

DEFAULT_SCHEDULES = ("1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "gpipe")


def add_plan_arguments(g, note: str = "") -> None:
    """The flags a plan needs beyond the model and the hardware (``note``: "with --plan: "
    where another command offers the planner as an option)."""
    g.add_argument("--global-batch", type=int, default=None,
                   help=f"{note}sequences per step (default: 8 per GPU)")
    g.add_argument("--max-pp", type=int, default=None,
                   help=f"{note}deepest pipeline tried (default: every depth the layers "
                        "allow)")
    g.add_argument("--top", type=int, default=10,
                   help=f"{note}fitting layouts shown, 0 for all (default: 10)")


def add_activations_argument(g) -> None:
    g.add_argument("--activations", default="korthikanti", choices=ACTIVATION_MODELS,
                   help="how a layer's kept activations are counted: Korthikanti's GPT layer, "
                        "or the tensors a Llama-style layer keeps for its backward "
                        "(default: %(default)s)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--gpus", type=int, required=True,
                   help="GPUs to spread the model over: TP × PP × DP (required)")
    add_hardware_arguments(p)
    g = p.add_argument_group("search")
    add_plan_arguments(g)
    add_activations_argument(g)
    g.add_argument("--mbs", type=_sizes, default=(1,), metavar="B[,B...]",
                   help="microbatch sizes in sequences to search, e.g. 1,2,4; one for a named "
                        "layout (default: 1)")
    g.add_argument("--eps", type=_sizes, default=(1,), metavar="E[,E...]",
                   help="expert-parallel degrees to search for a MoE model, e.g. 1,8,64; each "
                        "where it divides DP·CP and the experts (default: 1)")
    g.add_argument("--schedules", default=",".join(DEFAULT_SCHEDULES), metavar="NAMES",
                   help="comma-separated schedules tried when PP > 1 (default: %(default)s)")
    g.add_argument("--first-layers", type=int, default=None,
                   help="layers on the first pipeline stage (default: an even split, or the "
                        "ends taking the remainder)")
    g.add_argument("--last-layers", type=int, default=None,
                   help="layers on the last pipeline stage (default: as --first-layers)")
    g.add_argument("--grad-bytes", type=float, default=2,
                   help="bytes per gradient value, every layout's: 4 for FP32 gradients "
                        "(default: %(default)s)")
    g.add_argument("--optim-bytes", type=float, default=12,
                   help="optimizer bytes per parameter, every layout's: 12 for FP32 master "
                        "weights and Adam moments, 8 with BF16 moments (default: %(default)s)")
    n = p.add_argument_group("a layout of your own (any of these names one: it is sized, "
                             "ranked among the candidates and exported instead of the first)")
    n.add_argument("--tp", type=int, default=None, help="tensor-parallel ranks (default: 1)")
    n.add_argument("--cp", type=int, default=None,
                   help="context-parallel ranks, each with s/CP of every sequence (default: 1)")
    n.add_argument("--pp", type=int, default=None, help="pipeline ranks (default: 1)")
    n.add_argument("--ep", type=int, default=None,
                   help="expert-parallel ranks among DP·CP (default: 1)")
    n.add_argument("--dp", type=int, default=None,
                   help="data-parallel replicas (default: GPUs ÷ (TP·CP·PP))")
    n.add_argument("--zero", type=int, default=None, choices=range(4), metavar="{0,1,2,3}",
                   help="ZeRO stage, 3 = FSDP (default: 1 with DP > 1, else 0)")
    n.add_argument("--zero3-regather", default="per_microbatch", choices=ZERO3_REGATHER,
                   help="ZeRO-3 under PP: gather for every F and B, or keep the parameters "
                        "gathered for the step (default: %(default)s)")
    n.add_argument("--schedule", "-s", default=None, metavar="NAME",
                   help="pipeline schedule (default: 1f1b, interleaved when -V > 1)")
    n.add_argument("-V", type=int, default=None,
                   help="stages per pipeline rank (default: the schedule's)")
    n.add_argument("-M", type=int, default=None,
                   help="microbatches per step per replica (default: global batch ÷ (DP·b))")
    n.add_argument("--recompute", default=None, choices=RECOMPUTE,
                   help="activation recomputation (default: selective)")
    n.add_argument("--sp", default=None, action=argparse.BooleanOptionalAction,
                   help="sequence parallelism (default: on when TP > 1)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true",
                   help="a JSON list of layouts, fastest first (seconds, bytes)")
    o.add_argument("--export", choices=tuple(TOOLS), default=None,
                   help="print the fastest layout this tool can run (or the one named with "
                        "--tp/--pp/...), in its own config language (default: none)")


def _sizes(text: str) -> tuple[int, ...]:
    """"1,2,4" → (1, 2, 4): the microbatch sizes to search."""
    try:
        out = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of sizes like 1,2,4") \
            from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one microbatch size")
    return out


def _mbs(a) -> tuple[int, ...]:
    """The microbatch sizes: plan's list, or memory's one size (pplab memory --plan)."""
    return a.mbs if isinstance(a.mbs, tuple) else (a.mbs,)


def _check(a, model) -> tuple[str, ...]:
    """Every flag checked before any planning: one line naming the flag, exit 2."""
    if a.gpus < 1:
        raise ValueError(f"--gpus must be ≥ 1, got {a.gpus}")
    for flag, value in (("--mbs", min(_mbs(a))), ("--max-pp", a.max_pp), ("--global-batch",
                        a.global_batch)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be ≥ 1, got {value}")
    for flag, value in (("--grad-bytes", getattr(a, "grad_bytes", 2)),
                        ("--optim-bytes", getattr(a, "optim_bytes", 12))):
        if not 0 < value < 64:
            raise ValueError(f"{flag} is bytes per parameter, more than 0 and under 64; "
                             f"got {value:g}")
    if a.top < 0:
        raise ValueError(f"--top must be ≥ 0 (0: all), got {a.top}")
    ends = [(f, v) for f, v in (("--first-layers", a.first_layers),
                                ("--last-layers", a.last_layers)) if v is not None]
    for flag, v in ends:
        if not 0 <= v < model.layers:
            raise ValueError(f"{flag} {v}: a stage holds 0 to {model.layers - 1} of "
                             f"{model.name}'s {model.layers} layers")
    if ends and sum(v for _, v in ends) > model.layers:
        raise ValueError(f"--first-layers + --last-layers = {sum(v for _, v in ends)} > "
                         f"{model.name}'s {model.layers} layers")
    if getattr(a, "json", False) and getattr(a, "export", None):
        raise ValueError("--json and --export do not combine: --export prints the tool's own "
                         "configuration; drop one")
    if not hasattr(a, "schedules"):
        return DEFAULT_SCHEDULES
    names = tuple(spec(n.strip()).name for n in a.schedules.split(",") if n.strip())
    if not names:
        raise ValueError("--schedules needs at least one name, e.g. --schedules 1f1b")
    return names


def run_plan(a) -> int:
    """Plan and print (also ``pplab memory --plan``, whose flags are a superset)."""
    model, hw = model_from_args(a), hardware_from_args(a)
    if getattr(a, "gpus", None) is None:
        raise ValueError(f"--plan needs --gpus N (pplab plan {model_flags(a)} --gpus N)")
    names = _check(a, model)
    tool = getattr(a, "export", None)
    limits = {} if tool is None else {"schedules": tuple(n for n in names if n in
                                                         TOOLS[tool].schedules),
                                      "zero_stages": TOOLS[tool].zero_stages}
    if tool and TOOLS[tool].zero3_regather:
        limits["zero3_regather"] = TOOLS[tool].zero3_regather
    search = dict(global_batch=a.global_batch, micro_batches=_mbs(a), max_pp=a.max_pp,
                  first_layers=getattr(a, "first_layers", None),
                  last_layers=getattr(a, "last_layers", None), schedules=names,
                  activations=a.activations, eps=getattr(a, "eps", (1,)),
                  bytes_grad=getattr(a, "grad_bytes", 2),
                  bytes_optim=getattr(a, "optim_bytes", 12))
    mine = _named(a, model) if getattr(a, "command", "plan") == "plan" else None
    if mine is not None:
        return _named_report(a, model, hw, mine, tool, search)
    cands = plan(model, a.gpus, hw, **(search | limits))
    if tool:
        overall = next((c for c in plan(model, a.gpus, hw, **search) if c.feasible), None)
        return _export(a, model, hw, cands, tool, overall)
    top = a.top or len(cands)
    if a.json:
        print(json.dumps([c.to_dict() for c in [c for c in cands if c.feasible][:top]]
                         + [c.to_dict() for c in misses(cands, top)]))
        return 0
    ok = [c for c in cands if c.feasible]
    print(f"{model.name} ({fmt_count(model.num_params())} parameters, seq {model.seq}) on "
          f"{a.gpus} × {hardware_title(a, hw)}")
    print(f"global batch {a.global_batch or 8 * a.gpus} sequences; {len(ok)} of "
          f"{len(cands)} layouts fit (choices that tie with or lose to a listed one are "
          f"pruned){'; the fastest:' if ok else ''}")
    print("\n".join(plan_rows(ok[:top])))
    bad = misses(cands, 5)
    if bad:
        print("some that do not fit, and why:")
        print("\n".join("  " + c.describe() for c in bad))
    print("the time model leaves out: " + "; ".join(LEAVES_OUT[:2]) +
          "; … (pplab memory --explain with a layout)")
    return 0


NAMED = ("tp", "cp", "pp", "dp", "ep", "zero", "schedule", "V", "M", "recompute", "sp")


def _named(a, model) -> ParallelConfig | None:
    """The layout the user names with --tp/--pp/... (None when none of them is given); the
    degrees must multiply to --gpus and M·b·DP to --global-batch when both are given."""
    if all(getattr(a, k) is None for k in NAMED):
        return None
    tp, cp, pp = a.tp or 1, a.cp or 1, a.pp or 1
    if min(tp, cp, pp, a.dp or 1) < 1:
        raise ValueError("--tp, --cp, --pp and --dp must be ≥ 1")
    if a.gpus % (tp * cp * pp):
        raise ValueError(f"TP·CP·PP = {tp * cp * pp} does not divide --gpus {a.gpus}")
    dp = a.dp or a.gpus // (tp * cp * pp)
    if tp * cp * pp * dp != a.gpus:
        raise ValueError(f"TP·CP·PP·DP = {tp}·{cp}·{pp}·{dp} = {tp * cp * pp * dp} ≠ --gpus "
                         f"{a.gpus}")
    gb = a.global_batch or 8 * a.gpus
    if len(a.mbs) > 1:
        raise ValueError(f"a named layout has one microbatch size; got --mbs "
                         f"{','.join(map(str, a.mbs))}")
    b = a.mbs[0]
    if a.M is None and gb % (dp * b):
        raise ValueError(f"--global-batch {gb} is not a multiple of DP·b = {dp * b}; "
                         "give -M or another batch")
    M = a.M or gb // (dp * b)
    if a.global_batch and M * b * dp != a.global_batch:
        raise ValueError(f"-M {M} × b {b} × DP {dp} = {M * b * dp} ≠ --global-batch "
                         f"{a.global_batch}; drop one")
    sp = (tp > 1) if a.sp is None else a.sp
    if sp and tp == 1:
        raise ValueError("--sp needs --tp ≥ 2: sequence parallelism splits what the TP ranks "
                         "would each hold whole")
    name = spec(a.schedule).name if a.schedule else ("interleaved" if (a.V or 1) > 1
                                                      else "1f1b")
    zero = a.zero if a.zero is not None else (1 if dp > 1 else 0)
    # no --first/--last-layers: the ends the planner gives the same depth and schedule
    first, last = split_ends(model, pp, name, a.V, a.first_layers, a.last_layers, M)
    return ParallelConfig(tp, pp, dp, zero, sp, a.recompute or "selective", b, M, name,
                          a.V, zero3_regather=a.zero3_regather, first_layers=first,
                          last_layers=last, cp=cp, activations=a.activations, ep=a.ep or 1,
                          bytes_grad=a.grad_bytes, bytes_optim=a.optim_bytes)


def _named_report(a, model, hw, cfg, tool, search) -> int:
    """The named layout: fit, bytes per rank, step, MFU, its place among the candidates and
    what the faster ones do differently; or its export."""
    mine, per_rank = sized(model, cfg, hw)
    if tool:
        why = cannot_run(tool, model, cfg)
        if why:
            raise ValueError(f"cannot export to {TOOLS[tool].title}: {why}")
        head = [f"{TOOLS[tool].title} layout named to pplab plan: {model.name}, seq "
                f"{model.seq}, {a.gpus} × {a.gpu}", mine.layout(),
                f"estimated step {fmt_seconds(mine.step_time, 4)}, {mine.fit_text()}"]
        body = torchtitan_toml(model, cfg, model.seq) if tool == "torchtitan" else \
            megatron_text(model, cfg, model.seq)
        print("".join(f"# {line}\n" for line in head) + body, end="")
        return 0
    cps = (1, cfg.cp) if cfg.cp > 1 else (1,)
    # the named layout's own b, CP and V are among those searched, so it meets its own kind
    search = search | {"micro_batches": tuple(sorted({1, cfg.microbatch})), "cps": cps,
                       "virtual": tuple(sorted({2, 4, cfg.virtual or 2})),
                       "global_batch": cfg.microbatches * cfg.microbatch * cfg.dp}
    cands = [c for c in plan(model, a.gpus, hw, **search) if c.feasible]
    rank, util = rank_among(mine, cands), mfu(model, cfg, mine.step_time, hw)
    first = cands[0] if cands else None
    if a.json:
        print(json.dumps(mine.to_dict() | {
            "step_s": mine.step_time, "mfu": util, "per_rank_bytes": per_rank,
            "rank": rank, "of": len(cands), "first_choice": first.to_dict() if first else None}))
        return 0
    print(f"{model.name} ({fmt_count(model.num_params())} parameters, seq {model.seq}) on "
          f"{a.gpus} × {hardware_title(a, hw)}")
    print(f"your layout: {mine.layout()}")
    print(f"  memory: peak {fmt_bytes(mine.peak_bytes)} on rank {mine.peak_rank}: "
          f"{mine.fit_text()}; per pipeline rank " +
          " ".join(fmt_bytes(b) for b in per_rank))
    print(f"  step ≈ {fmt_seconds(mine.step_time, 4)}: bubble {mine.bubble_fraction:.1%}, "
          f"exposed communication {fmt_seconds(mine.exposed_comm)}; MFU {util:.1%} (model "
          f"FLOPs ÷ {a.gpus} GPUs × {hw.flops / 1e12:g} TFLOP/s)")
    place = "ranks" if mine.feasible else "would rank (if it fit)"
    print(f"  {place} {rank} of the {len(cands)} fitting layouts pplab lists")
    if first is not None and first.step_time < mine.step_time * (1 - 1e-9):
        print(f"  the first choice, {first.layout()}, is "
              f"{mine.step_time / first.step_time - 1:.1%} faster: bubble "
              f"{first.bubble_fraction:.1%} against {mine.bubble_fraction:.1%}, exposed "
              f"communication {fmt_seconds(first.exposed_comm)} against "
              f"{fmt_seconds(mine.exposed_comm)}, peak {fmt_bytes(first.peak_bytes)}")
    print("the time model leaves out: " + "; ".join(LEAVES_OUT[:2]) +
          "; … (pplab memory --explain with a layout)")
    return 0


def _export(a, model, hw, cands, tool: str, overall) -> int:
    """The fastest layout ``tool`` can run, in its own words, under comments that say what
    it is, and what pplab's overall first choice would gain where the tool cannot run it."""
    title = TOOLS[tool].title
    runnable = [c for c in cands if c.feasible and not cannot_run(tool, model, c.config)]
    if not runnable:
        raise ValueError(f"no layout {title} can run fits {a.gpus} × "
                         f"{fmt_bytes(hw.memory, exact=True)}")
    best = runnable[0]
    head = [f"{title} layout from pplab plan: {model.name}, seq {model.seq}, "
            f"{a.gpus} × {a.gpu}",
            f"{best.layout()}",
            f"estimated step {fmt_seconds(best.step_time, 4)}, pipeline bubble "
            f"{best.bubble_fraction:.1%}, {best.fit_text()}"]
    if overall is not None and overall.step_time < best.step_time:
        head.append(f"pplab's first choice, {overall.layout()}, is "
                    f"{best.step_time / overall.step_time - 1:.1%} faster but out of reach: "
                    f"{cannot_run(tool, model, overall.config)}")
    comments = "".join(f"# {line}\n" for line in head)
    body = torchtitan_toml(model, best.config, model.seq) if tool == "torchtitan" else \
        megatron_text(model, best.config, model.seq)
    print(comments + body, end="")
    return 0


def main(a) -> int:
    return run_plan(a)
