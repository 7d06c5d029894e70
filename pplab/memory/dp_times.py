"""How data-parallel traffic meets the pipeline, in seconds (``planner.estimate``).

Below ZeRO-3 the step's gradient reduction (and ZeRO-1/2's parameter all-gather) runs after
the last backward, which hides what it can; ZeRO-2 reducing every microbatch and ZeRO-3
re-gathering every microbatch also put traffic under every backward (and forward), and an
op lasts at least the traffic it carries.

Traffic hides only where the schedule leaves the link free: an op's compute hides DP traffic
for as long as the op lasts less the time its own traffic holds the same link. That traffic
is ``nic_f``/``nic_b``: the all-to-alls of a forward/backward when expert parallelism leaves
the node, since DP's group (of which EP's ranks are carved) then crosses the same
InfiniBand NIC (DeepSeek-V3 §3.2.2: EP 64 over 8 nodes); 0 otherwise. So an op carrying a
gather or a reduce-scatter lasts at least that traffic + its all-to-alls, and the step's
tail is what is left after the last backward's free link time.
"""
from __future__ import annotations

from .comm import dp_volume, zero12_scatters, zero3_bytes
from .extrapolate import cached_schedule
from .rank_memory import rank_params, small_key


def _rank_params(model, cfg) -> float:
    """Parameters on one GPU of the rank that holds the most (its experts' gradients are
    priced as if reduced over all of DP·CP, not DP·CP/EP: an overestimate)."""
    return max(p for _, _, p, _ in rank_params(model, cfg.tp, *small_key(cfg),
                                               cfg.first_layers, cfg.last_layers, cfg.ep))


def zero3_times(model, cfg, bw_dp, tf, tb, nic_f=0.0, nic_b=0.0) -> dict:
    """How ZeRO-3's traffic meets the pipeline (seconds; nothing to do below ZeRO-3).

    Per microbatch: every forward gathers the rank's parameters and every backward gathers
    them again and reduce-scatters its gradients. FSDP prefetches the next layer's gather
    while this one computes, so an op lasts the longer of its compute and its traffic
    (``tf_run``, ``tb_run``). Per step: one gather and one reduce-scatter, Ψ + Ψ like
    ZeRO-1's reduce-scatter + all-gather, and priced the same way (the last backward hides
    part of it) so that the two, equal in bytes moved and held, also rank equal. ``nic_f``,
    ``nic_b``: seconds the forward/backward's own traffic holds DP's link (module docstring)."""
    out = {"tf_run": tf, "tb_run": tb, "dp_time": 0.0, "exposed": 0.0}
    if cfg.zero < 3 or cfg.shard <= 1:
        return out
    psi = _rank_params(model, cfg)
    copies = cached_schedule(*small_key(cfg)).copies
    f = (cfg.shard - 1) / cfg.shard / bw_dp
    if cfg.zero3_regather == "per_step":
        g, r = (x * f for x in zero3_bytes(psi, cfg, 1))
        return dict(out, dp_time=g + r, exposed=max(0.0, nic_b + g + r - tb))
    g, r = (x * f for x in zero3_bytes(psi / copies, cfg, 1))   # one pass: 2 gathers + 1 RS
    passes = cfg.microbatches // copies * copies
    return {"tf_run": max(tf, nic_f + g / 2), "tb_run": max(tb, nic_b + g / 2 + r),
            "dp_time": passes * (g + r), "exposed": 0.0}


def zero12_times(model, cfg, bw_dp, tb, nic_b=0.0) -> dict:
    """How DP traffic below ZeRO-3 meets the pipeline (seconds). What runs after the last
    backward — the gradients reduced once (an all-reduce, or a reduce-scatter and the
    parameters' all-gather) — hides behind that backward as far as it can (``tail`` is the
    rest). ZeRO-2 reducing per microbatch also reduce-scatters every pass's gradients as its
    backward runs, so a B lasts at least that (``tb_run``); its last pass's reduce-scatter
    and the all-gather make the tail. ``nic_b``: seconds the backward's own traffic holds
    DP's link (module docstring)."""
    out = {"tb_run": tb, "dp_time": 0.0, "tail": 0.0}
    if cfg.zero >= 3 or cfg.shard <= 1:
        return out
    psi = _rank_params(model, cfg)
    copies = cached_schedule(*small_key(cfg)).copies
    f = (cfg.shard - 1) / cfg.shard / bw_dp
    dp_time = dp_volume(psi, cfg, cfg.microbatches // copies) / bw_dp
    if zero12_scatters(cfg, cfg.microbatches) == 1:
        return dict(out, dp_time=dp_time, tail=max(0.0, nic_b + dp_time - tb))
    scatter = psi / copies * cfg.bytes_grad * f               # one pass's gradients
    tb_run = max(tb, nic_b + scatter)
    end = scatter + psi * cfg.bytes_param * f
    return {"tb_run": tb_run, "dp_time": dp_time, "tail": max(0.0, nic_b + end - tb_run)}
