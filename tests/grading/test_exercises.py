"""Exercise graders catch typical mistakes with a useful message; the release is nbgrader's
output for the current sources; nbgrader's JupyterLab extension is enabled for `make lab`."""
import subprocess
import sys
from pathlib import Path

import pytest

from pplab.exercises import (check_bubble_formulas, check_inflight,
                             check_one_f_one_b_rank, check_text_schedule)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# ---- the graders catch typical mistakes, with a useful message --------------------------------
def test_graders_reject_wrong_answers():
    with pytest.raises(AssertionError, match="bubble_of_total"):
        check_bubble_formulas(lambda P, M: (P - 1) / M, lambda P, M: (P - 1) / M)
    with pytest.raises(AssertionError, match="bubble_of_ideal"):
        check_bubble_formulas(lambda P, M: (P - 1) / (M + P - 1), lambda P, M: (P - 1) / (M * P))

    def no_min(P, M, r):                  # forgets min(): breaks when M < P
        w = P - r - 1
        return ([f"{r}F{i}" for i in range(w)]
                + [x for i in range(M - w) for x in (f"{r}F{w + i}", f"{r}B{i}")]
                + [f"{r}B{i}" for i in range(M - w, M)])
    with pytest.raises(AssertionError, match="warm-up"):
        check_one_f_one_b_rank(no_min)

    def ignores_w(actions):               # only B frees: wrong for zero-bubble schedules
        alive, peak = set(), 0
        for a in actions:
            if "F" in a:
                alive.add(a.replace("F", ""))
            elif "B" in a:
                alive.discard(a.replace("B", ""))
            peak = max(peak, len(alive))
        return peak
    with pytest.raises(AssertionError, match="zb-h1"):
        check_inflight(ignores_w)

    def stub(*a):
        raise NotImplementedError("your code here")
    with pytest.raises(AssertionError, match="not implemented yet"):
        check_bubble_formulas(stub, stub)

    naive = ["0F0 0B0 0F1 0B1 0F2 0B2 0F3 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3",
             "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"]
    with pytest.raises(AssertionError, match="target"):
        check_text_schedule(naive, P=3, M=4, max_bubble_of_ideal=0.5)
    assert check_text_schedule(naive, P=3, M=4)
    deadlock = ["0F0 0B0 0F1 0B1", "1B0 1F0 1F1 1B1"]
    with pytest.raises(AssertionError, match="does not validate"):
        check_text_schedule(deadlock, P=2, M=2)
    with pytest.raises(AssertionError, match="does not validate"):
        check_text_schedule(["0F0 0F1 0B0", "1F0 1B0 1F1 1B1"], P=2, M=2)


@pytest.mark.slow
def test_release_is_not_stale_against_its_source():
    """exercises/ must be exactly what nbgrader's generate_assignment makes from solutions/."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_exercises.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_release_check_fails_on_a_stale_release(tmp_path):
    from pplab.grading.course import release_changes
    import shutil
    shutil.copytree(ROOT / "solutions" / "08_derivations", tmp_path / "src" / "08_derivations")
    shutil.copytree(ROOT / "exercises" / "08_derivations", tmp_path / "rel" / "08_derivations")
    assert release_changes(tmp_path / "src", tmp_path / "rel", write=False) == []
    nb = tmp_path / "src" / "08_derivations" / "08_derivations.ipynb"
    nb.write_text(nb.read_text().replace("never showed", "did not show"))
    stale = release_changes(tmp_path / "src", tmp_path / "rel", write=False)
    assert [p.name for p in stale] == ["08_derivations.ipynb"]


@pytest.mark.slow
def test_nbgrader_lab_extension_is_enabled():
    """`make lab` opens JupyterLab from this environment: nbgrader's lab and server
    extensions must be listed as enabled there."""
    lab = subprocess.run([str(BIN / "jupyter"), "labextension", "list"],
                         capture_output=True, text=True)
    assert any("@jupyter/nbgrader" in ln and "enabled" in ln
               for ln in (lab.stdout + lab.stderr).splitlines())
    server = subprocess.run([str(BIN / "jupyter"), "server", "extension", "list"],
                            capture_output=True, text=True)
    text = server.stdout + server.stderr
    assert "nbgrader.server_extensions.formgrader" in text and "enabled" in text
