"""One rank of a pipeline run, started by torchrun: ``python -m pplab.runtime.worker CONFIG.json``.

The only argument is a JSON file path (worker options as flags could be misread by torchrun's
argparse prefix matching). The file lists one or more runs to do with the same process group.
Each rank writes its failure to ``err_dir/rank{r}.json``; a watchdog thread names what a rank
waits for when a receive takes too long and ends the rank after the communication timeout.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import sys
import threading
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from ..comm_order import in_order_plan, messages
from ..ir import Action, Schedule, parse_op
from ..simulate import Costs
from . import checkpoint as ckpt
from .cluster import gather_placement
from .model import (SplitLinear, TinyConfig, TinyGPT, _Defer, _Tracked, build_stage_modules,
                    linear_weight_grads, make_batch, make_optimizer, microbatch)

now = time.perf_counter


# ---- failure reporting ---------------------------------------------------------------------
def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class Watchdog(threading.Thread):
    """Watches the main thread's current wait. After ``report_after`` s it writes
    ``rank{r}.wait`` (what it waits for); after ``timeout`` s it writes the rank's error file
    and ends the process, so a deadlocked schedule cannot hang the job."""

    def __init__(self, rank: int, err_dir: str, timeout: float, report_after: float = 1.0):
        super().__init__(daemon=True)
        self.rank, self.err_dir, self.timeout, self.report_after = rank, err_dir, timeout, report_after
        self.what: str | None = None
        self.since = 0.0
        self.reported = False
        self.lock = threading.Lock()

    def waiting(self, what: str) -> None:
        with self.lock:
            self.what, self.since, self.reported = what, time.monotonic(), False

    def done(self) -> None:
        with self.lock:
            reported, self.what = self.reported, None
        if reported:
            try:
                os.remove(os.path.join(self.err_dir, f"rank{self.rank}.wait"))
            except OSError:
                pass

    def run(self) -> None:
        while True:
            time.sleep(0.1)
            with self.lock:
                what, since, reported = self.what, self.since, self.reported
            if what is None:
                continue
            waited = time.monotonic() - since
            if waited > self.report_after and not reported:
                _write_json(os.path.join(self.err_dir, f"rank{self.rank}.wait"),
                            {"rank": self.rank, "waiting_for": what, "since": time.time() - waited})
                with self.lock:
                    self.reported = True
            if waited > self.timeout:
                _write_json(os.path.join(self.err_dir, f"rank{self.rank}.json"),
                            {"rank": self.rank, "kind": "stuck",
                             "message": f"rank {self.rank} stuck for {waited:.1f} s (communication "
                                        f"timeout) {what}"})
                os._exit(3)


class DeadlockError(RuntimeError):
    pass


# ---- saved-tensor accounting ---------------------------------------------------------------
class SavedTensorTracker:
    """Bytes of tensors autograd saves for backward, each storage counted once while alive.

    Parameters are excluded (they are weights, not activations). Checkpointed regions keep
    their inputs themselves; the model reports those through ``track`` so they count too.
    """

    def __init__(self):
        self.enabled = True          # off: no hooks run, nothing is counted (timed steps)
        self.exclude: set[int] = set()
        self.live: dict[int, list] = {}
        self.current = 0
        self.peak = 0

    def reset_peak(self) -> None:
        self.peak = self.current

    def _add(self, ptr: int, nbytes: int) -> None:
        ent = self.live.get(ptr)
        if ent is None:
            self.live[ptr] = [1, nbytes]
            self.current += nbytes
            self.peak = max(self.peak, self.current)
        else:
            ent[0] += 1

    def _remove(self, ptr: int) -> None:
        ent = self.live.get(ptr)
        if ent is None:
            return
        ent[0] -= 1
        if ent[0] == 0:
            del self.live[ptr]
            self.current -= ent[1]

    def holder(self, t: torch.Tensor):
        if not self.enabled:
            return _Holder(None, 0, t)
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr == 0 or ptr in self.exclude:
            return _Holder(None, 0, t)
        self._add(ptr, st.nbytes())
        return _Holder(self, ptr, t)

    def hooks(self):
        if not self.enabled:
            return contextlib.nullcontext()
        return torch.autograd.graph.saved_tensors_hooks(self.holder, lambda h: h.tensor)

    def track(self, tensors, output) -> None:
        if not self.enabled:
            return
        holders = [self.holder(t) for t in tensors]
        if output.grad_fn is not None:
            output.grad_fn.metadata.setdefault("pplab_saved", []).extend(holders)


class _Holder:
    __slots__ = ("tracker", "ptr", "tensor")

    def __init__(self, tracker, ptr, tensor):
        self.tracker, self.ptr, self.tensor = tracker, ptr, tensor

    def __del__(self):
        if self.tracker is not None:
            self.tracker._remove(self.ptr)


# ---- the schedule executor -----------------------------------------------------------------
def schedule_from_dict(d: dict) -> Schedule:
    ranks = tuple(tuple(parse_op(t) for t in row) for row in d["ranks"])
    return Schedule(d["name"], int(d["P"]), int(d["M"]), tuple(d["stage_to_rank"]), ranks,
                    int(d["V"]), int(d["copies"]))


class RankRunner:
    """Runs one rank's ops of one schedule, step after step."""

    def __init__(self, run: dict, rank: int, world: int, device: torch.device, wd: Watchdog,
                 clock_offset: float):
        self.run, self.rank, self.world, self.device, self.wd = run, rank, world, device, wd
        self.clock_offset = clock_offset
        self.sched = s = schedule_from_dict(run["schedule"])
        if s.P != world:
            raise ValueError(f"schedule has P={s.P} but torchrun started {world} ranks")
        self.cfg = TinyConfig.from_dict(run["model"])
        self.seed = int(run.get("seed", 0))
        self.M, self.nmb = s.M, s.microbatches_per_copy
        self.stages = s.stages_of_rank(rank)
        full = TinyGPT(self.cfg, self.seed)
        self.modules = build_stage_modules(s, self.cfg, self.seed, self.stages,
                                           run.get("recompute", "none"), full)
        for m in self.modules.values():
            m.to(device)
        self.params = {st: [p for p in m.parameters()] for st, m in self.modules.items()}
        # parameters whose gradient I computes itself (not behind a SplitLinear)
        self.other_params = {st: [p for mod in m.modules() if not isinstance(mod, SplitLinear)
                                  for p in mod.parameters(recurse=False)]
                             for st, m in self.modules.items()}
        all_params = [p for st in self.stages for p in self.params[st]]
        self.opt = make_optimizer(all_params, run.get("optimizer", "sgd"), run.get("lr", 0.05))
        emu = dict(run.get("emulate") or {})
        self.emulate_pad = emu.pop("mode", "add") == "pad"
        self.costs = Costs(**emu) if run.get("emulate") else None
        self.owner = s.owners()
        # "up-front": post every receive at the step's start, match by tag (gloo). "in-order":
        # post sends and receives in one global order, tags unused (NCCL; see comm_order.py)
        comm = run.get("comm", "auto")
        if comm == "auto":
            comm = "in-order" if device.type == "cuda" else "up-front"
        self.messages = messages(s)
        self.plan = in_order_plan(s)[rank] if comm == "in-order" else None
        if run.get("control") == "misorder":
            self._misorder()
        self.tracker = SavedTensorTracker()
        self.tracker.exclude = {p.untyped_storage().data_ptr() for p in all_params}
        self.start_step = 0
        self.ref = None
        if rank == 0 and run.get("check", True):
            ref_seed = self.seed + (1 if run.get("control") == "seed" else 0)
            self.ref = TinyGPT(self.cfg, ref_seed).to(device)
            self.ref_opt = make_optimizer(self.ref.parameters(), run.get("optimizer", "sgd"),
                                          run.get("lr", 0.05))
        if run.get("load_checkpoint"):
            self._load(run["load_checkpoint"], full)

    # -- checkpoints --
    def _copy0_named(self) -> dict:
        out = {}
        for st in self.stages:
            if self.sched.copy_of(st) == 0:
                out.update(dict(self.modules[st].named_parameters()))
        return out

    def _load(self, directory: str, full: TinyGPT) -> None:
        params, optim, meta = ckpt.read_checkpoint(directory)
        ckpt.check_matches([(n, p.shape) for n, p in full.named_parameters()], params, directory)
        for st in self.stages:   # every copy loads the same weights
            ckpt.load_into(dict(self.modules[st].named_parameters()), params, optim, self.opt)
        if self.ref is not None:
            ckpt.load_into(dict(self.ref.named_parameters()), params, optim, self.ref_opt)
        self.start_step = int(meta.get("step", 0))

    def save(self, directory: str) -> None:
        s = self.sched
        if self.rank == 0:
            ckpt.clear_checkpoint(directory)
        dist.barrier()
        for st in self.stages:
            if s.copy_of(st) == 0:
                ckpt.save_stage(directory, s.position(st), s.stages_per_copy,
                                dict(self.modules[st].named_parameters()), self.opt)
        dist.barrier()
        if self.rank == 0:
            ckpt.write_meta(directory, {"model": self.cfg.to_dict(), "seed": self.seed,
                                        "step": self.start_step + self.steps_done,
                                        "optimizer": self.run.get("optimizer", "sgd"),
                                        "saved_with": {"schedule": s.name, "P": s.P, "V": s.V}})

    # -- communication --
    def _tag(self, kind: str, stage: int, mb: int) -> int:
        if self.plan is not None:
            return 0   # in-order: matched by order alone, as NCCL does (gloo then checks it)
        return (stage * self.nmb + mb) * 2 + (0 if kind == "act" else 1)

    def _post_receives(self) -> None:
        """Up-front mode (gloo): every receive of the step, posted before any compute and
        matched by tag. NCCL would hang on this; it uses the in-order plan instead."""
        mine = sorted((prod, m) for m, prod, _ in self.messages if m.dst == self.rank)
        for _, m in mine:                       # in the senders' order, though tags decide
            self._post_recv(m)

    def _post_recv(self, m) -> None:
        """irecv into a fresh buffer; ``self.recvs[key]`` = [work, buffer, src, waited]."""
        key = (m.kind, m.stage, m.microbatch)
        buf = torch.empty((self.cfg.microbatch_size, self.cfg.seq, self.cfg.hidden),
                          dtype=self.cfg.torch_dtype, device=self.device)
        self.recvs[key] = [dist.irecv(buf, src=m.src, tag=self._tag(*key)), buf, m.src, False]

    def _send(self, kind: str, stage: int, mb: int, tensor: torch.Tensor, dst: int) -> None:
        # queued until the op (and its emulated duration) is over: a result leaves a rank
        # when the op that makes it has finished, as in the simulator
        self.outbox.append((kind, stage, mb, tensor.detach().contiguous(), dst))

    def _flush(self) -> None:
        for kind, stage, mb, t, dst in self.outbox:
            if self.plan is None:
                self._post_send(kind, stage, mb, t, dst)
            else:                      # in-order: posted at its turn in the plan
                self.made[(kind, stage, mb)] = (t, dst)
        self.outbox = []

    def _misorder(self) -> None:
        """Negative control: post this rank's second receive from a peer just before its
        first. Both are posted in time, but the transport matches by order, so each buffer
        gets the other microbatch's tensor."""
        first = {}
        for batch in self.plan:
            for m in list(batch):
                if m.dst != self.rank:
                    continue
                if m.src not in first:
                    first[m.src] = (batch, m)
                    continue
                batch.remove(m)
                home, m1 = first[m.src]
                home.insert(home.index(m1), m)
                return

    def _post_planned(self, k: int) -> None:
        """In-order mode: post the messages the plan puts before op ``k``, in plan order."""
        for m in self.plan[k]:
            if m.src == self.rank:
                t, dst = self.made.pop((m.kind, m.stage, m.microbatch))
                self._post_send(m.kind, m.stage, m.microbatch, t, dst)
            else:
                self._post_recv(m)

    def _post_send(self, kind: str, stage: int, mb: int, t: torch.Tensor, dst: int) -> None:
        self.sends.append((dist.isend(t, dst=dst, tag=self._tag(kind, stage, mb)), t, dst,
                           f"{kind} of stage {stage} microbatch {mb}"))

    def _get(self, kind: str, stage: int, mb: int, needed_by: str, step_idx: int) -> torch.Tensor:
        key = (kind, stage, mb)
        src_stage = stage - 1 if kind == "act" else stage + 1
        if key in self.local:
            return self.local.pop(key)
        if key in self.recvs:
            self._wait_recv(key, needed_by, step_idx)
            return self.recvs.pop(key)[1]
        producer = (Action(src_stage, "F", mb) if kind == "act" else
                    next((Action(src_stage, k, mb) for k in ("B", "I")
                          if Action(src_stage, k, mb) in self.owner), None))
        if producer is None or producer not in self.owner:
            raise DeadlockError(f"rank {self.rank} step {step_idx}: {needed_by} needs {producer or f'stage {src_stage} microbatch {mb}'}, which no rank runs")
        r, st = self.owner[producer]
        raise DeadlockError(f"rank {self.rank} step {step_idx}: {needed_by} needs {producer}, "
                            f"which this same rank runs later (step {st}) — deadlock")

    # -- the ops --
    def _forward(self, a: Action, idx: int) -> None:
        s, st, mb = self.sched, a.stage, a.microbatch
        gmb = s.global_microbatch(st, mb)
        inputs, targets = microbatch(self.batch, self.cfg, gmb)
        if s.is_first(st):
            x = inputs.to(self.device)
        else:
            x = self._get("act", st, mb, str(a), idx).requires_grad_()
        mod = self.modules[st]
        with self.tracker.hooks():
            out = mod(x, targets.to(self.device)) if s.is_last(st) else mod(x)
        if s.is_last(st):
            self.loss_sum += out.detach().float() / self.M
            scale = 0.0 if (self.run.get("control") == "drop" and gmb == self.M - 1) else 1.0 / self.M
            out = out * scale
        else:
            dst = s.stage_to_rank[st + 1]
            if dst == self.rank:
                self.local[("act", st + 1, mb)] = out.detach()
            else:
                self._send("act", st + 1, mb, out, dst)
        self.saved[(st, mb)] = (x, out)

    def _send_grad(self, st: int, mb: int, g: torch.Tensor) -> None:
        dst = self.sched.stage_to_rank[st - 1]
        if dst == self.rank:
            self.local[("grad", st - 1, mb)] = g.detach()
        else:
            self._send("grad", st - 1, mb, g, dst)

    def _backward(self, a: Action, idx: int) -> None:
        s, st, mb = self.sched, a.stage, a.microbatch
        if (st, mb) not in self.saved:
            raise DeadlockError(f"rank {self.rank} step {idx}: {a} runs before {st}F{mb}")
        x, out = self.saved.pop((st, mb))
        g = None if s.is_last(st) else self._get("grad", st, mb, str(a), idx)
        if a.kind == "B":
            torch.autograd.backward(out, g)
            if not s.is_first(st):
                self._send_grad(st, mb, x.grad)
        else:
            # I: the input gradient (and the cheap LayerNorm / embedding weight gradients);
            # every Linear queues (input, grad_output) for W instead of its weight gradient,
            # so the graph is freed now and W is just the weight matmuls
            queue: list = []
            inputs = ([] if s.is_first(st) else [x]) + self.other_params[st]
            _Defer.queue, _Defer.wrap = queue, self.tracker.holder
            try:
                torch.autograd.backward(out, g, inputs=inputs)
            finally:
                _Defer.queue = _Defer.wrap = None
            if not s.is_first(st):
                self._send_grad(st, mb, x.grad)
            self.pending_w[(st, mb)] = queue

    def _weight(self, a: Action, idx: int) -> None:
        key = (a.stage, a.microbatch)
        if key not in self.pending_w:
            raise DeadlockError(f"rank {self.rank} step {idx}: {a} runs before "
                                f"{a.stage}I{a.microbatch}")
        for mod, hx, hgo in self.pending_w.pop(key):
            gw, gb = linear_weight_grads(hx.tensor, hgo.tensor, mod.bias is not None)
            for p, gr in ((mod.weight, gw), (mod.bias, gb)):
                if gr is None:
                    continue
                if p.grad is None:
                    p.grad = gr
                else:
                    p.grad.add_(gr)

    def _op_part(self, a: Action, idx: int) -> None:
        if a.kind == "F":
            self._forward(a, idx)
        elif a.kind in ("B", "I"):
            self._backward(a, idx)
        else:
            self._weight(a, idx)

    def _fault(self, idx: int, op) -> None:
        f = self.run.get("fault")
        if not f or int(f.get("rank", -1)) != self.rank or int(f.get("op", 0)) != idx:
            return
        if int(f.get("step", 0)) != self.steps_done:
            return
        if f.get("kind") == "kill":
            import signal
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"injected fault on rank {self.rank} at step {idx} ({op})")

    # -- a training step --
    def _sync_copies(self) -> None:
        """DualPipe: both copies of a layer get the sum of the two copies' gradients."""
        s = self.sched
        if s.copies == 1:
            return
        works, bufs = [], {}
        mine = {}
        for st in self.stages:
            for p in self.params[st]:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            mine[st] = torch.cat([p.grad.reshape(-1) for p in self.params[st]])
        base = 2 * s.num_stages * self.nmb + 2
        # by layer position, so two ranks sharing several positions agree on the order; per
        # pair the lower rank sends first and the higher receives first, so an in-order
        # transport (NCCL) finds each send's receive at the head of the peer's queue
        for st in sorted(self.stages, key=s.position):
            pos = s.position(st)
            for c in range(s.copies):
                other = c * s.stages_per_copy + pos
                if other == st:
                    continue
                dst = s.stage_to_rank[other]
                if dst == self.rank:
                    bufs[(st, other)] = mine[other]
                    continue
                buf = bufs[(st, other)] = torch.empty_like(mine[st])
                send_first = self.rank < dst
                for sending in (send_first, not send_first):
                    works.append(dist.isend(mine[st], dst=dst, tag=base + st) if sending
                                 else dist.irecv(buf, src=dst, tag=base + other))
        self.wd.waiting("while exchanging DualPipe copy gradients")
        for w in works:
            w.wait()
        self.wd.done()
        for st in self.stages:
            pos = s.position(st)
            total = None
            for c in range(s.copies):          # same order on both ranks: identical sums
                other = c * s.stages_per_copy + pos
                t = mine[st] if other == st else bufs[(st, other)]
                total = t.clone() if total is None else total + t
            off = 0
            for p in self.params[st]:
                n = p.numel()
                p.grad.copy_(total[off:off + n].view_as(p))
                off += n

    def step(self, step_no: int, track_memory: bool = True) -> dict:
        """One training step. ``track_memory``: count saved-for-backward bytes with autograd
        hooks. Their Python cost (~10 % of a tiny model's step) would distort step times, so
        the runner tracks on the warm-up step only; the bytes are the same every step."""
        s = self.sched
        self.tracker.enabled = track_memory
        self.batch = make_batch(self.cfg, self.M, self.seed, self.start_step + step_no)
        self.saved, self.pending_w, self.local, self.sends, self.outbox = {}, {}, {}, [], []
        self.loss_sum = torch.zeros((), device=self.device)
        self.tracker.reset_peak()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        _Tracked.track = self.tracker.track
        dist.barrier()
        t_start = now()
        self.made, self.recvs = {}, {}
        if self.plan is None:
            self._post_receives()
        events = []
        for idx, op in enumerate(s.ranks[self.rank]):
            self._fault(idx, op)
            if self.plan is not None:
                self._post_planned(idx)
            parts = op.parts
            t0 = None
            for a in parts:
                if t0 is None and a.kind == "W":
                    t0 = now()
                if t0 is None:
                    # inputs first, so the event measures work, not waiting
                    t0 = self._prefetch_and_start(a, idx)
                self._op_part(a, idx)
            if self.costs is not None:
                # "add": compute, then sleep the emulated duration; "pad": sleep only what is
                # left of it, so the op lasts max(compute, emulated)
                d = self.costs.duration(s, op)
                if self.emulate_pad:
                    d -= now() - t0
                if d > 0:
                    time.sleep(d)
            if self.device.type == "cuda":
                # the compute stream only: a device-wide sync would also wait for this rank's
                # pending sends, which complete only when their receivers get to them
                torch.cuda.current_stream(self.device).synchronize()
            self._flush()
            events.append((self.rank, str(op), t0 - self.clock_offset, now() - self.clock_offset))
        if self.plan is not None:
            self._post_planned(len(s.ranks[self.rank]))
        for w, _, dst, what in self.sends:
            self.wd.waiting(f"at the end of the step: sending the {what} to rank {dst}")
            w.wait()
            self.wd.done()
        if self.recvs:
            k = next(iter(self.recvs))
            raise RuntimeError(f"rank {self.rank}: nothing consumed the {k[0]} of stage {k[1]} "
                               f"microbatch {k[2]} (its op is missing from this rank's list)")
        self._sync_copies()
        dist.all_reduce(self.loss_sum)
        if self.device.type == "cuda":   # NCCL ops return at once; the step ends when they do
            torch.cuda.synchronize(self.device)   # safe here: every message is posted
        t_ops = now()
        _Tracked.track = None
        peak_saved = self.tracker.peak if track_memory else None
        cuda_peak = (torch.cuda.max_memory_allocated(self.device)
                     if self.device.type == "cuda" else None)
        grads = None
        if self.run.get("check", True):
            grads = {n: (p.grad.detach().cpu().clone() if p.grad is not None else None)
                     for n, p in self._copy0_named().items()}
        t_opt = now()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t_end = now()
        return {"events": events, "loss": float(self.loss_sum), "grads": grads,
                "peak_saved": peak_saved, "cuda_peak": cuda_peak,
                "step_time": (t_ops - t_start) + (t_end - t_opt)}

    def _prefetch_and_start(self, a: Action, idx: int) -> float:
        s, st, mb = self.sched, a.stage, a.microbatch
        key = None
        if a.kind == "F" and not s.is_first(st):
            key = ("act", st, mb)
        elif a.kind in ("B", "I") and not s.is_last(st):
            key = ("grad", st, mb)
        if key is not None and key in self.recvs:
            self._wait_recv(key, str(a), idx)
        return now()

    def _wait_recv(self, key, needed_by: str, idx: int) -> None:
        # a gloo recv Work must be waited on exactly once: a second wait() blocks forever
        entry = self.recvs[key]
        if entry[3]:
            return
        kind, st, mb = key
        src_stage = st - 1 if kind == "act" else st + 1
        self.wd.waiting(f"at step {idx}: {needed_by} waits for the "
                        f"{'activation' if kind == 'act' else 'gradient'} of microbatch "
                        f"{mb} from stage {src_stage} on rank {entry[2]}")
        entry[0].wait()
        if self.device.type == "cuda":   # NCCL's wait() only orders streams; wait for the data
            torch.cuda.current_stream(self.device).synchronize()
        self.wd.done()
        entry[3] = True

    def reference_step(self, step_no: int) -> tuple[float, dict]:
        inputs, targets = make_batch(self.cfg, self.M, self.seed, self.start_step + step_no)
        loss = self.ref(inputs.to(self.device), targets.to(self.device))
        loss.backward()
        grads = {n: p.grad.detach().cpu().clone() for n, p in self.ref.named_parameters()}
        self.ref_opt.step()
        self.ref_opt.zero_grad(set_to_none=True)
        return float(loss), grads


