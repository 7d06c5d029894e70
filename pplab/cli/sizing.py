"""The model and hardware flags ``pplab memory`` and ``pplab plan`` share, declared once so
both read the same way: ``--model`` (a preset, or explicit shapes), ``--gpu`` (a data-sheet
preset) and overrides of its numbers."""
from __future__ import annotations

import argparse

from ..memory import ModelSpec, PRESETS, get_preset
from ..memory.hardware import GPUS, Hardware, gpu, hardware

SHAPES = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (a preset, or all of --layers --hidden --heads --ffn "
                             "--vocab)")
    g.add_argument("--model", "--preset", dest="model", metavar="NAME", default=None,
                   help=f"one of {', '.join(PRESETS)} (default: none; give the shapes)")
    for name in SHAPES:
        g.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name, default=None,
                       help=f"{name.replace('_', ' ')} (default: the preset's"
                            + (", or --heads" if name == "kv_heads" else "") + ")")
    g.add_argument("--arch", choices=("gpt", "llama"), default=None,
                   help="layer style for explicit shapes (default: the preset's, else gpt)")
    g.add_argument("--tied", action="store_true",
                   help="tie embedding and output weights (default: the preset's)")
    g.add_argument("--seq", type=int, default=None,
                   help="sequence length (default: the preset's, else 2048)")


def model_from_args(a) -> ModelSpec:
    given = {k: getattr(a, k) for k in SHAPES if getattr(a, k) is not None}
    if a.model:
        m = get_preset(a.model)
        if given:
            m = m.with_(**given)
        if a.arch:
            m = m.with_(arch=a.arch)
    else:
        missing = [k for k in SHAPES if k != "kv_heads" and k not in given]
        if missing:
            raise ValueError("give --model or all of --layers --hidden --heads --ffn --vocab "
                             f"(missing: {', '.join('--' + k for k in missing)})")
        m = ModelSpec("custom", seq=a.seq or 2048, tied_embeddings=a.tied,
                      arch=a.arch or "gpt", **given)
    if a.seq is not None:
        m = m.with_(seq=a.seq)
    if a.tied:
        m = m.with_(tied_embeddings=True)
    return m


def model_flags(a) -> str:
    """The model flags as given, for a hint that can be pasted: "--model llama3-70b" or the
    shapes ("--layers 32 --hidden 4096 ...")."""
    out = [f"--model {a.model}"] if a.model else []
    out += [f"--{k.replace('_', '-')} {getattr(a, k)}" for k in SHAPES
            if getattr(a, k) is not None]
    return " ".join(out)


def add_hardware_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hardware (a data-sheet preset; each number can be overridden)")
    g.add_argument("--gpu", default="h100-80gb", metavar="NAME",
                   help=f"one of {', '.join(GPUS)} (default: %(default)s)")
    g.add_argument("--gpu-memory", type=float, default=None, metavar="GB",
                   help="memory per GPU in GB (default: the --gpu preset's)")
    g.add_argument("--gpu-flops", type=float, default=None, metavar="TFLOPS",
                   help="dense bf16 peak per GPU in TFLOP/s (default: the --gpu preset's)")
    g.add_argument("--efficiency", type=float, default=0.4,
                   help="share of peak the matmuls reach (default: %(default)s)")
    g.add_argument("--gpus-per-node", type=int, default=8,
                   help="GPUs joined by the fast link (default: %(default)s)")
    g.add_argument("--intra-bw", type=float, default=None, metavar="GB/S",
                   help="GB/s per GPU inside a node (default: the --gpu preset's)")
    g.add_argument("--inter-bw", type=float, default=None, metavar="GB/S",
                   help="GB/s per GPU between nodes (default: the --gpu preset's)")
    g.add_argument("--latency", type=float, default=0.0, metavar="US",
                   help="microseconds each message costs on top of its bytes (default: 0)")
    g.add_argument("--pod-gpus", type=int, default=None, metavar="N",
                   help="GPUs in a pod; axes spanning more share oversubscribed links "
                        "(default: no pods)")
    g.add_argument("--oversubscription", type=float, default=1.0, metavar="X",
                   help="links above a pod carry 1/X of the per-GPU bandwidth (default: 1)")


#: the largest value each unit-bearing flag takes: a number above it was given in the
#: wrong unit (bytes for GB, FLOP/s for TFLOP/s), not a GPU that exists
UNIT_LIMITS = {"gpu_memory": (1e4, "GB"), "gpu_flops": (1e5, "TFLOP/s"),
               "intra_bw": (1e5, "GB/s"), "inter_bw": (1e5, "GB/s")}


def hardware_from_args(a) -> Hardware:
    for name, (limit, unit) in UNIT_LIMITS.items():
        v = getattr(a, name)
        if v is not None and v > limit:
            raise ValueError(f"--{name.replace('_', '-')} {v:g} is in {unit}: "
                             f"{v:g} {unit} is no GPU; give at most {limit:g}")
    scaled = lambda x, unit: None if x is None else x * unit
    return hardware(a.gpu, a.efficiency, scaled(a.gpu_memory, 1e9), scaled(a.gpu_flops, 1e12),
                    a.gpus_per_node, scaled(a.intra_bw, 1e9), scaled(a.inter_bw, 1e9),
                    a.latency * 1e-6, a.pod_gpus, a.oversubscription)


def hardware_title(a, hw: Hardware) -> str:
    """"H100 SXM 80 GB (989 TFLOP/s at 40%, 80 GB)", with any overridden number shown."""
    return (f"{gpu(a.gpu).title} ({hw.flops / 1e12:g} TFLOP/s dense bf16 at "
            f"{hw.efficiency:.0%}, {hw.memory / 1e9:g} GB; {hw.network.gpus_per_node} per node, "
            f"{hw.network.intra_node / 1e9:g} GB/s inside, {hw.network.inter_node / 1e9:g} GB/s "
            "between nodes per GPU)")
