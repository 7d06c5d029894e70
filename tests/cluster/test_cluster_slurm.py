"""A real Slurm (tests/helpers/slurm_cluster.py): a controller and two compute nodes, each in
its own network namespace, one for the session (tests/conftest.py). Through it: ``srun pplab
run`` without node flags, the example batch script with ``sbatch``, submission from Python
through submitit as the run panel's cluster mode does it (a cancelled and a failed job
too), ``pplab grade --slurm``, a P that does not divide, and a node killed mid-job. Every
job's gradients match one process and its result says nnodes 2; no job, process or folder
is left, and every test leaves the cluster as it found it."""
import json
import os
import re
import sys
import time

import pytest

from netns_lan import Lan
from slurm_cluster import NODES, command_name

pytestmark = pytest.mark.slow
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HELPERS = os.path.join(os.path.dirname(HERE), "helpers")
HOSTS = [(0, 0, "10.77.0.1"), (1, 0, "10.77.0.1"), (2, 1, "10.77.0.2"), (3, 1, "10.77.0.2")]


@pytest.fixture
def env(slurm, tmp_path):
    """The session's cluster (tests/conftest.py) with its client environment: ``pplab``
    (this venv) on PATH, and a temp folder of this test's own (``env["TMPDIR"]``), which the
    nodes share. Afterwards the cluster is as the test found it, whatever the test did."""
    e = slurm.env
    e["TMPDIR"] = str(tmp_path)
    e["PATH"] = os.path.dirname(sys.executable) + os.pathsep + e["PATH"]
    e["PPLAB_VENV"] = sys.prefix
    yield e
    slurm.restore()