def _rel_error(grads: dict, ref: dict) -> tuple[float, str]:
    worst, name = 0.0, ""
    for n, gr in ref.items():
        g = grads.get(n)
        if g is None:
            return float("inf"), n
        denom = float(gr.norm())
        err = float((g - gr).norm()) / (denom if denom > 0 else 1.0)
        if err > worst:
            worst, name = err, n
    return worst, name


def _do_run(run: dict, rank: int, world: int, device, wd: Watchdog, offset: float,
            progress, writes_results: bool) -> None:
    runner = RankRunner(run, rank, world, device, wd, offset)
    steps = int(run.get("steps", 2))
    runner.steps_done = 0
    losses, ref_losses, errors, worst, times = [], [], [], [], []
    last = first = None
    for k in range(steps):
        out = runner.step(k, track_memory=k == 0)   # step 0 is the warm-up, left out of timing
        runner.steps_done = k + 1
        gathered = [None] * world if rank == 0 else None
        dist.gather_object({"grads": out["grads"], "events": out["events"],
                            "peak_saved": out["peak_saved"], "cuda_peak": out["cuda_peak"]},
                           gathered, dst=0)
        if rank == 0:
            losses.append(out["loss"])
            times.append(out["step_time"])
            if runner.ref is not None:
                rl, rg = runner.reference_step(k)
                merged = {}
                for g in gathered:
                    merged.update(g["grads"] or {})
                e, n = _rel_error(merged, rg)
                ref_losses.append(rl)
                errors.append(e)
                worst.append(n)
            last = gathered
            first = first or gathered
            progress(f"{run['schedule']['name']}: step {k + 1}/{steps} loss {out['loss']:.6f} "
                     f"({out['step_time'] * 1e3:.1f} ms)")
    if run.get("save_checkpoint"):
        runner.save(run["save_checkpoint"])
    result = None
    if rank == 0:
        s = runner.sched
        warm = times[1:] if len(times) > 1 else times
        result = {
            "schedule": s.name, "P": s.P, "M": s.M, "V": s.V,
            "losses": losses, "reference_losses": ref_losses, "grad_errors": errors,
            "worst_parameter": worst, "step_times": times,
            "step_time_s": statistics.median(warm) if warm else None,
            "events": [e for g in (last or []) for e in g["events"]],
            "peak_saved_bytes": [g["peak_saved"] for g in (first or [])],
            "cuda_peak_bytes": (None if not last or last[0]["cuda_peak"] is None
                                else [g["cuda_peak"] for g in last]),
        }
    if world > 1:   # every node's launcher returns the same result, not only rank 0's host
        box = [result]
        dist.broadcast_object_list(box, src=0)
        result = box[0]
    if writes_results:
        _write_json(run["result"], result)


