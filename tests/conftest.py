"""Test tiers. ``make test-fast`` runs ``pytest -m "not slow"`` (pure core and drawing, for
the edit loop); ``make test`` runs everything, as CI does.

Whole files are tiered by what they start, so a new test in them is tiered without anyone
remembering to: real torchrun jobs, executed notebooks, a browser. Single slow tests in
other files (full-range sweeps) carry ``@pytest.mark.slow`` themselves.
"""
import pytest

# file-name prefix -> the marker its tests get (each of these is also slow)
FILE_TIERS = {
    "test_runtime": "torchrun",
    "test_lessons_runs": "torchrun",
    "test_run_widgets": "torchrun",
    "test_exercises_pipeline": "torchrun",
    "test_memory_measured": "torchrun",
    "test_notebooks": "notebook",
    "test_exercises.py": "notebook",
    "test_browser": "browser",
    "test_cluster_hosts": "torchrun",     # two hosts in network namespaces run pplab run
    "test_cluster_slurm": "torchrun",     # srun pplab run on a real Slurm
}
#: single tests in other files that start torchrun, directly or through what they grade
TORCHRUN_TESTS = ("test_torch_csv.py::test_torch_runtime_runs_pplab_csv",
                  "test_grading.py::test_pplab_grade_runs_the_instructor_workflow")


def pytest_configure(config):
    for name, text in (("slow", "takes more than a few seconds; left out by make test-fast"),
                       ("torchrun", "launches real torch.distributed processes"),
                       ("notebook", "executes notebooks"),
                       ("browser", "drives JupyterLab in a real Chromium")):
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        filename = item.path.name
        for prefix, marker in FILE_TIERS.items():
            if filename.startswith(prefix):
                item.add_marker(getattr(pytest.mark, marker))
                item.add_marker(pytest.mark.slow)
        if item.nodeid.split("/")[-1].startswith(TORCHRUN_TESTS):
            item.add_marker(pytest.mark.torchrun)
            item.add_marker(pytest.mark.slow)
