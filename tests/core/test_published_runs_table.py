"""The published-runs table in docs/memory.md is what pplab computes now, row by row."""
import re
from pathlib import Path

import pytest

from pplab.memory import published_runs


@pytest.mark.slow
def test_docs_table_is_regenerated_from_the_models():
    doc = (Path(__file__).parents[2] / "docs" / "memory.md").read_text()
    table = re.search(r"<!-- published-runs -->\n(.*?)\n<!-- /published-runs -->", doc, re.S)
    assert table, "the published-runs table is missing from docs/memory.md"
    assert table.group(1) == published_runs.markdown()


def test_deepseek_v3_is_stated_as_the_report_runs_it():
    model, cfg = published_runs.deepseek_layout()
    assert (cfg.tp, cfg.pp, cfg.ep, cfg.dp, cfg.zero, cfg.schedule) == \
        (1, 16, 64, 128, 1, "dualpipev")
    assert cfg.num_gpus == 2048 and cfg.microbatches * cfg.dp == 15360 and model.seq == 4096


def test_llama3_cp_row_is_stated_like_the_others():
    from pplab.memory.published_run import TABLE4
    model, cfg = published_runs.llama3_layout(TABLE4[2])
    assert (cfg.tp, cfg.cp, cfg.pp, cfg.dp, cfg.num_gpus) == (8, 16, 16, 8, 16384)
    assert model.seq == 131072 and cfg.microbatches == TABLE4[2].batch_per_dp


@pytest.mark.slow
def test_the_fitted_efficiency_reproduces_its_own_runs():
    """At the fitted efficiency the runs it was fitted on average out at 1 (geometric mean)."""
    import math
    eff = published_runs.fitted_efficiency()
    runs = [r for r in published_runs._runs() if published_runs._name(r) in
            published_runs.FIT_ON]
    assert len(runs) == 2
    logs = [math.log(published_runs.throughput_ratio(r, eff)) for r in runs]
    assert abs(sum(logs)) < 1e-3 and 0.3 < eff < 0.8