def _clock_offsets(rank: int, world: int, device: torch.device) -> float:
    """Offset to subtract from this rank's perf_counter so all ranks share rank 0's clock.

    On one host perf_counter is CLOCK_MONOTONIC, shared by all processes: offset 0. Across
    hosts: after a barrier every rank reads its clock and rank 0's reading is broadcast; the
    error is the barrier's exit skew (tens of µs on a LAN). Median of 5 rounds."""
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    if len(set(hosts)) == 1:
        return 0.0
    diffs = []
    for _ in range(5):
        dist.barrier()
        t = torch.tensor([now()], dtype=torch.float64, device=device)   # NCCL: CUDA tensors
        ts = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
        dist.all_gather(ts, t)
        diffs.append(float(ts[rank] - ts[0]))
    return statistics.median(diffs)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        job = json.load(f)
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    err_dir = job["err_dir"]
    wd = Watchdog(rank, err_dir, float(job.get("comm_timeout", 30)))
    wd.start()

    def progress(msg):
        if rank == 0 and job.get("progress"):
            with open(job["progress"], "a") as fh:
                fh.write(msg + "\n")

    try:
        want = job.get("device", "auto")
        note = ""
        if want in ("auto", "cuda") and torch.cuda.is_available() \
                and torch.cuda.device_count() >= local_world:
            device, backend = torch.device("cuda", local_rank), "nccl"
            torch.cuda.set_device(device)
        else:
            device, backend = torch.device("cpu"), "gloo"
            if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
                note = (f"CUDA asked for but {torch.cuda.device_count()} GPU(s) for "
                        f"{local_world} local ranks: fell back to CPU with gloo")
        torch.set_num_threads(1)
        wd.waiting("in init_process_group (rendezvous with the other ranks)")
        dist.init_process_group(backend, timeout=timedelta(seconds=float(job.get("comm_timeout", 30)) + 30),
                                **({"device_id": device} if backend == "nccl" else {}))
        wd.done()
        offset = _clock_offsets(rank, world, device)
        placement = gather_placement(dist, rank, world)    # node rank + address of each rank
        if local_rank == 0:   # one writer per node: each node's launcher reads its own files
            _write_json(job["info"], {"backend": backend, "device": str(device), "note": note,
                                      "world": world, "placement": placement})
        for run in job["runs"]:
            _do_run(run, rank, world, device, wd, offset, progress, writes_results=local_rank == 0)
        wd.waiting("in the final barrier")
        dist.barrier()
        wd.done()
        dist.destroy_process_group()
        return 0
    except BaseException as e:  # noqa: BLE001 - report every failure, then exit non-zero
        tb = traceback.format_exc()
        kind = "deadlock" if isinstance(e, DeadlockError) else "exception"
        if any(m in str(e) for m in ("Connection closed by peer", "Connection reset by peer",
                                     "Broken pipe", "Socket closed")):
            kind = "peer-lost"   # a consequence of another rank ending, not a cause
        _write_json(os.path.join(err_dir, f"rank{rank}.json"),
                    {"rank": rank, "kind": kind, "message": f"{type(e).__name__}: {e}",
                     "traceback": tb})
        sys.stderr.write(tb)
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
