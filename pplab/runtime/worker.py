"""One rank of a pipeline run, started by torchrun: ``python -m pplab.runtime.worker JOB.json``.

The rank runs its lowered list (pplab/lower.py): compute ops and SEND/RECV items, in order,
one dispatch loop (``RankRunner.step``). Everything else sits around that loop: the
watchdog (watchdog.py), saved-byte counting (saved_bytes.py), faults and negative controls
(controls.py), DualPipe's copy-gradient sum (copies.py), the reference check and the summary
(summary.py). The only argument is a JSON file path (flags could be misread by
torchrun's argparse prefix matching); it lists one or more runs for the same process group.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta

import json
import torch
import torch.distributed as dist

from ..ir import Action, Comm
from ..lower import lower
from . import checkpoint as ckpt
from .cluster import gather_placement
from .config import BLOCKING, RunSpec, emulated_costs
from .controls import Controls
from .copies import sum_copy_grads
from .model import (SplitLinear, TinyGPT, build_stage_modules, defer_weight_grads, make_batch,
                    make_optimizer, microbatch, weight_grads_from)
from .saved_bytes import SavedTensorTracker
from .summary import Record, clock_offset
from .watchdog import Watchdog, write_json

now = time.perf_counter
__all__ = ["RankRunner", "OrderError", "SavedTensorTracker", "main"]


class OrderError(RuntimeError):
    """This rank's own list cannot run (an op needs what this rank makes later, or what no
    rank makes). Not the simulator's DeadlockError: this one is raised by a real rank."""


@dataclass
class _Recv:
    work: object
    buf: torch.Tensor
    src: int
    waited: bool = False


@dataclass
class StepState:
    """What one training step holds while it runs."""
    batch: tuple
    loss_sum: torch.Tensor
    saved: dict = field(default_factory=dict)       # (stage, mb) → (input, output)
    pending_w: dict = field(default_factory=dict)   # (stage, mb) → queued weight-grad inputs
    local: dict = field(default_factory=dict)       # RECV item → tensor made on this rank
    made: dict = field(default_factory=dict)        # SEND item → tensor waiting for its turn
    recvs: dict = field(default_factory=dict)       # RECV item → posted receive
    sends: list = field(default_factory=list)       # (work, tensor, what)
    events: list = field(default_factory=list)      # (rank, op, start, end)
    op_index: int = 0


