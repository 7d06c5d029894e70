"""Multi-node flags: two "nodes" on one host, each a separate torchrun launch with
--nnodes 2, its own --node-rank and node 0's rendezvous endpoint, as on a cluster."""
import json
import math
import subprocess
import sys
import threading

import pytest

from pplab.cli import main
from pplab.runtime import RunError, run_schedule
from pplab.runtime.launcher import _free_port as _port


def _two_nodes(**kw) -> dict:
    """Run the same job as node 0 and node 1 at once; {node_rank: RunResult or exception}."""
    endpoint = f"127.0.0.1:{_port()}"
    out = {}

    def node(k):
        try:
            out[k] = run_schedule(nnodes=2, node_rank=k, rdzv_endpoint=endpoint, **kw)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out[k] = e

    threads = [threading.Thread(target=node, args=(k,)) for k in (1, 0)]  # node 1 may come first
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=kw.get("timeout", 60) + 30)
    assert not any(t.is_alive() for t in threads), "a node's launcher did not return"
    return out


def test_two_nodes_train_like_one_process_and_the_cli_node_prints_the_same():
    """Node 0 through the library, node 1 through ``pplab run --json``, at once: the job
    trains like one process, and the CLI's node prints the measurement node 0 hands back
    (gathered on rank 0)."""
    endpoint = f"127.0.0.1:{_port()}"
    cmd = [sys.executable, "-m", "pplab.cli", "run", "--schedule", "1f1b", "-P", "4", "-M", "8",
           "--steps", "2", "--json", "--timeout", "180", "--nnodes", "2", "--node-rank", "1",
           "--rdzv-endpoint", endpoint]
    node1 = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r0 = run_schedule("1f1b", P=4, M=8, steps=2, timeout=180, nnodes=2, node_rank=0,
                          rdzv_endpoint=endpoint)
    finally:
        out, err = node1.communicate(timeout=300)     # node 1 ends by its own --timeout
    assert node1.returncode == 0, err
    assert r0.grad_max_rel_error <= 1e-5
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(r0.losses, r0.reference_losses))
    assert r0.executed == [list(map(str, row)) for row in r0.schedule.ranks]
    d0, d1 = json.loads(json.dumps(r0.to_dict())), json.loads(out)
    for key in ("losses", "reference_losses", "grad_errors", "peak_saved_bytes", "ranks",
                "events", "nnodes", "placement"):
        assert d1[key] == d0[key], key


def test_node_rank_decides_which_ranks_a_node_hosts():
    # rank 3 raises; with --node-rank honoured it lives on node 1 (ranks 2, 3), so node 1's
    # launcher names it from its own error files
    out = _two_nodes(schedule_or_name="1f1b", P=4, M=4, steps=1, timeout=60,
                     fault={"rank": 3, "op": 1, "kind": "raise"})
    assert isinstance(out[1], RunError), out[1]
    assert "rank 3 failed" in str(out[1]) and "injected fault" in str(out[1])
    assert isinstance(out[0], RunError), out[0]     # node 0 sees its peers go away
    assert "rank 3 failed" not in str(out[0]) and "this is node 0 of 2 (ranks 0–1)" in str(out[0])


@pytest.mark.parametrize("argv, words", [
    (["--nnodes", "2"], "HOST:PORT"),
    (["--nnodes", "2", "--rdzv-endpoint", "host-without-port"], "HOST:PORT"),
    (["--nnodes", "3", "--rdzv-endpoint", "h:29500"], "cannot be split evenly over 3 nodes"),
    (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29500"], "node_rank must be in 0..1"),
    (["--nnodes", "0"], "nnodes must be ≥ 1"),
])
def test_bad_node_arguments_exit_2(argv, words, capsys):
    assert main(["run", "--schedule", "1f1b", "-P", "4", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_a_node_whose_peers_never_come_says_so_and_cleans_up():
    import psutil
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    endpoint = f"127.0.0.1:{_port()}"
    with pytest.raises(RunError) as err:
        run_schedule("1f1b", P=4, M=4, steps=1, nnodes=2, node_rank=0, rdzv_endpoint=endpoint,
                     timeout=10)
    msg = str(err.value)
    assert "no rank started within the 10 s timeout" in msg and "--node-rank 1" in msg
    assert endpoint in msg
    left = [p for p in psutil.Process().children(recursive=True)
            if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, left
