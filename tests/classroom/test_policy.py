"""The class policy (pplab/probe/policy.py): each limit of the ``[limits]`` section refuses a
request past it with one line naming the limit, its file and who sets it, in the run panel (both
modes), in ``submit_run`` before anything reaches sbatch, and in ``pplab run``; where the
file is looked up; and that with no class file nothing is limited.

Slurm is not needed: its availability is patched in, and what would be submitted is read off
submitit's executor. The real submission under a policy is in test_journey_slurm.py."""
from pathlib import Path

import pytest

from pplab.probe import policy
from pplab.canvases import cluster_mode
from pplab.runtime import submit

LIMITS = """\
[limits]
nodes = 2
procs_per_node = 2      # a comment after a value
partitions = class, debug
account = physics101
qos = teaching
minutes = 5
local_procs = cores
"""


@pytest.fixture
def class_file(tmp_path, monkeypatch):
    """A class settings file, found through $PPLAB_CLASSROOM; the system path made absent."""
    path = tmp_path / "classroom.ini"
    path.write_text(LIMITS)
    monkeypatch.setenv(policy.SETTINGS_VAR, str(path))
    monkeypatch.setattr(policy, "SYSTEM_PATH", tmp_path / "absent.ini")
    return path


def refusal(limit: str, path: Path) -> str:
    return f"({limit} in {path}, set by your instructor)"


def test_lookup_env_then_system_path_then_nothing(tmp_path, monkeypatch):
    system = tmp_path / "etc.ini"
    monkeypatch.setattr(policy, "SYSTEM_PATH", system)
    monkeypatch.delenv(policy.SETTINGS_VAR, raising=False)
    assert policy.settings_file() is None and policy.limits() is None
    system.write_text("[limits]\nnodes = 3\n")
    assert policy.limits().nodes == 3 and policy.limits().source == str(system)
    mine = tmp_path / "mine.ini"
    mine.write_text("[limits]\nnodes = 1\n")
    monkeypatch.setenv(policy.SETTINGS_VAR, str(mine))
    assert policy.limits().nodes == 1
    monkeypatch.setenv(policy.SETTINGS_VAR, str(tmp_path / "missing.ini"))
    assert policy.limits().nodes == 3          # a name that is not there: the system file


@pytest.mark.parametrize("nodes, per_node, partition, minutes, limit, words", [
    (3, 1, None, 1, "nodes", "3 nodes asked; this class allows at most 2"),
    (2, 3, None, 1, "procs_per_node", "3 processes per node asked; this class allows at most 2"),
    (1, 1, "gpu", 1, "partitions", "partition 'gpu' asked; this class allows only class, debug"),
    (1, 1, None, 6, "minutes", "a 6-minute job asked; this class allows at most 5 minutes"),
])
def test_each_cluster_limit_refuses_in_one_line(class_file, nodes, per_node, partition,
                                                 minutes, limit, words):
    with pytest.raises(policy.PolicyError) as e:
        policy.limits().check_cluster(nodes, per_node, partition, minutes)
    assert str(e.value) == f"{words} {refusal(limit, class_file)}"
    policy.limits().check_cluster(2, 2, "debug", 5)          # at the limits: allowed


def test_account_and_qos_are_the_classs(class_file):
    lim = policy.limits()
    lim.check_account(None, None)
    lim.check_account("physics101", "teaching")
    with pytest.raises(policy.PolicyError, match=r"^account 'mine' asked; this class allows "
                       r"only 'physics101' \(account in "):
        lim.check_account("mine", None)
    with pytest.raises(policy.PolicyError, match=r"^qos 'high' asked; this class allows only "
                       r"'teaching' \(qos in "):
        lim.check_account(None, "high")
    assert lim.slurm_options() == {"account": "physics101", "qos": "teaching"}


