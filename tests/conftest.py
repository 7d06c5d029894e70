"""Test tiers, given by folder. ``make test-fast`` runs ``pytest -m "not slow" -n auto`` (the
edit loop); ``make test`` runs everything, as CI does.

| folder | what | markers every test there gets |
|---|---|---|
| core/ | IR, generators, registry, simulator, memory model, planner, search, CLI | — |
| draw/ | matplotlib figures and scene panels | — |
| canvases/ | the widgets, rendered headless | — |
| runtime/ | real torch.distributed processes (torchrun, gloo) | torchrun, slow |
| cluster/ | hosts in network namespaces and a real Slurm | cluster |
| grading/ | graders, the release, sandboxed class grading | grading |
| browser/ | JupyterLab and JupyterLite in a real Chromium | browser, slow |
| notebooks/ | lessons: their text, questions and executed cells | notebook |
| classroom/ | the class kit, its policy, a real JupyterHub term end to end | classroom |

The grading files whose every test grades through the real sandbox are slow too (a fresh
kernel per notebook). A test elsewhere that starts torchrun or executes notebooks is named
below, so that ``-m "not torchrun"`` means what it says; a single test that takes over
half a second on 2 cores carries ``@pytest.mark.slow``.
Shared helpers (a browser driver, network namespaces, the Slurm cluster, answer keys for
tests) live in ``helpers/``, on the import path of every test.
"""
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))

FOLDER_MARKERS = {
    "core": (), "draw": (), "canvases": (),
    "runtime": ("torchrun", "slow"),
    "cluster": ("cluster",),
    "grading": ("grading",),
    "browser": ("browser", "slow"),
    "notebooks": ("notebook",),
    "classroom": ("classroom",),
}
#: files outside runtime/ whose every test starts torchrun or executes notebooks (all slow)
FILE_MARKERS = {
    "test_run_widgets.py": ("torchrun", "slow"),
    "test_lessons_runs.py": ("torchrun", "slow"),
    "test_exercises_pipeline.py": ("torchrun", "slow"),
    "test_cluster_hosts.py": ("torchrun", "slow"),     # two hosts run pplab run
    "test_cluster_slurm.py": ("torchrun", "slow"),     # srun pplab run on a real Slurm
    "test_notebooks.py": ("slow",),
    "test_runtime_head_of_line.py": ("torchrun", "slow"),   # two real gloo jobs
    "test_exercises.py": ("notebook", "slow"),
    "test_journey_local.py": ("browser", "grading", "slow"),   # a real hub, a term in Chromium
    "test_journey_slurm.py": ("browser", "cluster", "torchrun", "slow"),
    # every test grades through the real bubblewrap sandbox (a fresh kernel per notebook)
    "test_fairness.py": ("slow",),
    "test_grading_sandbox.py": ("slow",),
    "test_grade_paths.py": ("slow",),
    "test_attack_paths_seeds_feedback.py": ("slow",),
}
#: single tests elsewhere that start torchrun, directly or through what they grade
TORCHRUN_TESTS = ("test_torch_csv.py::test_torch_runtime_runs_pplab_csv",
                  "test_grading.py::test_pplab_grade_runs_the_instructor_workflow")
#: single tests of the fast folders that took over a second in make test-fast on 2 cores
#: (benchmarks/bench_tests.py --fast lists the slowest): megatron-core's own config check,
#: torch's schedule classes, the whole import graph, every documented command
SLOW_TESTS = ("test_plan_export.py::test_megatron_core_refuses_what_it_cannot_run",
              "test_cli_conventions.py::test_torch_schedule_class_names_are_aliases",
              "test_layers.py::test_import_graph_has_no_circle",
              "test_registry.py::test_torch_classes_exist_in_torch",
              "test_docs_classroom.py::test_every_command_shown_is_tested_or_checked",
              "test_suite_stops_cleanly.py::test_sigterm_runs_every_cleanup")


