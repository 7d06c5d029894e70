"""Interface choice, Slurm's environment, the queue watcher and the lost-node message, without
Slurm or a second host (tests/cluster/test_cluster_hosts.py and test_cluster_slurm.py run them)."""
import json

import pytest

from pplab.runtime import cluster

IFACES = {"lo": ["127.0.0.1", "::1"], "eth0": ["10.77.0.2", "fe80::1"], "ib0": ["192.168.5.2"]}


def test_interface_is_the_one_holding_the_routed_source_address(monkeypatch):
    monkeypatch.setattr(cluster, "route_source", lambda host: "10.77.0.2")
    c = cluster.choose_interface("10.77.0.1", environ={}, interfaces=IFACES)
    assert (c.ifname, c.address, c.source) == ("eth0", "10.77.0.2", "route")


def test_loopback_endpoint_gives_lo():
    c = cluster.choose_interface("127.0.0.1", environ={}, interfaces=IFACES)
    assert (c.ifname, c.address) == ("lo", "127.0.0.1")


def test_flag_beats_user_variable_which_beats_the_route(monkeypatch):
    monkeypatch.setattr(cluster, "route_source", lambda host: "10.77.0.2")
    user = {"NCCL_SOCKET_IFNAME": "=ib0"}
    c = cluster.choose_interface("10.77.0.1", environ=user, interfaces=IFACES)
    assert (c.ifname, c.address, c.source) == ("ib0", "192.168.5.2", "environment")
    env = cluster.launch_env(c, environ=user)
    assert env["GLOO_SOCKET_IFNAME"] == "ib0" and "NCCL_SOCKET_IFNAME" not in env  # user's stays
    f = cluster.choose_interface("10.77.0.1", flag="eth0", environ=user, interfaces=IFACES)
    env = cluster.launch_env(f, environ=user)
    assert env["GLOO_SOCKET_IFNAME"] == "eth0" and env["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert env[cluster.HOST_ADDR_VAR] == "10.77.0.2"


def test_unknown_interface_names_the_ones_there_are():
    with pytest.raises(ValueError, match=r"no network interface 'wlan9'.*eth0, ib0, lo"):
        cluster.choose_interface("10.77.0.1", flag="wlan9", interfaces=IFACES)


def test_unresolvable_rendezvous_host_is_one_clear_error(monkeypatch):
    def fail(*a, **k):                  # no lookup leaves the machine
        raise cluster.socket.gaierror(-2, "Name or service not known")
    monkeypatch.setattr(cluster.socket, "getaddrinfo", fail)
    with pytest.raises(ValueError, match="cannot resolve the rendezvous host 'gpu99'"):
        cluster.route_source("gpu99")


@pytest.mark.parametrize("nodelist, first", [
    ("pn[0-1]", "pn0"), ("gpu[003-010,12],login", "gpu003"), ("a,b", "a"), ("single", "single"),
    ("n[7]", "n7"),
])
def test_first_host_of_a_slurm_hostlist(nodelist, first):
    assert cluster.first_host(nodelist) == first


def test_node_addr_from_scontrol():
    text = ("NodeName=pn0 Arch=x86_64 CoresPerSocket=1\n   CPUAlloc=0 CPUTot=2\n"
            "   NodeAddr=10.77.0.1 NodeHostName=pn0 Version=22.05.8\n")
    assert cluster.parse_node_addr(text) == "10.77.0.1"
    assert cluster.parse_node_addr("NodeName=x") is None


def _srun_env(**over):
    env = {"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2",
           "SLURM_NODEID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "pn[0-1]"}
    env.update(over)
    return {k: v for k, v in env.items() if v is not None}


def test_slurm_step_gives_nodes_rank_and_endpoint_from_the_first_nodes_address():
    asked = []
    found = cluster.slurm_nodes(_srun_env(), address=lambda n: asked.append(n) or "10.77.0.1")
    assert asked == ["pn0"]
    assert found == (2, 1, f"10.77.0.1:{cluster.slurm_port(1234, 0)}")
    assert cluster.slurm_port(1234, 0) != cluster.slurm_port(1234, 1)
    assert 20000 <= cluster.slurm_port(99999, 9) < 30000


def test_outside_srun_or_on_one_node_it_is_a_local_run():
    addr = lambda n: pytest.fail("no scontrol call expected")  # noqa: E731
    assert cluster.slurm_nodes({"SLURM_JOB_ID": "5", "SLURM_NNODES": "2"}, addr) is None  # batch
    assert cluster.slurm_nodes({}, addr) is None
    one = _srun_env(SLURM_STEP_NUM_NODES="1", SLURM_STEP_NUM_TASKS="1", SLURM_NODEID="0")
    assert cluster.slurm_nodes(one, addr) is None
    assert cluster.resolve_nodes(None, None, None, {}, addr) == (1, 0, None)


def test_several_tasks_per_node_is_refused():
    with pytest.raises(ValueError, match=r"4 tasks on 2 node\(s\).*--ntasks-per-node=1"):
        cluster.slurm_nodes(_srun_env(SLURM_STEP_NUM_TASKS="4"), lambda n: "x")


def test_explicit_node_flags_win_over_slurm():
    got = cluster.resolve_nodes(2, 0, "10.0.0.9:29500", _srun_env(), lambda n: "x")
    assert got == (2, 0, "10.0.0.9:29500")


def test_torchrun_logs_go_into_the_run_folder(tmp_path):
    assert cluster.torchrun_log_args(str(tmp_path)) == [f"--log-dir={tmp_path}/torchrun-logs"]


def _placement():
    return [{"rank": r, "node_rank": r // 2, "host": f"10.77.0.{r // 2 + 1}", "node": f"pn{r // 2}"}
            for r in range(4)]


def test_lost_node_is_named_with_its_ranks(tmp_path):
    (tmp_path / "info.json").write_text(json.dumps({"placement": _placement()}))
    (tmp_path / "rank0.json").write_text(json.dumps({"rank": 0, "kind": "peer-lost", "message":
        "RuntimeError: [pair.cc:553] Connection closed by peer [10.77.0.1]:63688."}))
    (tmp_path / "rank1.json").write_text(json.dumps({"rank": 1, "kind": "peer-lost", "message":
        "RuntimeError: [pair.cc:537] Read error [10.77.0.2]:58518: Connection reset by peer."}))
    note = cluster.lost_node_note(str(tmp_path), 0)
    assert note == ("; node 1 (pn1, 10.77.0.2; ranks 2–3) went away mid-run: rank(s) 1 on this "
                    "node lost the connection to it")


def test_no_node_is_blamed_when_all_share_one_address(tmp_path):
    same = [dict(p, host="127.0.0.1") for p in _placement()]
    (tmp_path / "info.json").write_text(json.dumps({"placement": same}))
    (tmp_path / "rank1.json").write_text(json.dumps({"rank": 1, "kind": "peer-lost", "message":
        "Read error [127.0.0.1]:5: Connection reset by peer"}))
    assert cluster.lost_node_note(str(tmp_path), 0) == ""


def test_nodes_of_placement():
    assert cluster.nodes_of(_placement())[1] == {"host": "10.77.0.2", "node": "pn1",
                                                 "ranks": [2, 3]}


def test_queue_watcher_reads_squeue():
    from pplab.runtime.submit import QueueWatcher
    info = QueueWatcher().read_info(b"12|RUNNING|pn[0-1]|None\n13|PENDING||Resources\n")
    assert info["12"]["State"] == "RUNNING" and info["12"]["NodeList"] == "pn[0-1]"
    assert info["13"]["Reason"] == "Resources"


def test_submit_without_slurm_says_why(monkeypatch):
    from pplab.runtime import submit
    monkeypatch.setenv("PATH", "/nonexistent")
    reason = submit.unavailable_reason()
    assert "no Slurm on this machine" in reason and "sbatch" in reason
    with pytest.raises(ValueError, match="no Slurm on this machine"):
        submit.submit_run("1f1b", 4, 8, nodes=2)


def test_installed_slurm_without_a_configuration_is_not_offered(monkeypatch):
    """A machine with Slurm's commands but no configuration is a cluster set up wrong: the
    panel says why in red, where someone expects the cluster mode."""
    from pplab.canvases.cluster_mode import ClusterMode
    from pplab.probe import slurm
    if slurm.unavailable_reason() and "not on PATH" in slurm.unavailable_reason():
        pytest.skip("needs Slurm's commands on PATH")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(slurm, "CONFIG_PATHS", ("/nonexistent/slurm.conf",))
    assert "there is no Slurm configuration" in slurm.unavailable_reason()
    monkeypatch.setattr("pplab.canvases.cluster_mode.unavailable_reason",
                        slurm.unavailable_reason)
    widget = ClusterMode().widget.value
    assert "cluster mode not offered" in widget and "#b71c1c" in widget


def test_run_panel_without_slurm_has_no_cluster_mode_and_says_so_quietly(monkeypatch):
    """A laptop has no Slurm and expects none: one muted line, not an error in red."""
    from pplab.canvases.runs import run_panel
    monkeypatch.setenv("PATH", "/nonexistent")
    p = run_panel("1f1b", P=2, M=2)
    import ipywidgets
    assert isinstance(p.cluster.widget, ipywidgets.HTML)      # no toggle, one line instead
    assert "the cluster mode needs Slurm" in p.cluster.widget.value
    assert "#757575" in p.cluster.widget.value and "#b71c1c" not in p.cluster.widget.value
    assert "<br>" not in p.cluster.widget.value
    p.cluster.mode.value = "cluster"            # even if forced, the run stays local
    assert not p.cluster.on


def test_cluster_mode_refuses_a_p_that_does_not_divide_before_submitting(monkeypatch):
    from pplab.canvases.cluster_mode import ClusterMode
    from pplab.canvases.runs import launch
    from pplab.runtime import submit
    monkeypatch.setattr(submit, "unavailable_reason", lambda: None)
    monkeypatch.setattr(submit, "QueueExecutor", lambda **k: pytest.fail("nothing is submitted"))
    cm = ClusterMode(nodes=2)
    res, msg = launch("1f1b", P=3, M=6, runner=cm.run)
    assert res is None
    assert msg == ("1f1b with P=3, M=6: P=3 ranks cannot be split evenly over 2 nodes; "
                   "use a P that is a multiple of 2")