class RankRunner:
    """Runs one rank's lowered list of one schedule, step after step."""

    def __init__(self, spec: RunSpec, rank: int, world: int, device: torch.device,
                 wd: Watchdog, clock_offset: float):
        self.sched, self.cfg = s, cfg = spec.schedule, spec.config
        if s.P != world:
            raise ValueError(f"schedule has P={s.P} but torchrun started {world} ranks")
        self.rank, self.device, self.wd, self.clock_offset = rank, device, wd, clock_offset
        self.controls = Controls(rank, cfg.fault, cfg.control)
        self.stages = s.stages_of_rank(rank)
        self.in_order = cfg.comm == "in-order" or (cfg.comm == "auto" and device.type == "cuda")
        self.blocking = cfg.comm in BLOCKING          # each RECV waits where it is posted
        lowering = cfg.comm if self.blocking else "in-order" if self.in_order else "up-front"
        row = lower(s, lowering)[rank]
        self.program = self.controls.program(row, lambda c: self._rank_of(c.peer_stage))
        # the emulated duration of each op, with the per-stage scales worked out once
        self.emulated = emulated_costs(cfg.emulate).duration_fn(s) if cfg.emulate else None
        self.pad = bool(cfg.emulate) and cfg.emulate.get("mode", "add") == "pad"
        self._build_model()
        self.start_step, self.steps_done = 0, 0
        self.ref = self.ref_opt = None
        if rank == 0 and cfg.check:
            self.ref = TinyGPT(cfg.model, self.controls.reference_seed(cfg.seed)).to(device)
            self.ref_opt = make_optimizer(self.ref.parameters(), cfg.optimizer, cfg.lr)
        if cfg.load_checkpoint:
            ckpt.load_rank(self, cfg.load_checkpoint)
        self.compute = {"F": self._forward, "B": self._backward, "I": self._backward,
                        "W": self._weight}

    def _build_model(self) -> None:
        cfg = self.cfg
        self.full = TinyGPT(cfg.model, cfg.seed)
        self.modules = build_stage_modules(self.sched, cfg.model, cfg.seed, self.stages,
                                           cfg.recompute, self.full)
        for m in self.modules.values():
            m.to(self.device)
        self.params = {st: list(m.parameters()) for st, m in self.modules.items()}
        # parameters whose gradient I computes itself (not behind a SplitLinear)
        self.other_params = {st: [p for mod in m.modules() if not isinstance(mod, SplitLinear)
                                  for p in mod.parameters(recurse=False)]
                             for st, m in self.modules.items()}
        all_params = [p for ps in self.params.values() for p in ps]
        self.opt = make_optimizer(all_params, cfg.optimizer, cfg.lr)
        self.tracker = SavedTensorTracker()
        self.tracker.exclude = {p.untyped_storage().data_ptr() for p in all_params}

    def _rank_of(self, stage: int) -> int:
        return self.sched.stage_to_rank[stage]

    # ---- the heart: one training step ---------------------------------------------------
    def step(self, step_no: int, track_memory: bool = True) -> dict:
        """One training step: run the lowered list item by item, then the copy sum and the
        optimizer. The loss is this rank's part (rank 0 sums the gathered parts, outside the
        timed region). ``track_memory``: count saved bytes (warm-up step only,
        since the hooks' Python cost would distort step times)."""
        m = self.cfg.model
        st = StepState(make_batch(m, self.sched.M, self.cfg.seed, self.start_step + step_no),
                       torch.zeros((), device=self.device))
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        with self.tracker.counting(track_memory):
            dist.barrier()
            t_start = now()
            for item in self.program:
                if isinstance(item, Comm):
                    self._post(item, st)
                else:
                    self._run_op(item, st)
            self._finish(st)
            t_ops = now()
        grads = self._grads_for_check()
        t_opt = now()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t_end = now()
        return {"events": st.events, "loss": float(st.loss_sum), "grads": grads,
                "peak_saved": self.tracker.peak if track_memory else None,
                "cuda_peak": (torch.cuda.max_memory_allocated(self.device)
                              if self.device.type == "cuda" else None),
                "step_time": (t_ops - t_start) + (t_end - t_opt)}

    def _run_op(self, op, st: StepState) -> None:
        """Wait for the op's first input (so its event measures work, not waiting), compute
        every part, sleep any emulated duration, record the event."""
        k, st.op_index = st.op_index, st.op_index + 1
        self.controls.before_op(self.steps_done, k, op)
        first = op.parts[0]
        key = self._input_key(first)
        if key in st.recvs:
            self._wait(key, st.recvs[key], str(first), k)
        t0 = now()
        for a in op.parts:
            self.compute[a.kind](a, st, k)
        if self.emulated is not None:
            # "add": compute, then sleep the emulated duration; "pad": sleep only what is left
            d = self.emulated(op) - (now() - t0 if self.pad else 0.0)
            if d > 0:
                time.sleep(d)
        if self.device.type == "cuda":
            # the compute stream only: a device-wide sync would also wait for this rank's
            # pending sends, which complete only when their receivers get to them
            torch.cuda.current_stream(self.device).synchronize()
        off = self.clock_offset
        st.events.append((self.rank, str(op), t0 - off, now() - off))

    def _finish(self, st: StepState) -> None:
        for w, _, what in st.sends:
            with self.wd.watching(f"at the end of the step: sending the {what}"):
                w.wait()
        if st.recvs:
            k = next(iter(st.recvs))
            raise RuntimeError(f"rank {self.rank}: nothing consumed {k} (its op is missing "
                               "from this rank's list)")
        sum_copy_grads(self.sched, self.rank, self.params, self.wd)
        if self.device.type == "cuda":   # NCCL ops return at once; the step ends when they do
            torch.cuda.synchronize(self.device)   # safe here: every message is posted

    # ---- communication items ----------------------------------------------------------
    def _tag(self, c: Comm) -> int:
        if self.in_order:
            return 0   # matched by order alone, as NCCL does (gloo then checks it)
        into = c.stage if not c.is_send else c.peer_stage
        return (into * self.sched.microbatches_per_copy + c.microbatch) * 2 + (not c.forward)

    def _post(self, c: Comm, st: StepState) -> None:
        peer = self._rank_of(c.peer_stage)
        if c.is_send:
            t = st.made.pop(c)
            st.sends.append((dist.isend(t, dst=peer, tag=self._tag(c)), t, f"{c} to rank {peer}"))
            return
        m = self.cfg.model
        buf = torch.empty((m.microbatch_size, m.seq, m.hidden), dtype=m.torch_dtype,
                          device=self.device)
        st.recvs[c] = r = _Recv(dist.irecv(buf, src=peer, tag=self._tag(c)), buf, peer)
        if self.blocking:
            self._wait(c, r, f"the blocking receive {c}", st.op_index)

    def _wait(self, key: Comm, r: _Recv, needed_by: str, k: int) -> None:
        if r.waited:     # a gloo recv Work must be waited on once: a second wait() hangs
            return
        what = "activation" if key.forward else "gradient"
        with self.wd.watching(f"at step {k}: {needed_by} waits for the {what} of microbatch "
                              f"{key.microbatch} from stage {key.peer_stage} on rank {r.src}"):
            r.work.wait()
            if self.device.type == "cuda":   # NCCL's wait() only orders streams
                torch.cuda.current_stream(self.device).synchronize()
        r.waited = True

    def _input_key(self, a: Action) -> Comm | None:
        s = self.sched
        if a.kind == "F" and not s.is_first(a.stage):
            return Comm(a.stage, "RECV_F", a.microbatch)
        if a.kind in ("B", "I") and not s.is_last(a.stage):
            return Comm(a.stage, "RECV_B", a.microbatch)
        return None

    def _input(self, a: Action, st: StepState, k: int) -> torch.Tensor:
        key = self._input_key(a)
        if key in st.local:
            return st.local.pop(key)
        r = st.recvs.pop(key, None)
        if r is None:
            raise self._order_error(a, k)
        self._wait(key, r, str(a), k)
        return r.buf

    def _order_error(self, a: Action, k: int) -> OrderError:
        prod = self.sched.input_of(a)
        where = self.sched.owners().get(prod)
        if where is None:
            return OrderError(f"rank {self.rank} step {k}: {a} needs {prod}, which no rank runs")
        return OrderError(f"rank {self.rank} step {k}: {a} needs {prod}, which this same rank "
                          f"runs later (step {where[1]}) — deadlock")

    def _hand_on(self, send: Comm, t: torch.Tensor, st: StepState) -> None:
        """An output for a neighbouring stage: kept here when that stage is on this rank,
        else held until the lowered list reaches its SEND item."""
        if self._rank_of(send.peer_stage) == self.rank:
            kind = "RECV_F" if send.forward else "RECV_B"
            st.local[Comm(send.peer_stage, kind, send.microbatch)] = t.detach()
        else:
            st.made[send] = t.detach().contiguous()

    # ---- compute items ------------------------------------------------------------------
    def _forward(self, a: Action, st: StepState, k: int) -> None:
        s, stage, mb = self.sched, a.stage, a.microbatch
        gmb = s.global_microbatch(stage, mb)
        inputs, targets = microbatch(st.batch, self.cfg.model, gmb)
        x = (inputs.to(self.device) if s.is_first(stage)
             else self._input(a, st, k).requires_grad_())
        with self.tracker.hooks():
            out = (self.modules[stage](x, targets.to(self.device)) if s.is_last(stage)
                   else self.modules[stage](x))
        if s.is_last(stage):
            st.loss_sum += out.detach().float() / s.M
            out = out * self.controls.loss_scale(gmb, s.M)
        else:
            self._hand_on(Comm(stage, "SEND_F", mb), out, st)
        st.saved[(stage, mb)] = (x, out)

    def _backward(self, a: Action, st: StepState, k: int) -> None:
        s, stage, mb = self.sched, a.stage, a.microbatch
        if (stage, mb) not in st.saved:
            raise OrderError(f"rank {self.rank} step {k}: {a} runs before {stage}F{mb}")
        x, out = st.saved.pop((stage, mb))
        g = None if s.is_last(stage) else self._input(a, st, k)
        if a.kind == "B":
            torch.autograd.backward(out, g)
        else:
            # I: the input gradient (and the cheap LayerNorm / embedding weight gradients);
            # every Linear queues (input, grad_output) for W, so the graph is freed now
            inputs = ([] if s.is_first(stage) else [x]) + self.other_params[stage]
            with defer_weight_grads(self.tracker.holder) as queue:
                torch.autograd.backward(out, g, inputs=inputs)
            st.pending_w[(stage, mb)] = queue
        if not s.is_first(stage):
            self._hand_on(Comm(stage, "SEND_B", mb), x.grad, st)

    def _weight(self, a: Action, st: StepState, k: int) -> None:
        queue = st.pending_w.pop((a.stage, a.microbatch), None)
        if queue is None:
            raise OrderError(f"rank {self.rank} step {k}: {a} runs before "
                             f"{a.stage}I{a.microbatch}")
        weight_grads_from(queue)

    # ---- reference check (checkpoints: checkpoint.load_rank, save_rank) -------------------
    def _copy0_named(self) -> dict:
        out = {}
        for st in self.stages:
            if self.sched.copy_of(st) == 0:
                out.update(dict(self.modules[st].named_parameters()))
        return out

    def _grads_for_check(self) -> dict | None:
        if not self.cfg.check:
            return None
        return {n: (p.grad.detach().cpu().clone() if p.grad is not None else None)
                for n, p in self._copy0_named().items()}

    def reference_step(self, step_no: int) -> tuple[float, dict]:
        inputs, targets = make_batch(self.cfg.model, self.sched.M, self.cfg.seed,
                                     self.start_step + step_no)
        loss = self.ref(inputs.to(self.device), targets.to(self.device))
        loss.backward()
        grads = {n: p.grad.detach().cpu().clone() for n, p in self.ref.named_parameters()}
        self.ref_opt.step()
        self.ref_opt.zero_grad(set_to_none=True)
        return float(loss), grads


