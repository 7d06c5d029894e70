"""Runtime model, stage cutting, recomputation and resharding checkpoints (in-process, fast)."""

import pytest
import torch

from pplab.ir import Schedule
from pplab.runtime import TinyConfig, TinyGPT, build_stage_modules, load_checkpoint, make_batch, \
    save_checkpoint
from pplab.runtime.launcher import run_schedule
from pplab.runtime.worker import SavedTensorTracker
from pplab.runtime.model import _Tracked, make_optimizer
from pplab.registry import make_schedule


def test_tiny_config_defaults_match_memory_preset():
    c = TinyConfig()
    assert (c.vocab, c.hidden, c.heads, c.ffn, c.layers, c.seq, c.microbatch_size,
            c.tied_embeddings, c.dtype) == (256, 64, 4, 256, 8, 32, 2, False, "float32")


def test_stage_modules_keep_full_names_and_weights():
    full = TinyGPT(TinyConfig(), seed=3)
    ref = dict(full.named_parameters())
    for P in (1, 2, 4):
        s = make_schedule("1f1b", P, 4)
        mods = build_stage_modules(s, TinyConfig(), 3, range(s.num_stages))
        names = [n for m in mods.values() for n, _ in m.named_parameters()]
        assert sorted(names) == sorted(ref)
        for m in mods.values():
            for n, p in m.named_parameters():
                assert torch.equal(p, ref[n])
    mods = build_stage_modules(make_schedule("1f1b", 4, 4), TinyConfig(), 3, [2])
    assert any(n.startswith("layers.5.") for n, _ in mods[2].named_parameters())


def test_model_value_errors():
    with pytest.raises(ValueError, match="layers"):
        run_schedule("interleaved", P=4, M=8, V=4)           # 16 stages > 8 layers
    with pytest.raises(ValueError, match="all-reduce"):
        run_schedule("1f1b", P=2, M=4, model=TinyConfig(tied_embeddings=True))
    with pytest.raises(ValueError, match="recompute"):
        run_schedule("1f1b", P=2, M=4, recompute="some")
    with pytest.raises(ValueError, match="never runs"):
        run_schedule(Schedule.from_text(["0F0 0B0", "1F0"]))


def _stage_grads(schedule, recompute, tracker=None):
    """Run the stages of a schedule in one process (forward chain, backward chain)."""
    cfg = TinyConfig()
    mods = build_stage_modules(schedule, cfg, 0, range(schedule.num_stages), recompute)
    inputs, targets = make_batch(cfg, 1, 0, 0)
    x = inputs
    if tracker:
        tracker.exclude = {p.untyped_storage().data_ptr() for m in mods.values()
                           for p in m.parameters()}
    ctx = tracker.hooks() if tracker else torch.autograd.graph.saved_tensors_hooks(lambda t: t,
                                                                                  lambda t: t)
    _Tracked.track = tracker.track if tracker else None
    with ctx:
        for s in range(schedule.num_stages):
            x = mods[s](x, targets) if schedule.is_last(s) else mods[s](x)
    _Tracked.track = None
    peak = tracker.peak if tracker else None
    x.backward()
    return {n: p.grad for m in mods.values() for n, p in m.named_parameters()}, peak


def test_recompute_keeps_gradients_and_saves_memory():
    s = make_schedule("1f1b", 2, 2)
    peaks, grads = {}, {}
    for rc in ("none", "full", "selective"):
        tr = SavedTensorTracker()
        grads[rc], peaks[rc] = _stage_grads(s, rc, tr)
    for rc in ("full", "selective"):
        for n, g in grads["none"].items():
            assert torch.allclose(grads[rc][n], g, rtol=1e-5, atol=1e-7), (rc, n)
    print("saved bytes", peaks)
    assert peaks["full"] < 0.5 * peaks["none"]
    assert peaks["selective"] < peaks["none"]


def test_checkpoint_reshards_4_2_1_4(tmp_path):
    cfg = TinyConfig()

    def stages(P):
        s = make_schedule("1f1b", P, 4)
        mods = build_stage_modules(s, cfg, 0, range(s.num_stages))
        return [mods[i] for i in range(s.num_stages)]

    full = TinyGPT(cfg, 0)
    opt = make_optimizer(full.parameters(), "adam", 0.01)
    inputs, targets = make_batch(cfg, 4, 0, 0)
    full(inputs, targets).backward()
    opt.step()
    save_checkpoint(str(tmp_path / "p1"), full, opt)
    for P, src, dst in ((4, "p1", "p4"), (2, "p4", "p2"), (1, "p2", "p1b"), (4, "p1b", "p4b")):
        mods = stages(P)
        o = make_optimizer([p for m in mods for p in m.parameters()], "adam", 0.01)
        load_checkpoint(str(tmp_path / src), mods, o)
        save_checkpoint(str(tmp_path / dst), mods, o)
    back = stages(4)
    load_checkpoint(str(tmp_path / "p4b"), back)
    ref = dict(full.named_parameters())
    for m in back:
        for n, p in m.named_parameters():
            assert torch.equal(p, ref[n]), n


def test_mismatched_checkpoint_names_first_parameter(tmp_path):
    save_checkpoint(str(tmp_path / "big"), TinyGPT(TinyConfig(hidden=32, heads=2), 0))
    with pytest.raises(ValueError, match=r"first mismatching parameter 'embed.tok.weight'"):
        load_checkpoint(str(tmp_path / "big"), TinyGPT(TinyConfig(), 0))


def test_runtime_model_is_the_memory_models_tiny_preset():
    """The memory model counts what the runtime builds: same shape, same parameter count."""
    from pplab.memory.presets import get_preset
    spec, cfg = get_preset("tiny"), TinyConfig()
    assert (spec.layers, spec.hidden, spec.heads, spec.ffn, spec.vocab, spec.seq) == \
        (cfg.layers, cfg.hidden, cfg.heads, cfg.ffn, cfg.vocab, cfg.seq)
    assert sum(p.numel() for p in TinyGPT(cfg).parameters()) == spec.num_params() == 434_816