def _interrupt_on_term(signum, frame):
    """A run stopped by SIGTERM (CI's time limit, a user's kill) tears down as Ctrl-C does:
    every fixture's cleanup runs and subprocess.run kills its child, so no hub, cluster,
    browser, job or temp folder outlives the run. Once: a second SIGTERM (the kernel sends a
    parent-death signal once per thread of a dying parent, tools/slow_tier.py) must not cut
    that teardown short."""
    signal.signal(signal.SIGTERM, _already_stopping)     # not SIG_IGN: children inherit that
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _already_stopping(signum, frame):
    """A later SIGTERM while the first one's teardown runs: nothing more to do."""


def pytest_configure(config):
    signal.signal(signal.SIGTERM, _interrupt_on_term)
    for name, text in (("slow", "over half a second on 2 cores, or real processes; not in "
                                 "make test-fast"),
                       ("torchrun", "launches real torch.distributed processes"),
                       ("notebook", "reads or executes the lessons"),
                       ("browser", "drives JupyterLab in a real Chromium"),
                       ("cluster", "hosts in network namespaces, Slurm"),
                       ("grading", "graders and class grading"),
                       ("classroom", "the class kit: JupyterHub, nbgrader's exchange, the "
                                     "policy")):
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_ignore_collect(collection_path, config):
    """Under ``-m "not slow"`` (make test-fast) a folder or file whose every test is slow
    would only be deselected: not importing it saves each worker the seconds its imports
    take (torch's distributed stack, Playwright, nbclient)."""
    if config.getoption("markexpr") != "not slow":
        return None
    here = Path(__file__).parent
    if collection_path.parent == here:
        marks = FOLDER_MARKERS.get(collection_path.name, ())
    else:
        marks = FILE_MARKERS.get(collection_path.name, ())
    return True if "slow" in marks else None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        try:
            folder = item.path.relative_to(here).parts[0]
        except ValueError:
            folder = ""
        marks = FOLDER_MARKERS.get(folder, ()) + FILE_MARKERS.get(item.path.name, ())
        if item.nodeid.split("/")[-1].startswith(TORCHRUN_TESTS):
            marks += ("torchrun", "slow")
        if item.nodeid.split("/")[-1].startswith(SLOW_TESTS):
            marks += ("slow",)
        for name in dict.fromkeys(marks):
            item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(scope="session")
def slurm():
    """One real Slurm for the whole run (helpers/slurm_cluster.py: a controller and two nodes
    of 4 CPUs in network namespaces), started by the first test that asks for it; every test
    leaves it as found (``SlurmCluster.restore``). Closed at the end, nothing left behind."""
    import slurm_cluster
    reason = slurm_cluster.skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = slurm_cluster.SlurmCluster(cpus=4)
    try:
        yield cluster
    finally:
        cluster.close()
        assert not cluster.lan.left(), f"namespaces left behind: {cluster.lan.left()}"
        assert all(p.poll() is not None for p in cluster.procs), "a Slurm daemon outlived it"
        assert not os.path.exists(cluster.dir)


@pytest.fixture(autouse=True)
def _remove_kept_run_folders(request, monkeypatch, tmp_path_factory):
    """A launch that fails keeps its folder, so the user can read the logs its error names
    (``pplab.runtime.launcher``); a test that starts torchrun gets a temporary directory of
    its own (``tempfile`` and ``TMPDIR`` for what it spawns), removed afterwards, so the
    suite leaves nothing behind and never removes a folder another process is using (a
    second pytest worker, another run on the machine)."""
    if request.node.get_closest_marker("torchrun") is None:
        yield
        return
    tmp_path_factory.getbasetemp()      # pytest's own base, made before TMPDIR moves: it
    own = tempfile.mkdtemp(prefix="pplab-test-")  # must outlive this test's folder
    monkeypatch.setattr(tempfile, "tempdir", own)
    monkeypatch.setenv("TMPDIR", own)
    try:
        yield
    finally:
        shutil.rmtree(own, ignore_errors=True)
