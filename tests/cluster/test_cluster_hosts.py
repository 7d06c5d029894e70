"""Two hosts for real, without Slurm: two network namespaces on a bridge (10.77.0.1, 10.77.0.2),
where the host name resolves to 127.0.0.1 as in many containers. ``pplab run --nnodes 2`` on
each side must train like one process; a node killed mid-job must be named by the other."""
import json
import os
import subprocess
import sys
import time

import pytest

import netns_lan
from netns_lan import Lan

pytestmark = pytest.mark.slow
ENDPOINT = "10.77.0.1:29500"


@pytest.fixture(scope="module")
def lan():
    reason = netns_lan.skip_reason()
    if reason:
        pytest.skip(reason)
    hosts = Lan(["n0", "n1"])
    try:
        yield hosts
    finally:
        hosts.close()
        assert not hosts.left(), f"namespaces left behind: {hosts.left()}"


def _cmd(k: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pplab.cli", "run", "--schedule", "1f1b", "-P", "4", "-M", "8",
            "--nnodes", "2", "--node-rank", str(k), "--rdzv-endpoint", ENDPOINT, *extra]


def _litter(tmp) -> list[str]:
    """What runs left in their temp folder (torch's per-user inductor cache is not per run)."""
    return sorted(n for n in os.listdir(tmp) if not n.startswith("torchinductor_"))


def _one_json(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, f"--json must print one line, got {len(lines)}: {stdout[:3000]!r}"
    return json.loads(lines[0])


def _start(lan, tmp, *extra, env=None):
    env = dict(os.environ, TMPDIR=str(tmp), **(env or {}))
    return [subprocess.Popen(lan.exec(h, _cmd(k, *extra)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
            for k, h in enumerate(("n0", "n1"))]


def test_advertising_loopback_is_the_bug_and_a_users_interface_is_kept(lan, tmp_path):
    # what gloo did by itself where the host name resolves to 127.0.0.1: with the user's own
    # GLOO_SOCKET_IFNAME=lo (kept, not overridden) each rank tells its peers to dial 127.0.0.1
    procs = _start(lan, tmp_path, "--timeout", "20", env={"GLOO_SOCKET_IFNAME": "lo"})
    outs = [p.communicate(timeout=90) for p in procs]
    assert all(p.returncode == 1 for p in procs), outs
    assert any("connectFullMesh failed" in err and "remote=[127.0.0.1]" in err
               for _, err in outs), outs       # the error, word for word


def test_two_hosts_train_like_one_process_and_print_the_same(lan, tmp_path):
    procs = _start(lan, tmp_path, "--json", "--timeout", "120")
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    d0, d1 = (_one_json(o) for o, _ in outs)
    assert d0 == d1
    assert d0["nnodes"] == 2 and d0["grad_max_rel_error"] < 1e-5
    assert [(p["rank"], p["node_rank"], p["host"]) for p in d0["placement"]] == [
        (0, 0, "10.77.0.1"), (1, 0, "10.77.0.1"), (2, 1, "10.77.0.2"), (3, 1, "10.77.0.2")]
    print(f"\ntwo hosts (netns): max relative gradient error {d0['grad_max_rel_error']:.2e}")
    assert _litter(tmp_path) == []        # no torchelastic_*, no pplab-run-* after a success


def test_a_node_killed_mid_job_is_named_and_nothing_is_left(lan, tmp_path):
    procs = _start(lan, tmp_path, "--steps", "6", "--emulate", "--tf", "0.1", "--tb", "0.2",
                   "--timeout", "60")
    t0 = time.monotonic()
    while not any("step 1/" in open(os.path.join(tmp_path, d, "progress.log")).read()
                  for d in os.listdir(tmp_path)
                  if os.path.exists(os.path.join(tmp_path, d, "progress.log"))):
        assert time.monotonic() - t0 < 240, "the job never reached its first step"
        assert procs[0].poll() is None, procs[0].communicate()
        time.sleep(0.3)
    Lan.kill_all(lan.ns["n1"])                 # node 1 loses power
    t_kill = time.monotonic()
    _, err = procs[0].communicate(timeout=240)
    procs[1].communicate(timeout=60)
    assert procs[0].returncode == 1, err
    assert time.monotonic() - t_kill < 180      # a limit only a hang reaches; the line below
                                                # tells a lost node from the job's timeout
    line = err.strip().splitlines()[-1]
    assert "node 1 (" in line and "10.77.0.2; ranks 2–3) went away mid-run" in line, line
    for ns in lan.ns.values():
        assert Lan.pids(ns) == [], f"processes left in {ns}"
