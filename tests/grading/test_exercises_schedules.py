"""Exercise 02: the solution passes every grader, the unsolved exercise fails every grader cell,
and the graders reject typical wrong answers. (Build drift and idempotence for all solutions
are covered by tests/grading/test_exercises.py's build(check=True) test.)"""
from pathlib import Path

import pytest

from pplab.exercises.schedules import (check_fixed_schedule, check_layer_placement,
                                       check_p2p_messages, check_split_backward_schedule)

ROOT = Path(__file__).resolve().parents[2]













def test_graders_reject_wrong_answers():
    def drops_remainder(L, P, V, r):          # the popular write-up's L // (P·V)
        n = L // (P * V)
        return [x for v in range(V) for x in range((r + v * P) * n, (r + v * P + 1) * n)]
    with pytest.raises(AssertionError, match="remainder"):
        check_layer_placement(drops_remainder)

    def contiguous(L, P, V, r):               # forgets the looped placement
        n = L // P
        return list(range(r * n, (r + 1) * n))
    with pytest.raises(AssertionError, match="stages r, r\\+P"):
        check_layer_placement(contiguous)

    one_f_one_b = ["0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"]
    with pytest.raises(AssertionError, match="target"):
        check_split_backward_schedule(one_f_one_b)
    gpipe_split = ["0F0 0F1 0F2 0F3 0I0 0I1 0I2 0I3 0W0 0W1 0W2 0W3",
                   "1F0 1F1 1F2 1F3 1I0 1I1 1I2 1I3 1W0 1W1 1W2 1W3"]
    with pytest.raises(AssertionError):
        check_split_backward_schedule(gpipe_split)
    with pytest.raises(AssertionError, match="does not validate"):
        check_split_backward_schedule(["0F0 0I0 0W0", "1F0 1I0 1W0"])

    broken = ["0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3", "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
              "2F0 2F1 2F2 2F3 2B0 2B1 2B2 2B3"]
    with pytest.raises(AssertionError, match="does not validate"):
        check_fixed_schedule(broken, broken, P=3, M=4)
    dropped = broken[:2] + ["2F0 2B0 2F1 2B1 2F2 2B2 2F3"]
    with pytest.raises(AssertionError, match="same actions"):
        check_fixed_schedule(dropped, broken, P=3, M=4)

    with pytest.raises(AssertionError, match="P = 1"):
        check_p2p_messages(lambda P, M, V: 2 * M * (P * V - 1))       # forgets P = 1
    with pytest.raises(AssertionError, match="P·V − 1"):
        check_p2p_messages(lambda P, M, V: 2 * M * V * (P - 1))       # V× rather than (PV−1)

    def stub(*a):
        raise NotImplementedError("your code here")
    with pytest.raises(AssertionError, match="not implemented yet"):
        check_p2p_messages(stub)