def test_local_runs_are_capped_by_the_servers_cores(class_file, monkeypatch):
    monkeypatch.setattr(policy.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("SLURM_CPUS_ON_NODE", raising=False)
    monkeypatch.delenv("CPU_LIMIT", raising=False)
    assert policy.server_cores() == 4
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "2")            # a Slurm job's CPUs
    assert policy.server_cores() == 2
    monkeypatch.setenv("CPU_LIMIT", "1.5")                   # JupyterHub's cpu_limit
    assert policy.server_cores() == 1
    with pytest.raises(policy.PolicyError) as e:
        policy.limits().check_local(2)
    assert str(e.value) == ("2 local processes asked; this class allows at most 1, the cores "
                            f"your server has {refusal('local_procs', class_file)}")
    policy.limits().check_local(1)


@pytest.mark.parametrize("line, key", [("nodes = two", "nodes"), ("minutes = 0", "minutes"),
                                       ("local_procs = many", "local_procs")])
def test_a_value_that_is_not_a_limit_names_file_and_key(tmp_path, line, key):
    path = tmp_path / "c.ini"
    path.write_text(f"[limits]\n{line}\n")
    with pytest.raises(ValueError, match=rf"{path}: \[limits\] {key} must be a whole number"):
        policy.limits(path)


def test_no_limits_section_limits_nothing(tmp_path):
    path = tmp_path / "c.ini"
    path.write_text("[class]\ncourse_id = x\n")
    lim = policy.limits(path)
    lim.check_cluster(64, 64, "anything", 10_000)
    lim.check_local(1000)


@pytest.fixture
def sbatch_parameters(monkeypatch):
    """Slurm offered; what submit_run hands submitit is recorded, and nothing is submitted."""
    seen = {}

    def record(self, fn, *args, **kwargs):
        seen.update(self.parameters)
        raise OSError("recorded, not submitted")
    monkeypatch.setattr(submit, "unavailable_reason", lambda: None)
    monkeypatch.setattr(submit.QueueExecutor, "submit", record)
    return seen


def test_submit_run_applies_the_class_before_sbatch(class_file, sbatch_parameters, tmp_path):
    from pplab.runtime.launcher import RunError
    with pytest.raises(RunError, match="recorded, not submitted"):
        submit.submit_run("1f1b", 4, 8, nodes=2, time_min=5, folder=str(tmp_path))
    assert sbatch_parameters["partition"] == "class"          # the class's default
    assert (sbatch_parameters["account"], sbatch_parameters["qos"]) == ("physics101", "teaching")
    for kw, limit in ((dict(nodes=4), "nodes"), (dict(nodes=1), "procs_per_node"),
                      (dict(nodes=2, partition="gpu"), "partitions"),
                      (dict(nodes=2, time_min=30), "minutes"),
                      (dict(nodes=2, time_min=5, account="other"), "account")):
        sbatch_parameters.clear()
        with pytest.raises(policy.PolicyError, match=rf"\({limit} in "):
            submit.submit_run("1f1b", 4, 8, folder=str(tmp_path), **kw)
        assert sbatch_parameters == {}                         # refused before sbatch


def test_without_a_class_submit_run_passes_what_it_is_given(sbatch_parameters, tmp_path,
                                                              monkeypatch):
    from pplab.runtime.launcher import RunError
    monkeypatch.delenv(policy.SETTINGS_VAR, raising=False)
    monkeypatch.setattr(policy, "SYSTEM_PATH", tmp_path / "absent.ini")
    with pytest.raises(RunError):
        submit.submit_run("1f1b", 8, 8, nodes=8, partition="big", account="a", qos="q",
                          time_min=600, folder=str(tmp_path))
    assert (sbatch_parameters["nodes"], sbatch_parameters["partition"],
            sbatch_parameters["account"], sbatch_parameters["qos"]) == (8, "big", "a", "q")


def test_run_panel_local_mode_stops_at_the_cores(class_file, monkeypatch):
    from pplab.canvases.runs import run_panel
    monkeypatch.setattr(policy, "server_cores", lambda: 2)
    p = run_panel("1f1b", P=4, M=8)
    assert p.last_message.startswith("4 local processes asked; this class allows at most 2")
    assert p.button.disabled
    p.controls["P"].value = 2
    assert p.last_message.startswith("ready") and not p.button.disabled


