"""``pplab plan --export``: each export is read back by the tool's own code where it installs
here (``make`` installs torchtitan 0.2.2 and megatron-core with ``--no-deps``), and checked
against the tool's documented names everywhere.

Sources of the names (facts, cited; no code copied):
* torchtitan 0.2: ``torchtitan/config/job_config.py`` (dataclasses ``Parallelism``,
  ``Training``, ``ActivationCheckpoint``; TOML sections are their snake_case field names) and
  ``torchtitan/distributed/pipeline_parallel.py`` (``pipeline_llm``: the number of virtual
  stages is ceil((layers + first_stage_less_layers + last_stage_less_layers) /
  layers_per_stage); single-stage schedules take 1 stage per rank, the others ≥ 2).
* Megatron-LM: ``megatron/training/arguments.py`` (its ``parse_args``/``validate_args`` read
  the export back where that source is installed; no registry release ships it, so that test
  skips saying so, and megatron-core's ``TransformerConfig`` checks the layout meanwhile)
  — ``_add_network_size_args`` (--num-layers, --hidden-size, --ffn-hidden-size, --num-attention-heads,
  --group-query-attention, --num-query-groups, --max-position-embeddings,
  --position-embedding-type, --normalization, --swiglu, --untie-embeddings-and-output-weights),
  ``_add_training_args`` (--micro-batch-size, --global-batch-size, --recompute-granularity
  {full, selective}, --recompute-method {uniform, block}, --recompute-num-layers,
  --sequence-parallel, --disable-bias-linear), ``_add_distributed_args``
  (--tensor-model-parallel-size, --pipeline-model-parallel-size,
  --decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers,
  --num-layers-per-virtual-pipeline-stage, --use-distributed-optimizer), ``_add_data_args``
  (--seq-length), ``_add_mixed_precision_args`` (--bf16); ``validate_args`` turns layers per
  virtual stage into ``virtual_pipeline_model_parallel_size`` = (layers / PP) / that.
"""
import ast
import importlib.util
import math
import pathlib
import shlex
import subprocess
import sys

import pytest

from pplab.memory import ParallelConfig, get_preset
from pplab.memory.export import (cannot_run, megatron_args, megatron_text, stages_per_rank,
                                 torch_schedule_name, torchtitan_toml)
from pplab.partition import stage_layers

L70 = get_preset("llama3-70b")
L405 = get_preset("llama3-405b")

# layouts the planner produces, each runnable by torchtitan
TITAN_CASES = [
    ParallelConfig(4, 2, 8, zero=3, sp=True, recompute="selective", microbatches=64,
                   schedule="zbv", zero3_regather="per_step"),
    ParallelConfig(4, 4, 4, zero=3, sp=True, recompute="full", microbatches=32,
                   schedule="interleaved", virtual=4),
    ParallelConfig(2, 8, 4, zero=3, microbatches=16, schedule="1f1b"),
    ParallelConfig(8, 2, 4, zero=3, sp=True, microbatches=8, schedule="gpipe"),
    ParallelConfig(4, 4, 4, zero=3, sp=True, microbatches=16, schedule="dualpipev"),
    ParallelConfig(4, 1, 16, zero=3, sp=True, recompute="selective", microbatches=32),
    ParallelConfig(8, 16, 1, sp=True, microbatches=32, schedule="interleaved", virtual=2),
    ParallelConfig(4, 1, 16, zero=3, sp=True, microbatch=2, microbatches=8),
    ParallelConfig(4, 4, 4, zero=3, sp=True, microbatches=12, schedule="interleaved",
                   virtual=3),
]
# Llama 3 405B's uneven stages: 7 layers on the first and last of 16; and its interleaved
# layout, 126 layers on 128 chunks with the first holding the embedding alone and the last
# the output layer alone (Llama 3 paper §3.3.2)
TITAN_UNEVEN = [
    ParallelConfig(8, 16, 64, zero=3, sp=True, microbatches=32, first_layers=7, last_layers=7),
    ParallelConfig(8, 16, 64, zero=3, sp=True, microbatches=32, schedule="interleaved",
                   virtual=8, first_layers=0, last_layers=0, zero3_regather="per_step"),
    ParallelConfig(8, 16, 8, zero=3, sp=True, microbatches=16, schedule="interleaved",
                   virtual=8, first_layers=0, last_layers=0, cp=16),
]


