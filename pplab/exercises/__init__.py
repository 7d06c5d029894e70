"""Graders for the exercise notebooks.

Each ``check_*`` function takes the student's answer (usually a function), compares it with
pplab's own generators and simulator on many cases — including ones the notebook never
shows — and raises ``AssertionError`` with a message that says which case failed, what was
expected and a hint. On success it prints a short confirmation and returns ``True``.
"""
from __future__ import annotations

from .bubble import (check_bubble_formulas, check_inflight, check_one_f_one_b_rank,
                     check_text_schedule)
from .derive import check_derived_bubble, check_derived_makespan, check_derived_peak
from .memory import (Budget, check_layer_activations, check_layout, check_layout_for_budget,
                     check_peak_1f1b, check_zero_bytes)
from .puzzles import check_puzzle
from .pipeline import (check_balanced_partition, check_hand_written_1f1b, check_real_run,
                       check_send_recv_plan)
from .schedules import (check_fixed_schedule, check_layer_placement, check_p2p_messages,
                        check_split_backward_schedule)

__all__ = [
    # exercise 01: bubble and 1F1B
    "check_bubble_formulas", "check_one_f_one_b_rank", "check_inflight", "check_text_schedule",
    # exercise 02: schedules
    "check_layer_placement", "check_split_backward_schedule", "check_fixed_schedule",
    "check_p2p_messages",
    # exercise 03: memory
    "check_zero_bytes", "check_layer_activations", "check_peak_1f1b", "check_layout",
    "check_layout_for_budget", "Budget",
    # exercise 04: a real pipeline
    "check_balanced_partition", "check_send_recv_plan", "check_hand_written_1f1b",
    "check_real_run",
    # exercise 05: puzzles; exercise 08: derivations (06 and 07 live in pplab.runtime.exercises)
    "check_puzzle", "check_derived_makespan", "check_derived_bubble", "check_derived_peak",
]
