"""Memory and communication accounting for TP × PP × DP training, and a layout planner.

Pure Python (no torch): sliders in the notebooks recompute instantly.
"""
from .accounting import MemoryReport, RankMemory, memory_report, model_states_bytes
from .activations import (article_layer_bytes, boundary_activation_bytes,
                          first_stage_extra_bytes, last_stage_extra_bytes,
                          layer_activation_bytes, seed_article_layer_bytes)
from .model_spec import ModelSpec, Split
from .parallel import ParallelConfig
from .presets import PRESETS, TINY, get_preset

__all__ = ["MemoryReport", "RankMemory", "memory_report", "model_states_bytes",
           "boundary_activation_bytes", "first_stage_extra_bytes", "last_stage_extra_bytes",
           "layer_activation_bytes", "article_layer_bytes", "seed_article_layer_bytes",
           "ModelSpec", "Split", "ParallelConfig", "PRESETS", "TINY", "get_preset"]
