"""``pplab plan --export``: each export is read back by the tool's own code where it installs
here (``make`` installs torchtitan 0.2.2 and megatron-core with ``--no-deps``), and checked
against the tool's documented names everywhere.

Sources of the names (facts, cited; no code copied):
* torchtitan 0.2: ``torchtitan/config/job_config.py`` (dataclasses ``Parallelism``,
  ``Training``, ``ActivationCheckpoint``; TOML sections are their snake_case field names) and
  ``torchtitan/distributed/pipeline_parallel.py`` (``pipeline_llm``: the number of virtual
  stages is ceil((layers + first_stage_less_layers + last_stage_less_layers) /
  layers_per_stage); single-stage schedules take 1 stage per rank, the others ≥ 2).
* Megatron-LM: ``megatron/training/arguments.py`` — ``_add_network_size_args``
  (--num-layers, --hidden-size, --ffn-hidden-size, --num-attention-heads,
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
import argparse
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
@pytest.mark.parametrize("cfg", TITAN_CASES, ids=lambda c: f"{c.schedule}-pp{c.pp}-z{c.zero}")
def test_torchtitan_reads_the_export_back(tmp_path, cfg):
    root, ConfigManager = _torchtitan()
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, \
        get_schedule_class
    assert cannot_run("torchtitan", L70, cfg) is None
    path = tmp_path / "plan.toml"
    path.write_text(torchtitan_toml(L70, cfg, 4096))
    job = ConfigManager().parse_args(["--job.config_file", str(path)])
    par, train = job.parallelism, job.training
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (cfg.tp, cfg.pp)
    assert par.data_parallel_shard_degree * par.data_parallel_replicate_degree == cfg.dp
    assert par.data_parallel_shard_degree == (cfg.dp if cfg.zero == 3 else 1)
    if cfg.zero == 3:
        assert par.fsdp_reshard_after_forward == \
            {"per_step": "never", "per_microbatch": "always"}[cfg.zero3_regather]
    assert train.seq_len == 4096 and train.local_batch_size == cfg.microbatches
    assert train.global_batch_size == cfg.microbatches * cfg.dp
    assert job.activation_checkpoint.mode == cfg.recompute
    if cfg.pp == 1:
        return
    # the schedule as torch resolves it, and the stages torchtitan will build from the file
    cls = get_schedule_class(par.pipeline_parallel_schedule)
    assert cls.__name__ == "Schedule" + torch_schedule_name(cfg.schedule)
    V = stages_per_rank(cfg)
    assert issubclass(cls, PipelineScheduleSingle) == (V == 1)
    lead, tail = par.pipeline_parallel_first_stage_less_layers, \
        par.pipeline_parallel_last_stage_less_layers
    stages = (math.ceil((L70.layers + lead + tail) / par.pipeline_parallel_layers_per_stage)
              if par.pipeline_parallel_layers_per_stage else cfg.pp * (1 if V == 1 else 2))
    assert stages == cfg.pp * V and par.pipeline_parallel_microbatch_size == cfg.microbatch
    parts = _titan_split(root)(stages, L70.layers, lead, tail)
    ours = stage_layers(cfg.make_schedule(), L70.layers)
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


def _megatron_parser() -> argparse.ArgumentParser:
    """The flags the export uses, with Megatron-LM's names, types and choices (module
    docstring); unknown flags are refused, as Megatron's own parser refuses them."""
    p = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    ints = ("num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads",
            "num-query-groups", "seq-length", "max-position-embeddings",
            "tensor-model-parallel-size", "pipeline-model-parallel-size",
            "num-layers-per-virtual-pipeline-stage", "decoder-first-pipeline-num-layers",
            "decoder-last-pipeline-num-layers", "micro-batch-size", "global-batch-size",
            "recompute-num-layers")
    for name in ints:
        p.add_argument(f"--{name}", type=int)
    for name in ("group-query-attention", "swiglu", "untie-embeddings-and-output-weights",
                 "bf16", "sequence-parallel", "use-distributed-optimizer"):
        p.add_argument(f"--{name}", action="store_true")
    p.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    p.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"], default="LayerNorm")
    p.add_argument("--position-embedding-type", choices=["learned_absolute", "rope"])
    p.add_argument("--recompute-granularity", choices=["full", "selective"])
    p.add_argument("--recompute-method", choices=["uniform", "block"])
    return p


@pytest.mark.slow
@pytest.mark.parametrize("cfg", MEGATRON_CASES, ids=lambda c: f"{c.schedule}-pp{c.pp}-v{c.virtual}")
def test_megatron_arguments_parse_and_megatron_core_accepts_them(cfg):
    assert cannot_run("megatron", L70, cfg) is None
    text = megatron_text(L70, cfg, 8192)
    argv = shlex.split(text.replace("\\\n", " "))
    assert argv == megatron_args(L70, cfg, 8192)
    a = _megatron_parser().parse_args(argv)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (cfg.tp, cfg.pp)
    assert a.global_batch_size == cfg.microbatches * cfg.microbatch * cfg.dp
    assert a.sequence_parallel == cfg.sp and a.use_distributed_optimizer == (cfg.zero == 1)
    assert a.recompute_granularity == (None if cfg.recompute == "none" else cfg.recompute)
    vpp = None
    if a.num_layers_per_virtual_pipeline_stage:
        vpp = a.num_layers // a.pipeline_model_parallel_size // \
            a.num_layers_per_virtual_pipeline_stage
        assert vpp == stages_per_rank(cfg)
    core = pytest.importorskip("megatron.core.transformer.transformer_config",
                               reason="megatron-core not installed (make installs it --no-deps)")
    import torch
    conf = core.TransformerConfig(
        num_layers=a.num_layers, hidden_size=a.hidden_size, ffn_hidden_size=a.ffn_hidden_size,
        num_attention_heads=a.num_attention_heads,
        num_query_groups=a.num_query_groups if a.group_query_attention else None,
        tensor_model_parallel_size=a.tensor_model_parallel_size,
        pipeline_model_parallel_size=a.pipeline_model_parallel_size,
        virtual_pipeline_model_parallel_size=vpp, sequence_parallel=a.sequence_parallel,
        num_layers_in_first_pipeline_stage=a.decoder_first_pipeline_num_layers,
        num_layers_in_last_pipeline_stage=a.decoder_last_pipeline_num_layers,
        recompute_granularity=a.recompute_granularity, recompute_method=a.recompute_method,
        recompute_num_layers=a.recompute_num_layers, gated_linear_unit=a.swiglu,
        normalization=a.normalization, add_bias_linear=a.add_bias_linear,
        pipeline_dtype=torch.bfloat16 if a.bf16 else None, bf16=a.bf16)
    assert conf.num_query_groups == L70.kv


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
    ("torchtitan", ParallelConfig(4, 4, 4, zero=3, microbatches=12, schedule="interleaved",
                                  virtual=3), "equal chunks"),
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
    a = _megatron_parser().parse_args(argv)
    assert a.tensor_model_parallel_size * a.pipeline_model_parallel_size <= 64
