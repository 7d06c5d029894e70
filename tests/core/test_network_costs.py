"""Per-message latency and oversubscription above a pod: off by default (every figure as it
was), and where a network names them, each term priced by hand."""
import pytest

from pplab.cli import main
from pplab.memory import ModelSpec, ParallelConfig
from pplab.memory.comm import Network, axis_bandwidths
from pplab.memory.hardware import hardware
from pplab.memory.planner import estimate

M = ModelSpec("m", 8, 1024, 8, 4096, 1000, 2048)
CFG = ParallelConfig(4, 2, 4, microbatches=8, sp=True, recompute="selective")


def test_defaults_change_nothing():
    assert estimate(M, CFG, hardware())["step_time"] == estimate(M, CFG)["step_time"]


def test_latency_per_message_by_hand():
    lat = 20e-6
    base, slow = estimate(M, CFG, hardware()), estimate(M, CFG, hardware(latency=lat))
    assert slow["tp_time_per_allreduce"] == pytest.approx(
        base["tp_time_per_allreduce"] + 2 * (4 - 1) * lat)       # a ring of 4: 6 messages
    assert slow["p2p"] == pytest.approx(base["p2p"] + lat)
    assert slow["step_time"] > base["step_time"]


def test_oversubscription_above_a_pod():
    net = Network(450e9, 50e9, 8, pod_gpus=64, oversubscription=7)
    bw = axis_bandwidths(ParallelConfig(8, 16, 64), net)
    assert bw["tp"] == 450e9 and bw["dp"] == 50e9 / 7 and bw["pp"] == 50e9 / 7
    bw = axis_bandwidths(ParallelConfig(8, 2, 4), net)
    assert bw["dp"] == bw["pp"] == 50e9                         # 64 GPUs: inside the pod


def test_cli_flags_and_bad_values(capsys):
    assert main(["memory", "--layers", "8", "--hidden", "1024", "--heads", "8", "--ffn",
                 "4096", "--vocab", "1000", "--tp", "2", "--pp", "2", "--latency", "10",
                 "--pod-gpus", "2", "--oversubscription", "7"]) == 0
    assert main(["memory", "--layers", "8", "--hidden", "1024", "--heads", "8", "--ffn",
                 "4096", "--vocab", "1000", "--oversubscription", "0.5"]) == 2
    assert "oversubscription" in capsys.readouterr().err
