"""GPUs the planner can size a run for: memory, peak FLOP/s and links, each from its maker's
data sheet. Peak is dense 16-bit tensor throughput (the sheets print twice as much "with
sparsity", which training does not use); memory is the sheet's figure in GB = 10⁹ bytes,
before the CUDA context and allocator take their share. Bandwidths are per GPU, one way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .comm import Network


@dataclass(frozen=True)
class Hardware:
    """One GPU type and its network. Defaults: H100 SXM 80 GB, 989 TFLOP/s dense bf16,
    40% of peak reached by the matmuls; NVLink 450 GB/s, InfiniBand 50 GB/s per GPU."""
    memory: float = 80e9
    flops: float = 989e12
    efficiency: float = 0.4
    network: Network = field(default_factory=Network)


@dataclass(frozen=True)
class GPU:
    """A data-sheet entry: what ``Hardware`` takes, plus the name to print."""
    title: str
    memory: float            # bytes
    flops: float             # dense bf16 FLOP/s
    intra_node: float        # bytes/s per GPU, one way, inside a node
    inter_node: float        # bytes/s per GPU between nodes (one NIC per GPU)
    source: str


GPUS: dict[str, GPU] = {
    "a100-40gb": GPU("A100 SXM 40 GB", 40e9, 312e12, 300e9, 25e9,
                     "NVIDIA A100 data sheet: 312 TFLOP/s BF16 dense, NVLink 600 GB/s both "
                     "ways; one 200 Gb/s HDR NIC per GPU (DGX A100)"),
    "a100-80gb": GPU("A100 SXM 80 GB", 80e9, 312e12, 300e9, 25e9,
                     "NVIDIA A100 data sheet (80 GB HBM2e); links as the 40 GB part"),
    "h100-80gb": GPU("H100 SXM 80 GB", 80e9, 989e12, 450e9, 50e9,
                     "NVIDIA H100 data sheet: 989 TFLOP/s BF16 dense, NVLink 900 GB/s both "
                     "ways; one 400 Gb/s NDR NIC per GPU (DGX H100)"),
    "h800-80gb": GPU("H800 SXM 80 GB", 80e9, 989e12, 160e9, 50e9,
                     "H100's compute and memory with NVLink cut for export; DeepSeek-V3 "
                     "Technical Report §3.2.2: NVLink 160 GB/s, InfiniBand 50 GB/s per GPU"),
    "h200-141gb": GPU("H200 SXM 141 GB", 141e9, 989e12, 450e9, 50e9,
                      "NVIDIA H200 data sheet: 141 GB HBM3e, H100's compute and NVLink"),
    "mi300x-192gb": GPU("MI300X 192 GB", 192e9, 1307e12, 448e9, 50e9,
                        "AMD Instinct MI300X data sheet: 1307 TFLOP/s BF16 dense, 192 GB "
                        "HBM3, 7 Infinity Fabric links of 64 GB/s each way; 400 Gb/s NIC"),
}


def gpu(name: str) -> GPU:
    """The preset for ``name``; ValueError listing the choices."""
    key = name.lower()
    if key not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; choose one of {', '.join(GPUS)}")
    return GPUS[key]


def hardware(name: str = "h100-80gb", efficiency: float = 0.4, memory: float | None = None,
             flops: float | None = None, gpus_per_node: int = 8,
             intra_node: float | None = None, inter_node: float | None = None,
             latency: float = 0.0, pod_gpus: int | None = None,
             oversubscription: float = 1.0) -> Hardware:
    """``Hardware`` for a preset, any field overridden (None keeps the data sheet's)."""
    g = gpu(name)
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    for label, value in (("memory", memory), ("peak FLOP/s", flops), ("gpus per node",
                         gpus_per_node), ("bandwidth", intra_node), ("bandwidth", inter_node)):
        if value is not None and not value > 0:
            raise ValueError(f"{label} must be > 0, got {value}")
    if latency < 0 or oversubscription < 1 or (pod_gpus is not None and pod_gpus < 1):
        raise ValueError("latency must be ≥ 0, oversubscription ≥ 1 and a pod ≥ 1 GPU")
    net = Network(intra_node or g.intra_node, inter_node or g.inter_node, gpus_per_node,
                  latency, pod_gpus, oversubscription)
    return Hardware(memory=memory or g.memory, flops=flops or g.flops, efficiency=efficiency,
                    network=net)