def _torchtitan():
    """torchtitan's config package, without its top-level __init__ (which imports the MoE
    kernels and with them triton, not installed here)."""
    spec = importlib.util.find_spec("torchtitan")
    if spec is None:
        pytest.skip("torchtitan is not installed (make installs torchtitan==0.2.2 --no-deps)")
    pytest.importorskip("tyro")
    root = pathlib.Path(spec.origin).parent
    if "torchtitan" not in sys.modules:      # the package object, its __init__ not run
        sys.modules["torchtitan"] = importlib.util.module_from_spec(spec)
    from torchtitan.config import ConfigManager
    return root, ConfigManager


def _titan_split(root: pathlib.Path):
    """torchtitan's own ``generate_llm_fqn_per_model_part``, executed from its installed
    source (its module imports the training stack, so the one function is lifted out)."""
    path = root / "distributed" / "pipeline_parallel.py"
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "generate_llm_fqn_per_model_part")
    scope = {}
    exec(compile(ast.Module([fn], []), str(path), "exec"), scope)
    return scope["generate_llm_fqn_per_model_part"]


@pytest.mark.slow
@pytest.mark.parametrize("model,cfg", [(L70, c) for c in TITAN_CASES] +
                         [(L405, c) for c in TITAN_UNEVEN],
                         ids=lambda x: x.name if hasattr(x, "name") else
                         f"{x.schedule}-pp{x.pp}-v{x.virtual}-b{x.microbatch}")
def test_torchtitan_reads_the_export_back(tmp_path, model, cfg):
    root, ConfigManager = _torchtitan()
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, \
        get_schedule_class
    assert cannot_run("torchtitan", model, cfg) is None
    path = tmp_path / "plan.toml"
    path.write_text(torchtitan_toml(model, cfg, 4096))
    job = ConfigManager().parse_args(["--job.config_file", str(path)])
    par, train = job.parallelism, job.training
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (cfg.tp, cfg.pp)
    assert par.context_parallel_degree == cfg.cp
    assert par.data_parallel_shard_degree * par.data_parallel_replicate_degree == cfg.dp
    assert par.data_parallel_shard_degree == (cfg.dp if cfg.zero == 3 else 1)
    if cfg.zero == 3:
        assert par.fsdp_reshard_after_forward == \
            {"per_step": "never", "per_microbatch": "always"}[cfg.zero3_regather]
    # torchtitan's trainer runs global ÷ (local · DP) forwards of local_batch_size sequences
    # each; under PP each forward is one pipeline pass over local ÷ microbatch microbatches
    accumulate = train.global_batch_size // (train.local_batch_size * cfg.dp)
    assert train.global_batch_size == cfg.microbatches * cfg.microbatch * cfg.dp
    if cfg.pp == 1:                   # pplab's M microbatches of b: M forwards of b
        assert (train.local_batch_size, accumulate) == (cfg.microbatch, cfg.microbatches)
    else:                             # one pass of M microbatches of b
        assert accumulate == 1 and train.local_batch_size // \
            par.pipeline_parallel_microbatch_size == cfg.microbatches
    assert train.seq_len == 4096 and job.activation_checkpoint.mode == cfg.recompute
    if cfg.pp == 1:
        return
    # the schedule as torch resolves it, and the stages torchtitan will build from the file
    cls = get_schedule_class(par.pipeline_parallel_schedule)
    assert cls.__name__ == "Schedule" + torch_schedule_name(cfg.schedule)
    V = stages_per_rank(cfg)
    assert issubclass(cls, PipelineScheduleSingle) == (V == 1)
    lead, tail = par.pipeline_parallel_first_stage_less_layers, \
        par.pipeline_parallel_last_stage_less_layers
    stages = (math.ceil((model.layers + lead + tail) / par.pipeline_parallel_layers_per_stage)
              if par.pipeline_parallel_layers_per_stage else cfg.pp * (1 if V == 1 else 2))
    assert stages == cfg.pp * V and par.pipeline_parallel_microbatch_size == cfg.microbatch
    parts = _titan_split(root)(stages, model.layers, lead, tail)
    ours = stage_layers(cfg.make_schedule(), model.layers, cfg.first_layers, cfg.last_layers)
    assert [sum(m.startswith("layers.") for m in part) for part in parts] == \
        [len(r) for r in ours]
    assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]