# ---- a run: steps, gathering, the summary rank 0 writes ------------------------------------
def _do_run(spec: RunSpec, rank: int, world: int, device, wd: Watchdog, offset: float,
            progress, writes_results: bool) -> None:
    spec.config.pin_rank()
    runner = RankRunner(spec, rank, world, device, wd, offset)
    steps, record = spec.config.steps, Record()
    for k in range(steps):
        out = runner.step(k, track_memory=k == 0)   # step 0 is the warm-up, left out of timing
        runner.steps_done = k + 1
        gathered = [None] * world if rank == 0 else None
        dist.gather_object({key: out[key] for key in ("grads", "events", "peak_saved",
                                                      "cuda_peak", "loss")}, gathered, dst=0)
        if rank == 0:
            record.add(runner, k, out, gathered)
            progress(f"{spec.schedule.name}: step {k + 1}/{steps} loss "
                     f"{record.losses[-1]:.6f} ({out['step_time'] * 1e3:.1f} ms)")
    if spec.config.save_checkpoint:
        ckpt.save_rank(runner, spec.config.save_checkpoint)
    box = [record.summary(spec.schedule) if rank == 0 else None]
    if world > 1:   # every node's launcher returns the same result, not only rank 0's host
        dist.broadcast_object_list(box, src=0)
    if writes_results:
        write_json(spec.result, box[0])


