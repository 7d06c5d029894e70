"""`pplab simulate` as a user types it: JSON keys, text output, bad arguments, trace export."""
import json
import subprocess
import sys

import pytest

from pplab.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "pplab.cli", *args], capture_output=True,
                          text=True, timeout=60)


def test_json_output(capsys):
    assert main(["simulate", "--schedule", "1f1b", "-P", "4", "-M", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("schedule", "P", "M", "V", "makespan", "bubble_fraction", "bubble_ratio",
                "peak_inflight", "ranks", "events"):
        assert key in d
    assert d["bubble_fraction"] == pytest.approx(3 / 11) and d["peak_inflight"] == [4, 3, 2, 1]
    assert d["ranks"][3][:2] == ["3F0", "3B0"]
    assert set(d["events"][0]) == {"rank", "action", "start", "end"}
    assert len(d["events"]) == 4 * 16


def test_text_output(capsys):
    assert main(["simulate", "-s", "interleaved", "-P", "2", "-M", "4", "-V", "2"]) == 0
    out = capsys.readouterr().out
    assert "rank 0:" in out and "bubble" in out and "of ideal" in out


@pytest.mark.parametrize("args,msg", [
    (["simulate", "-s", "dualpipe", "-P", "3", "-M", "8"], "even number of ranks"),
    (["simulate", "-s", "1f1b", "-P", "x", "-M", "2"], "invalid int value"),
    (["simulate", "-P", "4"], "give --schedule NAME or --file F"),
    (["simulate", "-s", "1f1b", "-P", "4", "-M", "8", "--tw", "5"], "tw"),
    (["simulate", "-s", "magic", "-P", "4", "-M", "8"], "unknown schedule"),
    ([], "choose a command"),
])
def test_bad_arguments_exit_2_one_line(args, msg):
    r = run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0] and "Traceback" not in r.stderr


def test_trace_export(tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["simulate", "-s", "zbv", "-P", "2", "-M", "4", "--tw", "1",
                 "--trace", str(path), "--json"]) == 0
    trace = json.loads(path.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert len(names) == 2 and len(xs) == len(json.loads(capsys.readouterr().out)["events"])
    assert {e["args"]["kind"] for e in xs} == {"F", "I", "W"}


def test_core_imports_without_torch_or_matplotlib():
    code = "import sys, pplab, pplab.cli, pplab.cli.simulate; " \
           "print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]


def test_plot_writes_png(tmp_path, capsys):
    path = tmp_path / "tl.png"
    assert main(["simulate", "-s", "dualpipe", "-P", "4", "-M", "8", "--tw", "1", "--plot",
                 str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_closed_pipe_is_not_a_traceback():
    """`pplab simulate ... --json | head -c 100` must not print a BrokenPipeError traceback."""
    r = subprocess.run(f"{sys.executable} -m pplab.cli simulate -s 1f1b -P 8 -M 64 --json "
                       "| head -c 100 > /dev/null", shell=True, capture_output=True, text=True,
                       timeout=60)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_cost_flags_are_declared_once():
    """Each subcommand takes its cost flags from pplab.cli.COST_FLAGS, never its own."""
    import pathlib
    import re
    for path in pathlib.Path(__file__).resolve().parents[2].glob("pplab/cli/*.py"):
        assert not re.search(r'add_argument\("--(tf|tb|tw|tfb|fixed)"', path.read_text()), path