def test_torchtitan_rejects_a_misspelt_field(tmp_path):
    """The check above can fail: torchtitan refuses a name it does not know."""
    _, ConfigManager = _torchtitan()
    path = tmp_path / "bad.toml"
    path.write_text(torchtitan_toml(L70, TITAN_CASES[0], 4096).replace(
        "pipeline_parallel_degree", "pipeline_degree"))
    with pytest.raises(ValueError, match="pipeline_degree"):
        ConfigManager().parse_args(["--job.config_file", str(path)])


MEGATRON_CASES = [
    ParallelConfig(4, 4, 4, zero=1, sp=True, recompute="selective", microbatches=128),
    ParallelConfig(8, 4, 2, zero=0, sp=True, recompute="full", microbatches=32,
                   schedule="interleaved", virtual=4),
    ParallelConfig(4, 8, 2, zero=1, sp=True, microbatches=64, schedule="interleaved",
                   virtual=2),
    ParallelConfig(8, 8, 1, sp=True, microbatches=32, first_layers=9, last_layers=11),
    ParallelConfig(8, 1, 8, zero=1, microbatches=8),
]


#: why Megatron-LM's own parser cannot run here (checked: ``pip download megatron-core==0.16.1
#: --no-binary :all:`` gives an sdist with megatron/core only; pip finds no megatron-lm)
NO_MEGATRON_LM = ("Megatron-LM's parse_args/validate_args (megatron/training/arguments.py) "
                  "ship in no registry release: megatron-core 0.16.1's sdist and wheels hold "
                  "megatron/core only, and there is no megatron-lm package")


def _megatron_parse(argv: list[str], world: int, monkeypatch):
    """``argv`` through Megatron-LM's own ``parse_args`` and ``validate_args`` where its
    source is installed; skipped, saying why, where it is not."""
    if importlib.util.find_spec("megatron") is None or \
            importlib.util.find_spec("megatron.training") is None:
        pytest.skip(NO_MEGATRON_LM)
    from megatron.training.arguments import parse_args, validate_args
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *argv])
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("RANK", "0")
    return validate_args(parse_args())


def _flags(argv: list[str]) -> dict:
    """The export's flags as {name: value} (True for a switch): only pairing, no Megatron
    names, types or choices declared here."""
    out, i = {}, 0
    while i < len(argv):
        value = True if i + 1 == len(argv) or argv[i + 1].startswith("--") else argv[i + 1]
        out[argv[i].removeprefix("--").replace("-", "_")] = \
            int(value) if isinstance(value, str) and value.isdigit() else value
        i += 1 if value is True else 2
    return out


@pytest.mark.parametrize("cfg", MEGATRON_CASES, ids=lambda c: f"{c.schedule}-pp{c.pp}-v{c.virtual}")
def test_megatron_parses_and_validates_the_export(cfg, monkeypatch):
    argv = megatron_args(L70, cfg, 8192)
    assert cannot_run("megatron", L70, cfg) is None
    a = _megatron_parse(argv, cfg.num_gpus, monkeypatch)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (cfg.tp, cfg.pp)
    assert a.data_parallel_size == cfg.dp
    assert a.global_batch_size == cfg.microbatches * cfg.microbatch * cfg.dp


# Llama 3 405B: 7 layers on each end stage; and 128 one-layer chunks whose first holds the
# embedding alone and last the loss alone (Megatron's account-for-embedding/loss split)
MEGATRON_405 = [
    ParallelConfig(8, 16, 64, zero=1, sp=True, microbatches=32, first_layers=7, last_layers=7),
    ParallelConfig(8, 16, 64, zero=1, sp=True, microbatches=32, schedule="interleaved",
                   virtual=8, first_layers=0, last_layers=0),
]


@pytest.mark.slow
@pytest.mark.parametrize("model,cfg", [(L70, c) for c in MEGATRON_CASES] +
                         [(L405, c) for c in MEGATRON_405],
                         ids=lambda x: x.name if hasattr(x, "name") else
                         f"{x.schedule}-pp{x.pp}-v{x.virtual}")
