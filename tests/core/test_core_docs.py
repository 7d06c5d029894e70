"""The core's shared types say what they are: every public name in ir, timeline.py and inflight.py has
a docstring, and ``chunk_fraction`` answers only for a stage the schedule has."""
import ast
from pathlib import Path

import pytest

from pplab import make_schedule

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", ["pplab/ir/__init__.py", "pplab/ir/actions.py",
                                    "pplab/ir/rows.py", "pplab/ir/schedule.py",
                                    "pplab/timeline.py", "pplab/inflight.py"])
def test_every_public_name_has_a_docstring(module):
    tree = ast.parse((ROOT / module).read_text())
    missing = []

    def walk(body, prefix=""):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
                if ast.get_docstring(n) is None:
                    missing.append(prefix + n.name)
                if isinstance(n, ast.ClassDef):
                    walk(n.body, n.name + ".")
    walk(tree.body)
    assert not missing, missing


@pytest.mark.parametrize("name, P, M, V, share", [("1f1b", 4, 8, None, 1.0),
                                                  ("interleaved", 4, 8, 2, 0.5),
                                                  ("dualpipev", 4, 8, None, 0.5),
                                                  ("dualpipe", 4, 8, None, 1.0)])
def test_chunk_fraction_is_each_stages_even_share(name, P, M, V, share):
    s = make_schedule(name, P, M, V)
    assert s.stage_share == share
    assert [s.chunk_fraction(st) for st in range(s.num_stages)] == [share] * s.num_stages
    for wrong in (-1, s.num_stages):
        with pytest.raises(ValueError, match=f"stages 0..{s.num_stages - 1}, not {wrong}"):
            s.chunk_fraction(wrong)
