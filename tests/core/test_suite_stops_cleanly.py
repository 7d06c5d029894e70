"""A test run killed with SIGTERM (CI's limit, a user's kill) still runs every cleanup:
tests/conftest.py turns the signal into Ctrl-C's KeyboardInterrupt, so fixtures tear down
and the children subprocess.run started are killed."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import subprocess, sys, time
from pathlib import Path
import pytest

@pytest.fixture
def held_folder(tmp_path_factory):
    folder = Path({marks!r}) / "held"
    folder.mkdir()
    yield folder
    folder.rmdir()

def test_held(held_folder):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    (held_folder.parent / "child.pid").write_text(str(child.pid))
    try:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(300)"])
    finally:
        child.kill()
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_sigterm_runs_every_cleanup(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (suite / "helpers").mkdir()
    (suite / "test_inner.py").write_text(INNER.format(marks=str(marks)))
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:randomly", str(suite / "test_inner.py")], cwd=suite,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120          # only a broken product waits this long
        while not (marks / "child.pid").exists():
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read()
            time.sleep(0.1)
        child = int((marks / "child.pid").read_text())
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert not (marks / "held").exists(), out       # the fixture's teardown ran
    assert not _alive(child), out                   # the test's own finally ran
    assert "KeyboardInterrupt" in out or "stopped by signal" in out, out
