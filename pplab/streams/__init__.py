"""The stream model: communication as its own stream, above the simulator and the lowering.

    from pplab.streams import Link, simulate_streams

It plays a schedule's *lowered* lists (``pplab.lower``, the lists the real worker runs) with
compute and messages apart (``model.py`` states the model). Its first run of a schedule and
lowering is a worklist (``worklist.py``); a slider's later runs replay it (``replay.py``).
It sits above ``pplab.sim`` (whose compiled schedule and duration rule it reuses) and above
``pplab.lower`` (which runs the simulator to order messages), so neither imports it.
"""
from .model import (QUEUES, CompiledStreams, Link, all_to_all_split, compile_streams,
                    simulate_streams, warmup_end)

__all__ = ["QUEUES", "CompiledStreams", "Link", "all_to_all_split", "compile_streams",
           "simulate_streams", "warmup_end"]