def _assert_clean(slurm, nodes=NODES) -> None:
    """The queue is empty and the nodes run nothing but slurmd."""
    assert slurm.wait_queue_empty(60) == [], slurm.queue()
    deadline = time.monotonic() + 60      # a job's processes end within KillWait (5 s)
    while True:
        extra = {n: [name for name in map(command_name, Lan.pids(slurm.lan.ns[n]))
                     if name != "slurmd"] for n in nodes}
        if not any(extra.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert not any(extra.values()), f"processes left on the nodes: {extra}"


def _results(stdout: str) -> list[dict]:
    return [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]


def _check_two_node_result(d: dict) -> None:
    assert d["nnodes"] == 2 and d["grad_max_rel_error"] < 1e-5
    assert [(p["rank"], p["node_rank"], p["host"]) for p in d["placement"]] == HOSTS
    assert [p["node"] for p in d["placement"]] == ["pn0", "pn0", "pn1", "pn1"]


def test_srun_without_node_flags_is_one_job_across_both_nodes(slurm, env):
    # one output file per task: srun forwards long lines in 1 KB pieces, and two tasks'
    # pieces can interleave in one stream
    out = os.path.join(slurm.dir, "jobs", "srun-%t.json")
    t0 = time.monotonic()
    r = slurm.run(["srun", "-N2", f"--output={out}", "pplab", "run", "--schedule", "1f1b",
                   "-P", "4", "-M", "8", "--json"], timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    d0, d1 = (_results(open(out.replace("%t", t)).read())[0] for t in "01")  # each node ...
    assert d0 == d1                              # ... and it is the same one
    _check_two_node_result(d0)
    print(f"\nsrun: gradient error {d0['grad_max_rel_error']:.2e}, "
          f"{time.monotonic() - t0:.1f} s from srun to result")
    _assert_clean(slurm)
    assert [n for n in os.listdir(env["TMPDIR"]) if not n.startswith("torchinductor_")] == []


def test_a_p_that_does_not_divide_over_the_nodes_stops_with_one_line(slurm, env):
    r = slurm.run(["srun", "-N2", "pplab", "run", "--schedule", "1f1b", "-P", "3", "-M", "8"],
                  timeout=120, env=env)
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("pplab:")]
    assert ours == ["pplab: error: P=3 ranks cannot be split evenly over 2 nodes; use a P that "
                    "is a multiple of 2"] * 2, r.stderr
    assert "exit code 2" in r.stderr
    _assert_clean(slurm)


def test_example_batch_script_runs_with_sbatch(slurm, env):
    out = os.path.join(slurm.dir, "jobs", "cpu-%j.out")
    t0 = time.monotonic()
    r = slurm.run(["sbatch", "--parsable", f"--output={out}",
                   os.path.join(ROOT, "examples", "slurm", "cpu.sbatch")], timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    job = r.stdout.strip().split(";")[0]
    assert slurm.wait_job(job, timeout=240) == "COMPLETED"
    took = time.monotonic() - t0
    with open(out.replace("%j", job)) as f:
        text = f.read()
    # the script's text report, each line labelled with the node (task) that printed it
    report = {t: [ln[3:] for ln in text.splitlines() if ln.startswith(f"{t}: ")
                  and ("gradient" in ln or "nodes:" in ln or ln[3:].startswith("rank "))]
              for t in "01"}
    assert report["0"] == report["1"] and len(report["0"]) == 6, text   # the same on both
    assert ("2 nodes: node 0 pn0 10.77.0.1 ranks 0–1, node 1 pn1 10.77.0.2 ranks 2–3"
            in report["0"]), text
    err = float(re.search(r"max relative gradient error (\S+)", text).group(1))
    assert err < 1e-5
    print(f"\nsbatch: gradient error {err:.2e}, {took:.1f} s from submit to result")
    _assert_clean(slurm)


def _driver(slurm, env, case: str, timeout: float = 300) -> dict:
    folder = os.path.join(slurm.dir, "jobs", case)
    r = slurm.run([sys.executable, os.path.join(HELPERS, "cluster_submit_driver.py"), case, folder],
                  timeout=timeout, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cancelled_and_failed_jobs_say_why(slurm, env):
    c = _driver(slurm, env, "cancelled")
    assert c["cause"] and "was cancelled (scancel)" in c["cause"], c
    f = _driver(slurm, env, "failed")
    assert f["cause"] and "node 1:" in f["cause"] and "rank 3 failed" in f["cause"], f
    assert "injected fault" in f["cause"]
    _assert_clean(slurm)


def test_run_panel_cluster_mode_submits_through_submitit_and_draws(slurm, env):
    d = _driver(slurm, env, "panel")
    assert d["errors"] == [] and d["figure"] and d["image_bytes"] > 1000, d
    assert d["nnodes"] == 2 and d["grad"] < 1e-5
    assert [(p["rank"], p["node_rank"], p["host"]) for p in d["placement"]] == HOSTS
    assert not d["folder_left"]
    print(f"\nsubmitit (the run panel): gradient error {d['grad']:.2e}, "
          f"{d['seconds']:.1f} s from submit to result")
    assert "2 nodes: node 0 pn0 10.77.0.1 ranks 0–1, node 1 pn1 10.77.0.2 ranks 2–3" in \
        d["message"]
    assert any(": RUNNING on pn[0-1]" in ln for ln in d["progress"]), d["progress"]
    # the panel polls the job's progress file, so a fast step may be overwritten unseen
    assert any(re.search(r"step [12]/2 loss \d", ln) for ln in d["progress"]), d["progress"]
    _assert_clean(slurm)


def test_pplab_grade_fans_a_class_out_over_slurm(slurm, env, tmp_path):
    """One Slurm job per submission, each graded in its own sandbox on a node."""
    import shutil
    from pplab.grading.untrusted.sandbox import unavailable
    if unavailable():
        pytest.skip(unavailable())
    name = "01_bubble_and_1f1b"
    sub, source = tmp_path / "sub", tmp_path / "source"
    shutil.copytree(os.path.join(ROOT, "solutions", name), source / name)
    for student, tree in (("solver", "solutions"), ("blank", "exercises")):
        shutil.copytree(os.path.join(ROOT, tree, name), sub / student / name)
    out = tmp_path / "grades.csv"
    r = slurm.run(["pplab", "grade", str(sub), "--out", str(out), "--source", str(source),
                   "--slurm", "--seed", "5", "--timeout", "300"], timeout=420, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "on Slurm" in r.stdout and "2/2" in r.stdout
    rows = [ln.split(",") for ln in out.read_text().splitlines()[1:]]
    got = {s: sum(float(x) for st, a, t, x, m in rows if st == s) for s in ("solver", "blank")}
    assert got == {"solver": 10, "blank": 0}      # each job's grades reach their student
    _assert_clean(slurm)


def test_a_node_killed_mid_job_ends_the_job_and_is_named(slurm, env):
    # node pn1 loses power; env's restore brings its slurmd back for the next test
    p = slurm.popen(["srun", "-N2", "pplab", "run", "--schedule", "1f1b", "-P", "4", "-M", "8",
                     "--steps", "8", "--emulate", "--tf", "0.1", "--tb", "0.2",
                     "--timeout", "90"], env=env)
    tmp, deadline = env["TMPDIR"], time.monotonic() + 240
    while not any("step 1/" in open(os.path.join(tmp, d, "progress.log")).read()
                  for d in os.listdir(tmp) if os.path.exists(os.path.join(tmp, d, "progress.log"))):
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.3)
    Lan.kill_all(slurm.lan.ns["pn1"])          # the node loses power: slurmd and the job
    t_kill = time.monotonic()
    _, err = p.communicate(timeout=240)
    assert p.returncode != 0
    assert time.monotonic() - t_kill < 180      # a limit only a hang reaches; the line below
                                                # tells a lost node from the job's timeout
    named = [ln for ln in err.splitlines() if ln.startswith("pplab: run failed")]
    assert named and "node 1 (pn1, 10.77.0.2; ranks 2–3) went away mid-run" in named[0], err
    _assert_clean(slurm, nodes=("pn0",))
    assert Lan.pids(slurm.lan.ns["pn1"]) == []
