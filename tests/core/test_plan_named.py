"""``pplab plan`` with a layout the user names (--tp/--pp/--dp/--zero/--schedule/-V/-M/--mbs):
sized as the planner sizes its own, placed among the planner's candidates, its MFU by hand,
and exported as named."""
import json

import pytest

from pplab.cli import main
from pplab.memory import ModelSpec, ParallelConfig
from pplab.memory.planner import Hardware, mfu, plan, rank_among, sized

SHAPES = ["--layers", "8", "--hidden", "1024", "--heads", "8", "--ffn", "4096",
          "--vocab", "1000", "--seq", "2048"]
MODEL = ModelSpec("custom", 8, 1024, 8, 4096, 1000, 2048)


def named(capsys, *flags):
    assert main(["plan", *SHAPES, "--gpus", "16", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_named_layout_is_sized_and_ranked(capsys):
    d = named(capsys, "--tp", "2", "--pp", "4", "--schedule", "interleaved", "-V", "2",
              "--zero", "1", "-M", "16")
    assert (d["tp"], d["pp"], d["dp"], d["virtual"], d["microbatches"]) == (2, 4, 2, 2, 16)
    assert d["global_batch"] == 32 and d["fits"] and len(d["per_rank_bytes"]) == 4
    assert max(d["per_rank_bytes"]) == pytest.approx(d["peak_bytes"])
    cfg = ParallelConfig(2, 4, 2, 1, True, "selective", 1, 16, "interleaved", 2)
    mine, _ = sized(MODEL, cfg)
    assert d["step_s"] == pytest.approx(mine.step_time)
    tokens = 32 * 2048
    assert d["mfu"] == pytest.approx(tokens * MODEL.train_flops_per_token() /
                                     (16 * 989e12 * mine.step_time))
    cands = [c for c in plan(MODEL, 16, global_batch=32) if c.feasible]
    assert d["rank"] == rank_among(mine, cands) and d["of"] == len(cands)
    assert d["rank"] == 1 + sum(c.step_time < mine.step_time for c in cands) > 1
    assert d["first_choice"]["step_s"] == pytest.approx(cands[0].step_time)


def test_the_first_choice_named_ranks_first(capsys):
    best = [c for c in plan(MODEL, 16, global_batch=128) if c.feasible][0].to_dict()
    flags = ["--tp", str(best["tp"]), "--pp", str(best["pp"]), "--zero", str(best["zero"]),
             "--recompute", best["recompute"], "--global-batch", "128",
             "--zero3-regather", best["zero3_regather"] or "per_microbatch"]
    if best["pp"] > 1:
        flags += ["--schedule", best["schedule"], "-V", str(best["virtual"])]
    d = named(capsys, *flags)
    assert d["rank"] == 1 and d["step_s"] == pytest.approx(best["step_s"])


def test_named_layout_text_says_fit_step_mfu_and_place(capsys):
    assert main(["plan", *SHAPES, "--gpus", "16", "--pp", "8", "--schedule", "1f1b",
                 "--recompute", "none"]) == 0
    out = capsys.readouterr().out
    assert "your layout: TP=1 PP=8 DP=2 1f1b M=64" in out
    assert "MFU" in out and "fitting layouts pplab lists" in out and "faster: bubble" in out


def test_mfu_by_hand():
    cfg = ParallelConfig(1, 1, 4, microbatches=2, microbatch=3)
    hw = Hardware(flops=1e15)
    assert mfu(MODEL, cfg, 2.0, hw) == pytest.approx(
        24 * 2048 * MODEL.train_flops_per_token() / (4 * 1e15 * 2.0))


def test_named_layout_exported_as_named(capsys):
    assert main(["plan", *SHAPES, "--gpus", "16", "--tp", "2", "--pp", "2", "--zero", "1",
                 "--export", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "# Megatron-LM layout named to pplab plan" in out
    assert "--tensor-model-parallel-size 2" in out and "--pipeline-model-parallel-size 2" in out
    assert "--use-distributed-optimizer" in out and "--global-batch-size 128" in out


@pytest.mark.parametrize("flags,says", [
    (["--tp", "2", "--pp", "3"], "does not divide --gpus 16"),
    (["--tp", "2", "--dp", "4"], "≠ --gpus 16"),
    (["--tp", "2", "-M", "3", "--global-batch", "64"], "≠ --global-batch 64"),
    (["--tp", "1", "--sp"], "--sp needs --tp ≥ 2"),
    (["--tp", "2", "--zero", "1", "--export", "torchtitan"], "cannot export to torchtitan"),
    (["--pp", "2", "--schedule", "nope"], "nope"),
])
def test_named_layout_bad_input(capsys, flags, says):
    assert main(["plan", *SHAPES, "--gpus", "16", *flags]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_microbatch_sizes_searched(capsys):
    assert main(["plan", *SHAPES, "--gpus", "16", "--mbs", "1,2,4", "--top", "0",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["microbatch_size"] for r in rows if r["fits"]} == {1, 2, 4}
    assert main(["plan", *SHAPES, "--gpus", "16", "--tp", "2", "--mbs", "1,2"]) == 2
    assert "one microbatch size" in capsys.readouterr().err
    assert main(["plan", *SHAPES, "--gpus", "16", "--mbs", "two"]) == 2