def test_run_panel_cluster_mode_keeps_to_the_class(class_file, monkeypatch):
    from pplab.canvases.runs import run_panel
    monkeypatch.setattr(cluster_mode, "unavailable_reason", lambda: None)
    monkeypatch.setattr(submit, "QueueExecutor", lambda **k: pytest.fail("nothing submitted"))
    p = run_panel("1f1b", P=4, M=8)
    cm = p.cluster
    assert cm.nodes.max == 2 and cm.partition.value == "class"
    cm.mode.value = "cluster"
    assert p.last_message.startswith("ready")                 # 2 nodes × 2 processes
    cm.nodes.value = 1
    assert p.last_message.startswith("4 processes per node asked; this class allows at most 2")
    assert p.button.disabled
    p.click()                                                  # disabled: nothing starts
    assert p.thread is None
    cm.nodes.value = 2
    cm.partition.value = "gpu"
    assert p.last_message == ("partition 'gpu' asked; this class allows only class, debug "
                              + refusal("partitions", class_file))
    cm.partition.value = "debug"
    assert not p.button.disabled and cm.minutes(3600) == 5     # the job's time: the class's


def test_pplab_run_refuses_past_the_class_in_one_line(class_file, monkeypatch, capsys):
    from pplab.cli import main
    monkeypatch.setattr(policy, "server_cores", lambda: 1)
    assert main(["run", "--schedule", "1f1b", "-P", "2", "-M", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pplab: error: 2 local processes asked; this class allows at most 1, the "
                   f"cores your server has {refusal('local_procs', class_file)}"]
    assert main(["run", "--schedule", "1f1b", "-P", "6", "-M", "6", "--nnodes", "3",
                 "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29400"]) == 2
    assert capsys.readouterr().err.startswith("pplab: error: 3 nodes asked; this class "
                                              "allows at most 2")


#: a step of a 2-node Slurm job inside the class's limits (what srun gives it)
JOB_ENV = {"SLURM_JOB_ID": "812", "SLURM_JOB_PARTITION": "debug",
           "SLURM_JOB_ACCOUNT": "physics101", "SLURM_JOB_QOS": "teaching",
           "SLURM_JOB_START_TIME": "1700000000", "SLURM_JOB_END_TIME": "1700000300"}


def test_slurm_job_is_read_from_its_environment():
    job = policy.slurm_job(JOB_ENV)
    assert job == policy.SlurmJob(partition="debug", account="physics101", qos="teaching",
                                  minutes=5)
    assert policy.slurm_job({}) is None                          # outside Slurm
    # Slurm before 23.02 has no SLURM_JOB_END_TIME: squeue's %l is asked instead
    asked = []
    job = policy.slurm_job({"SLURM_JOB_ID": "7"}, ask=lambda j: asked.append(j) or "1:30:00")
    assert asked == ["7"] and job.minutes == 90
    assert policy.slurm_job({"SLURM_JOB_ID": "7"}, ask=lambda j: "").minutes == 0


@pytest.mark.parametrize("text, minutes", [("10:00", 10), ("0:30", 1), ("1:30:00", 90),
                                           ("1-00:00:00", 1440), ("5", 5),
                                           ("UNLIMITED", 0), ("", 0)])
def test_slurms_time_limit_text_in_minutes(text, minutes):
    assert policy.slurm_minutes(text) == minutes


@pytest.mark.parametrize("change, P, timeout, limit, words", [
    ({}, 6, 120, "procs_per_node", "3 processes per node asked; this class allows at most 2"),
    ({"SLURM_JOB_PARTITION": "gpu"}, 4, 120, "partitions",
     "partition 'gpu' asked; this class allows only class, debug"),
    ({"SLURM_JOB_ACCOUNT": "mine"}, 4, 120, "account",
     "account 'mine' asked; this class allows only 'physics101'"),
    ({"SLURM_JOB_QOS": "high"}, 4, 120, "qos",
     "qos 'high' asked; this class allows only 'teaching'"),
    ({"SLURM_JOB_END_TIME": "1700003600"}, 4, 120, "minutes",
     "a 60-minute job asked; this class allows at most 5 minutes"),
    ({}, 4, 301, "minutes", "a 6-minute job asked; this class allows at most 5 minutes"),
])
def test_pplab_run_under_srun_keeps_every_limit_of_the_panel(class_file, change, P, timeout,
                                                             limit, words):
    """`srun -N2 pplab run`: processes per node, the job's partition, account, QOS and time
    limit, and the run's own --timeout, against the class's."""
    lim, job = policy.limits(), policy.slurm_job(JOB_ENV | change)
    with pytest.raises(policy.PolicyError) as e:
        lim.check_run(P, 2, timeout, job)
    assert str(e.value) == f"{words} {refusal(limit, class_file)}"


def test_pplab_run_within_the_class_is_allowed(class_file, monkeypatch):
    lim = policy.limits()
    lim.check_run(4, 2, 300, policy.slurm_job(JOB_ENV))          # every limit met exactly
    lim.check_run(4, 2, 120, None)                               # by hand, no Slurm job
    with pytest.raises(policy.PolicyError, match=r"^3 nodes asked; this class allows at most "
                       r"2 \(nodes in "):
        lim.check_run(3, 3, 120, None)
    # one node inside a long Slurm job (a student's JupyterLab on the hub's partition) is a
    # local run: only the server's cores count
    monkeypatch.setattr(policy, "server_cores", lambda: 2)
    long_job = policy.slurm_job(JOB_ENV | {"SLURM_JOB_PARTITION": "hub",
                                           "SLURM_JOB_END_TIME": "1700014400"})
    lim.check_run(2, 1, 120, long_job)
    with pytest.raises(policy.PolicyError, match=r"\(local_procs in "):
        lim.check_run(3, 1, 120, long_job)


def test_a_job_charged_elsewhere_is_refused_only_where_the_class_says(tmp_path):
    path = tmp_path / "c.ini"
    path.write_text("[limits]\nnodes = 2\n")                     # no account, no QOS
    policy.limits(path).check_run(2, 2, 60, policy.slurm_job(
        JOB_ENV | {"SLURM_JOB_ACCOUNT": "any", "SLURM_JOB_QOS": "normal"}))


def test_pplab_run_under_srun_refuses_the_jobs_partition_in_one_line(class_file, monkeypatch,
                                                                       capsys):
    """The whole command, as a student types it in a 2-node allocation on another
    partition: refused before any process starts."""
    from pplab.cli import main
    for name, value in (JOB_ENV | {"SLURM_JOB_PARTITION": "gpu"}).items():
        monkeypatch.setenv(name, value)
    assert main(["run", "--schedule", "1f1b", "-P", "4", "-M", "4", "--nnodes", "2",
                 "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29400"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "pplab: error: partition 'gpu' asked; this class allows only class, debug "
        + refusal("partitions", class_file)]
    monkeypatch.setenv("SLURM_JOB_PARTITION", "debug")
    assert main(["run", "--schedule", "1f1b", "-P", "4", "-M", "4", "--nnodes", "2",
                 "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29400",
                 "--timeout", "600"]) == 2
    assert capsys.readouterr().err.strip() == (
        "pplab: error: a 10-minute job asked; this class allows at most 5 minutes "
        + refusal("minutes", class_file))


@pytest.mark.parametrize("key, value, words", [
    ("server_memory", "4", "a number with K, M, G or T"),
    ("server_cpus", "0", "a number of CPUs above 0"),
    ("server_processes", "many", "a whole number of tasks, at least 1")])
def test_a_servers_limit_that_is_not_one_names_file_and_key(tmp_path, key, value, words):
    """Each JupyterLab's limits on a shared server (pplab/classroom/spawner.py) are read
    when the settings are: a wrong one stops the hub's start with one line."""
    from pplab.classroom.settings import KIT, Settings, render
    path = tmp_path / "classroom.ini"
    path.write_text(render((KIT / "classroom.ini").read_text(), {key: value}))
    with pytest.raises(ValueError) as e:
        Settings.read(path)
    assert str(e.value) == f"{path}: [hub] {key} must be {words}, got {value!r}"
    good = {"server_memory": "512M", "server_cpus": "0.5", "server_processes": "2"}[key]
    path.write_text(render((KIT / "classroom.ini").read_text(), {key: good}))
    assert getattr(Settings.read(path), key) == good
