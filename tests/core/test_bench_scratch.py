"""Benchmarks run inside one scratch folder that goes away, whatever they or torch make."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from scratch import scratch_tmpdir  # noqa: E402


def test_scratch_folder_catches_temp_files_and_is_removed(monkeypatch):
    monkeypatch.setenv("TMPDIR", tempfile.gettempdir())
    before = os.environ["TMPDIR"]
    with scratch_tmpdir() as d:
        made = tempfile.mkdtemp(prefix="torchelastic_")      # what torchrun does unasked
        assert Path(made).parent == Path(d) and os.environ["TMPDIR"] == d
    assert not Path(d).exists() and os.environ["TMPDIR"] == before
    assert tempfile.gettempdir() == before