# ---- the process -------------------------------------------------------------------------
def _pick_device(want: str, local_rank: int, local_world: int):
    """(device, backend, note): CUDA with NCCL when every local rank gets a GPU."""
    if want in ("auto", "cuda") and torch.cuda.is_available() \
            and torch.cuda.device_count() >= local_world:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        return device, "nccl", ""
    note = ""
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        ranks = "1 local rank" if local_world == 1 else f"{local_world} local ranks"
        note = (f"CUDA asked for but {torch.cuda.device_count()} GPU(s) for {ranks}: "
                f"fell back to CPU with gloo")
    return torch.device("cpu"), "gloo", note


def _report_failure(e: BaseException, rank: int, err_dir: str) -> None:
    tb = traceback.format_exc()
    kind = "deadlock" if isinstance(e, OrderError) else "exception"
    if any(m in str(e) for m in ("Connection closed by peer", "Connection reset by peer",
                                 "Broken pipe", "Socket closed")):
        kind = "peer-lost"   # a consequence of another rank ending, not a cause
    write_json(os.path.join(err_dir, f"rank{rank}.json"),
               {"rank": rank, "kind": kind, "message": f"{type(e).__name__}: {e}",
                "traceback": tb})
    sys.stderr.write(tb)
    sys.stderr.flush()


def _serve(job: dict, rank: int, world: int, wd: Watchdog) -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    device, backend, note = _pick_device(job.get("device", "auto"), local_rank, local_world)
    torch.set_num_threads(1)
    timeout = timedelta(seconds=float(job.get("comm_timeout", 30)) + 30)
    with wd.watching("in init_process_group (rendezvous with the other ranks)"):
        dist.init_process_group(backend, timeout=timeout,
                                **({"device_id": device} if backend == "nccl" else {}))
    offset = clock_offset(rank, world, device)
    placement = gather_placement(dist, rank, world)    # node rank + address of each rank
    if local_rank == 0:   # one writer per node: each node's launcher reads its own files
        write_json(job["info"], {"backend": backend, "device": str(device), "note": note,
                                 "world": world, "placement": placement})

    def progress(msg):
        if rank == 0 and job.get("progress"):
            with open(job["progress"], "a") as fh:
                fh.write(msg + "\n")

    for run in job["runs"]:
        _do_run(RunSpec.from_dict(run), rank, world, device, wd, offset, progress,
                writes_results=local_rank == 0)
    with wd.watching("in the final barrier"):
        dist.barrier()
    dist.destroy_process_group()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        job = json.load(f)
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    wd = Watchdog(rank, job["err_dir"], float(job.get("comm_timeout", 30)))
    wd.start()
    try:
        _serve(job, rank, world, wd)
    except BaseException as e:  # noqa: BLE001 - report every failure, then exit non-zero
        _report_failure(e, rank, job["err_dir"])
        os._exit(1)
    # everything is written and the process group destroyed: skip the interpreter's teardown,
    # where a gloo thread's destructor once aborted a finished rank ("terminate called
    # without an active exception", SIGABRT) and turned a good run into a failed one
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