def test_megatron_core_accepts_the_exported_layout(model, cfg):
    assert cannot_run("megatron", model, cfg) is None
    text = megatron_text(model, cfg, 8192)
    argv = shlex.split(text.replace("\\\n", " "))
    assert argv == megatron_args(model, cfg, 8192)
    a = _flags(argv)
    assert (a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"]) == \
        (cfg.tp, cfg.pp)
    assert a["global_batch_size"] == cfg.microbatches * cfg.microbatch * cfg.dp
    assert a.get("sequence_parallel", False) == cfg.sp
    assert a.get("use_distributed_optimizer", False) == (cfg.zero == 1)
    assert a.get("recompute_granularity") == (None if cfg.recompute == "none" else cfg.recompute)
    vpp = a.get("num_virtual_stages_per_pipeline_rank")
    if "num_layers_per_virtual_pipeline_stage" in a:
        vpp = a["num_layers"] // cfg.pp // a["num_layers_per_virtual_pipeline_stage"]
    assert (vpp or 1) == stages_per_rank(cfg)
    core = pytest.importorskip("megatron.core.transformer.transformer_config",
                               reason="megatron-core not installed (make installs it --no-deps)")
    import torch
    conf = core.TransformerConfig(
        num_layers=a["num_layers"], hidden_size=a["hidden_size"],
        ffn_hidden_size=a["ffn_hidden_size"], num_attention_heads=a["num_attention_heads"],
        num_query_groups=a.get("num_query_groups"),
        tensor_model_parallel_size=a["tensor_model_parallel_size"],
        pipeline_model_parallel_size=a["pipeline_model_parallel_size"],
        virtual_pipeline_model_parallel_size=vpp,
        sequence_parallel=a.get("sequence_parallel", False),
        num_layers_in_first_pipeline_stage=a.get("decoder_first_pipeline_num_layers"),
        num_layers_in_last_pipeline_stage=a.get("decoder_last_pipeline_num_layers"),
        recompute_granularity=a.get("recompute_granularity"),
        recompute_method=a.get("recompute_method"),
        recompute_num_layers=a.get("recompute_num_layers"),
        gated_linear_unit=a.get("swiglu", False), normalization=a.get("normalization",
                                                                       "LayerNorm"),
        add_bias_linear=not a.get("disable_bias_linear", False),
        account_for_embedding_in_pipeline_split=a.get(
            "account_for_embedding_in_pipeline_split", False),
        account_for_loss_in_pipeline_split=a.get("account_for_loss_in_pipeline_split", False),
        pipeline_dtype=torch.bfloat16, bf16=a.get("bf16", False))
    assert conf.num_query_groups == model.kv


def test_megatron_core_refuses_what_it_cannot_run():
    """The acceptance above can fail: uneven middle stages, SP without TP."""
    core = pytest.importorskip("megatron.core.transformer.transformer_config")
    import torch
    with pytest.raises(ValueError, match="divisible"):
        core.TransformerConfig(num_layers=80, hidden_size=8192, num_attention_heads=64,
                               pipeline_model_parallel_size=8, pipeline_dtype=torch.bfloat16,
                               num_layers_in_first_pipeline_stage=9,
                               num_layers_in_last_pipeline_stage=8)
    with pytest.raises(ValueError, match="sequence parallelism"):
        core.TransformerConfig(num_layers=80, hidden_size=8192, num_attention_heads=64,
                               sequence_parallel=True)


@pytest.mark.parametrize("tool,cfg,why", [
    ("torchtitan", ParallelConfig(4, 2, 8, zero=1, microbatches=8, schedule="zbv"), "ZeRO-1"),
    ("torchtitan", ParallelConfig(4, 2, 8, microbatches=8), "DDP"),
    ("torchtitan", ParallelConfig(4, 2, 8, zero=3, microbatches=8, schedule="zb-h1"),
     "no zb-h1"),
    ("torchtitan", ParallelConfig(8, 8, 1, zero=3, microbatches=8, first_layers=12),
     "cannot split the 80 layers"),
    ("megatron", ParallelConfig(4, 2, 8, zero=3, microbatches=8), "ZeRO-3"),
    ("megatron", ParallelConfig(4, 2, 8, microbatches=8, schedule="zbv"), "no zbv"),
    ("megatron", ParallelConfig(8, 8, 1, microbatches=8, first_layers=9, last_layers=8),
     "middle stages"),
])
def test_layouts_a_tool_cannot_run_are_refused_with_the_reason(tool, cfg, why):
    assert why in cannot_run(tool, L70, cfg)
    export = torchtitan_toml if tool == "torchtitan" else megatron_args
    with pytest.raises(ValueError, match="cannot export"):
        export(L70, cfg, 4096)


def _plan(*args):
    return subprocess.run([sys.executable, "-m", "pplab.cli", "plan", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_plan_export_is_the_fastest_runnable_layout_and_names_the_overall_best(tmp_path):
    r = _plan("--model", "llama3-70b", "--gpus", "64", "--seq", "4096", "--export",
              "torchtitan")
    assert r.returncode == 0, r.stderr
    comments = [line for line in r.stdout.splitlines() if line.startswith("#")]
    assert "torchtitan layout from pplab plan: llama3-70b, seq 4096, 64 × h100-80gb" \
        in comments[0]
    # the overall first choice is ZeRO-2, which torchtitan has not: the header says so
    assert "faster but out of reach: ZeRO-2" in comments[-1]
    import tomllib
    doc = tomllib.loads(r.stdout)
    assert set(doc) == {"parallelism", "training", "activation_checkpoint"}
    assert doc["parallelism"]["tensor_parallel_degree"] * \
        doc["parallelism"]["pipeline_parallel_degree"] * \
        doc["parallelism"]["data_parallel_shard_degree"] == 64
    m = _plan("--model", "llama3-70b", "--gpus", "64", "--export", "megatron")
    assert m.returncode == 0, m.stderr
    argv = shlex.split(" ".join(line for line in m.stdout.splitlines()
                                if not line.startswith("#")).replace("\\", " "))
    a = _flags(argv)
    assert a["tensor_model_parallel_size"] * a["pipeline_model_parallel_size"] <= 64


def test_torchtitan_local_batch_is_one_forward():
    """Without PP, torchtitan's local batch is one forward: pplab's microbatch, accumulated
    M times (not the whole per-GPU batch in one forward); under PP the schedule cuts it."""
    import tomllib
    flat = tomllib.loads(torchtitan_toml(L70, ParallelConfig(4, 1, 16, zero=3, microbatch=2,
                                                             microbatches=16), 8192))
    assert flat["training"]["local_batch_size"] == 2
    assert flat["training"]["global_batch_size"] == 2 * 16 * 16
    piped = tomllib.loads(torchtitan_toml(L405, TITAN_UNEVEN[0], 8192))
    assert piped["training"]["local_batch_size"] == 32
    par = piped["parallelism"]
    assert (par["pipeline_parallel_first_stage_less_layers"],
            par["pipeline_parallel_last_stage_less_layers"],
            par["pipeline_parallel_layers_per_stage"]) == (1, 1, 8)


def _titan_parallel_dims(root: pathlib.Path):
    """torchtitan's own ``ParallelDims`` (its checks run when it is built), loaded from its
    installed source without the ``torchtitan.distributed`` package (which imports the
    training stack)."""
    spec = importlib.util.spec_from_file_location("titan_parallel_dims",
                                                  root / "distributed" / "parallel_dims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ParallelDims


def test_deepseek_v3_as_run_is_refused_by_torchtitan_for_its_zero1():
    from pplab.memory.published_runs import deepseek_layout
    model, cfg = deepseek_layout()
    assert "no ZeRO-1/2" in cannot_run("torchtitan", model, cfg)
    assert "ZeRO-3 only" in cannot_run("torchtitan", model, cfg.with_(zero=0, pp=1, dp=2048))
    assert "no dualpipev" in cannot_run("megatron", model, cfg)


@pytest.mark.slow
def test_torchtitan_reads_back_deepseek_v3_with_fsdp_for_zero1(tmp_path):
    """DeepSeek-V3's layout with torchtitan's nearest to ZeRO-1 (FSDP keeping the parameters
    gathered): EP 64 carved out of the FSDP degree, DualPipeV over 61 layers in 32 stages."""
    from pplab.memory.published_runs import deepseek_layout
    root, ConfigManager = _torchtitan()
    model, cfg = deepseek_layout()
    cfg = cfg.with_(zero=3, zero3_regather="per_step")
    path = tmp_path / "plan.toml"
    path.write_text(torchtitan_toml(model, cfg, model.seq))
    job = ConfigManager().parse_args(["--job.config_file", str(path)])
    par = job.parallelism
    assert (par.expert_parallel_degree, par.expert_tensor_parallel_degree) == (64, 1)
    assert (par.pipeline_parallel_degree, par.pipeline_parallel_schedule) == (16, "DualPipeV")
    assert job.training.global_batch_size == 15360 and job.training.seq_len == 4096
    dims = _titan_parallel_dims(root)(
        dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
        pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
        etp=par.expert_tensor_parallel_degree, world_size=cfg.num_gpus)
    assert dims.dp_shard * dims.cp % dims.ep == 0      # EP's ranks come out of FSDP's
    lead, tail = par.pipeline_parallel_first_stage_less_layers, \
        par.pipeline_parallel_last_stage_less_layers
    parts = _titan_split(root)(2 * cfg.pp, model.layers, lead, tail)
    ours = stage_layers(cfg.make_schedule(), model.layers, cfg.first_layers, cfg.last_layers)
    assert [sum(m.startswith("layers.") for m in part) for part in parts] == \
        [len(r) for r in ours]
    with pytest.raises(AssertionError, match="Invalid parallel dims"):
        _titan_parallel_dims(root)(dp_replicate=1, dp_shard=100, cp=1, tp=1, pp=16, ep=64,
                                   etp=1, world_size=cfg.num_gpus)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:full scope is deprecated:UserWarning")   # Core's own default
@pytest.mark.filterwarnings("error::UserWarning:megatron.core.transformer.transformer_config")
def test_megatron_core_accepts_deepseek_v3_on_a_schedule_it_has():
    """DeepSeek-V3 with Megatron-LM's own 1F1B (it has no DualPipe) and the report's PP 16,
    EP 64, ZeRO-1: the MoE and MLA flags land in Megatron Core's ``MLATransformerConfig``."""
    from pplab.memory.published_runs import deepseek_layout
    model, cfg = deepseek_layout()
    cfg = cfg.with_(schedule="1f1b", first_layers=3, last_layers=2)
    assert "no dualpipev" in cannot_run("megatron", model, cfg.with_(schedule="dualpipev"))
    assert cannot_run("megatron", model, cfg) is None
    a = _flags(megatron_args(model, cfg, model.seq))
    assert (a["num_experts"], a["moe_router_topk"], a["expert_model_parallel_size"]) == \
        (256, 8, 64)
    assert eval(a["moe_layer_freq"]) == [0] * 3 + [1] * 58        # Megatron's own syntax
    core = pytest.importorskip("megatron.core.transformer.transformer_config",
                               reason="megatron-core not installed (make installs it --no-deps)")
    import torch
    conf = core.MLATransformerConfig(
        num_layers=a["num_layers"], hidden_size=a["hidden_size"],
        ffn_hidden_size=a["ffn_hidden_size"], num_attention_heads=a["num_attention_heads"],
        multi_latent_attention=a["multi_latent_attention"], q_lora_rank=a["q_lora_rank"],
        kv_lora_rank=a["kv_lora_rank"], qk_head_dim=a["qk_head_dim"],
        qk_pos_emb_head_dim=a["qk_pos_emb_head_dim"], v_head_dim=a["v_head_dim"],
        num_moe_experts=a["num_experts"], moe_router_topk=a["moe_router_topk"],
        moe_ffn_hidden_size=a["moe_ffn_hidden_size"],
        moe_shared_expert_intermediate_size=a["moe_shared_expert_intermediate_size"],
        moe_layer_freq=eval(a["moe_layer_freq"]), moe_router_dtype=a["moe_router_dtype"],
        expert_model_parallel_size=a["expert_model_parallel_size"],
        tensor_model_parallel_size=a["tensor_model_parallel_size"],
        pipeline_model_parallel_size=a["pipeline_model_parallel_size"],
        num_layers_in_first_pipeline_stage=a.get("decoder_first_pipeline_num_layers"),
        num_layers_in_last_pipeline_stage=a.get("decoder_last_pipeline_num_layers"),
        gated_linear_unit=a.get("swiglu", False), normalization=a["normalization"],
        add_bias_linear=not a.get("disable_bias_linear", False),
        pipeline_dtype=torch.bfloat16, bf16=a.get("bf16", False))
    assert conf.num_moe_experts * 3 * conf.moe_ffn_hidden_size * conf.hidden_size == \
        model.layer_params().expert
