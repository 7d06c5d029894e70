"""Bad input to ``pplab plan`` and ``pplab memory``: one line naming the flag, exit 2, before
any planning; and a candidate only the full microbatch count rules out is skipped and said,
never the end of the whole plan."""
import pytest

from pplab.cli import main
from pplab.memory import ModelSpec
from pplab.memory.planner import plan

L70 = ["--model", "llama3-70b"]


@pytest.mark.parametrize("argv,says", [
    (["plan", *L70, "--gpus", "64", "--global-batch", "0"], "--global-batch must be ≥ 1"),
    (["plan", *L70, "--gpus", "64", "--first-layers", "100"], "--first-layers 100"),
    (["plan", *L70, "--gpus", "64", "--first-layers", "-3"], "--first-layers -3"),
    (["plan", *L70, "--gpus", "64", "--last-layers", "41", "--first-layers", "40"], "> "),
    (["plan", *L70, "--gpus", "64", "--json", "--export", "megatron"], "--json and --export"),
    (["memory", *L70, "--tp", "8", "--explain", "--json"], "--explain and --json"),
    (["memory", *L70, "--sp"], "--sp needs --tp ≥ 2"),
    (["memory", *L70, "--tp", "8", "--gpu-memory", "1e12"], "--gpu-memory 1e+12 is in GB"),
    (["plan", *L70, "--gpus", "8", "--gpu-flops", "989e12"], "--gpu-flops"),
    (["memory", *L70, "--plan"], "pplab plan --model llama3-70b --gpus N"),
    (["memory", "--layers", "4", "--hidden", "64", "--heads", "4", "--ffn", "256",
      "--vocab", "100", "--plan"], "pplab plan --layers 4 --hidden 64 --heads 4"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, says):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and says in err, err
    assert "NAME" not in err


def test_warning_hint_names_the_model_given(capsys):
    assert main(["memory", "--layers", "8", "--hidden", "8192", "--heads", "64", "--ffn",
                 "28672", "--vocab", "1000"]) == 0
    err = capsys.readouterr().err
    assert "does not fit" in err and "pplab plan --layers 8 --hidden 8192" in err


def test_an_infeasible_dualpipev_candidate_is_skipped_and_said():
    """P ≤ M < 2P with M above the simulated range: checked at its own M, not a reduced one
    (which once passed, and the simulation at the full M ended the plan)."""
    m = ModelSpec("c", 128, 1024, 8, 4096, 1000, 2048)
    cands = plan(m, 64, global_batch=64, max_pp=64, schedules=("dualpipev",),
                 zero_stages=(0,), recompute=("none",), micro_batches=(1,))
    bad = [c for c in cands if c.config.pp == 64]
    assert bad and not any(c.feasible for c in bad)
    assert "dualpipev needs M ≥ 2P" in bad[0].reason
    assert any(c.feasible for c in cands)


def test_every_depth_the_layers_allow_is_tried():
    """Llama 3 405B's PP = 16 over 126 layers (7 on each end, 8 between) and Megatron-LM's
    PP = 35 over 105 layers, without raising --max-pp."""
    from pplab.memory import get_preset
    from pplab.memory.planner import _pp_choices
    assert _pp_choices(126, 8192, 7, 7) == [1, 3, 4, 6, 9, 10, 16, 18, 30, 58, 114]
    assert 16 in _pp_choices(126, 8192)             # the ends take the remainder (below)
    # 12 is not among them: 10 middle stages of ⌈61/12⌉ = 6 leave one layer for two ends
    assert _pp_choices(61, 61) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 16, 21, 31, 61]
    assert 35 in _pp_choices(105, 315) and _pp_choices(105, 315, 4, None) == [1, 2, 102]
    assert _pp_choices(10, 10, 4, 6) == [1, 2]
    m = get_preset("llama3-405b")
    cands = plan(m, 8192, global_batch=2048, first_layers=7, last_layers=7,
                 schedules=("1f1b",), zero_stages=(1,), recompute=("selective",))
    assert {c.config.pp for c in cands} == {1, 4, 16}
    pp16 = [c for c in cands if c.config.pp == 16 and c.config.tp == 8]
    assert pp16 and all(c.feasible or c.over_memory for c in pp16)   # sized, not ruled out
    assert [r.stop - r.start for r in pp16[0].config.stage_ranges(
        pp16[0].config.make_schedule(), 126)] == [7] + [8] * 14 + [7]


def _ends(cands, pp):
    return {(c.config.schedule, c.config.first_layers, c.config.last_layers)
            for c in cands if c.config.pp == pp}


@pytest.mark.slow
def test_depths_that_do_not_divide_the_layers_give_their_ends_the_remainder():
    """Without --first-layers/--last-layers, Llama 3 405B's 126 layers on 16 stages are
    7 + 14·8 + 7, DeepSeek-V3's 61 are 3 + 14·4 + 2 (the first end the larger); a depth that
    divides the layers stays even, and a V-shape's 2·P chunks take the remainder the same way
    or, where its ends would get under two layers, one and none: DualPipeV's 32 chunks of
    DeepSeek-V3 are 1 + 30·2 + 0, the last holding the output layer alone."""
    from pplab.memory import get_preset
    from pplab.memory.published_runs import DEEPSEEK_EPS, H800
    llama = plan(get_preset("llama3-405b"), 8192, global_batch=2048)
    assert {("1f1b", 7, 7), ("zb-h1", 7, 7), ("zbv", 3, 3)} <= _ends(llama, 16)
    assert _ends(llama, 2) == {(s, None, None) for s in
                               ("1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "gpipe")}
    assert any(c.feasible for c in llama if c.config.pp == 16)
    deepseek = plan(get_preset("deepseek-v3"), 2048, H800, global_batch=15360,
                    activations="fp8", eps=DEEPSEEK_EPS)
    assert {("1f1b", 3, 2), ("dualpipev", 1, 0)} <= _ends(deepseek, 16)
    assert any(c.feasible for c in deepseek if c.config.pp == 16)
