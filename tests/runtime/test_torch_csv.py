"""pplab schedules in torch.distributed.pipelining's CSV format: the text round-trips, torch's
``_Action.from_str`` reads every cell, and torch's own loader and runtime, run on gloo, train
with exactly the single-process gradients. DualPipe's two model copies have no spelling in
torch's one-chain format: ``torch_format.to_csv`` refuses it, naming why."""
import json
import os
import subprocess
import sys

import pytest

from pplab.ir import Schedule
from pplab.registry import NAMES, make_schedule
from pplab.torch_format import from_csv, to_csv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_CAN = [n for n in NAMES if n != "dualpipe"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fmt", ["compute_only", "compute_comms"])
def test_csv_round_trip_and_torch_parses_every_cell(name, fmt):
    from torch.distributed.pipelining.schedules import _Action
    s = make_schedule(name, 4, 8)
    if name not in TORCH_CAN:
        with pytest.raises(ValueError, match="one chain of stages"):
            to_csv(s, fmt)
        return
    text = to_csv(s, fmt)
    assert len(text.splitlines()) == s.P
    for row in text.splitlines():
        for cell in row.split(","):
            assert str(_Action.from_str(cell)) == cell
    back = from_csv(text, name=s.name)
    assert (back.ranks, back.stage_to_rank, back.M, back.V) == (s.ranks, s.stage_to_rank, s.M,
                                                                 s.V)


def test_dict_round_trip():
    for name in NAMES:
        s = make_schedule(name, 4, 8)
        assert Schedule.from_dict(json.loads(json.dumps(s.to_dict()))) == s


@pytest.mark.slow
def test_torch_runtime_runs_pplab_csv_with_single_process_gradients(tmp_path):
    """At P = 4, where every schedule torch can spell has a rank with peers on both sides."""
    from pplab.runtime.launcher import _free_port
    P, M = 4, 8
    cases = [{"name": n, "fmt": fmt, "csv": to_csv(make_schedule(n, P, M), fmt)}
             for n in TORCH_CAN for fmt in ("compute_only", "compute_comms")]
    job = {"M": M, "cases": cases, "out": str(tmp_path / "out.json")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={P}",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}",
           f"--log-dir={tmp_path / 'logs'}",         # not a torchelastic_* folder in /tmp
           os.path.join(ROOT, "tests", "helpers", "torch_csv_worker.py"), str(tmp_path / "job.json")]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                         start_new_session=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    results = json.loads((tmp_path / "out.json").read_text())
    assert len(results) == len(cases) == 2 * len(TORCH_CAN)
    for key, r in results.items():
        print(P, key, r)
    bad = {k: r for k, r in results.items() if r.get("grad_err", 1.0) > 1e-5}
    assert not bad, bad
