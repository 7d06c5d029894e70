"""`pplab run` end to end, and checkpoints resharded across P in real runs."""
import json
import math
import subprocess
import sys

import pytest

from pplab.cli import main
from pplab.runtime import run_many, run_schedule


def test_cli_json(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pplab.cli", "run", "--schedule", "zbv", "-P",
                          "2", "-M", "4", "--steps", "2", "--json", "--emulate", "--tf", "0.01",
                          "--tb", "0.02", "--tw", "0.01"],
                         capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("schedule", "P", "M", "V", "backend", "device", "loss", "reference_loss",
                "grad_max_rel_error", "step_time_s", "bubble_fraction", "peak_inflight",
                "ranks", "events", "simulated_bubble_fraction"):
        assert key in d, key
    assert d["backend"] == "gloo" and d["P"] == 2 and d["V"] == 2
    assert d["grad_max_rel_error"] <= 1e-5
    assert {"rank", "action", "start", "end"} <= set(d["events"][0])


@pytest.mark.parametrize("argv, words", [
    (["run", "--schedule", "nope", "-P", "2"], "unknown schedule"),
    (["run", "--schedule", "dualpipe", "-P", "3"], "even number"),
    (["run", "--schedule", "1f1b", "-P", "2", "--tf", "1"], "--emulate"),
    (["run", "--schedule", "1f1b", "-P", "2", "--steps", "0"], "steps"),
    (["run", "-P", "2"], "--schedule"),
])
def test_cli_bad_args_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_checkpoint_reshards_in_real_runs(tmp_path):
    c4, c2 = str(tmp_path / "c4"), str(tmp_path / "c2")
    opts = dict(M=4, optimizer="adam", lr=0.01)
    full, first = run_many([("1f1b", dict(opts, steps=3)),
                            ("1f1b", dict(opts, steps=1, save_checkpoint=c4))], 4, timeout=200)
    # 4 → 2: the next step's loss is the un-resharded run's second step
    r2 = run_schedule("interleaved", P=2, M=4, V=2, steps=1, optimizer="adam", lr=0.01,
                      load_checkpoint=c4, save_checkpoint=c2, timeout=200)
    # 2 → 1: and the third
    r1 = run_schedule("gpipe", P=1, M=4, steps=1, optimizer="adam", lr=0.01,
                      load_checkpoint=c2, timeout=200)
    print(full.losses, first.losses, r2.losses, r1.losses)
    assert math.isclose(r2.loss, full.losses[1], rel_tol=1e-6)
    assert math.isclose(r1.loss, full.losses[2], rel_tol=1e-6)
    assert r2.grad_max_rel_error <= 1e-5 and r1.grad_max_rel_error <= 1e-5


def test_cli_model_shape_flags(capsys):
    argv = ["run", "--schedule", "1f1b", "-P", "2", "-M", "2", "--steps", "1", "--layers", "4",
            "--hidden", "32", "--heads", "2", "--ffn", "64", "--seq", "16", "--mbs", "1",
            "--comm", "in-order"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "max relative gradient error" in out and "float32 round-off unit: 1.2e-07" in out
    # a smaller model saves fewer bytes than the default one would: the flags reached the ranks
    saved = json.loads(out.split("bytes per rank ")[1].splitlines()[0])
    assert saved[0] < 200_000


@pytest.mark.parametrize("argv, words", [
    (["--hidden", "30", "--heads", "4"], "hidden=30 must be divisible by heads=4"),
    (["-P", "4", "--layers", "2"], "only 2 layers"),
    (["--dtype", "int8"], "dtype 'int8'"),
    (["--seq", "0"], "TinyConfig.seq must be ≥ 1"),
])
def test_cli_bad_model_flags_exit_2(argv, words, capsys):
    assert main(["run", "--schedule", "1f1b", "-P", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
