"""V-Min, V-Half and V-ZB build exactly the schedules they built before the squeeze and
reorder steps were made incremental (issue 21: 64 ranks at slider speed).

``tests/data/v_shape_frozen.json`` holds a hash of every rank's action list, generated from
the earlier (quadratic) implementation, for every P in 1..16 with M in 1..3P+2, 4P and 8P,
and a sample of large (P, M) up to 64/256. A speed-up must not move a single action; a
deliberate schedule change regenerates the file (``python tests/core/test_v_shape_frozen.py``)
and says why in its commit.
"""
from __future__ import annotations

import hashlib
import json
import pathlib

import pytest

from pplab import make_schedule

DATA = pathlib.Path(__file__).parent.parent / "data" / "v_shape_frozen.json"
NAMES = ("v-zb", "v-half", "v-min")
LARGE = ((17, 51), (24, 100), (32, 128), (40, 160), (48, 96), (63, 200), (64, 64), (64, 256))
#: large cases cheap enough for the fast tier; the rest are marked slow
FAST_LARGE = ((17, 51), (32, 128))


def small_cases() -> list[tuple[int, int]]:
    return [(P, M) for P in range(1, 17) for M in sorted({*range(1, 3 * P + 3), 4 * P, 8 * P})]


def fingerprint(name: str, P: int, M: int) -> str:
    """sha256 of the rank lists (one line per rank, actions by their text), or the error."""
    try:
        s = make_schedule(name, P, M)
    except ValueError as e:
        return f"ValueError: {e}"
    text = "\n".join(" ".join(str(op) for op in ops) for ops in s.ranks)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def key(name: str, P: int, M: int) -> str:
    return f"{name} P={P} M={M}"


@pytest.fixture(scope="module")
def frozen() -> dict[str, str]:
    return json.loads(DATA.read_text())


def test_frozen_file_covers_every_case(frozen):
    cases = small_cases() + list(LARGE)
    assert {key(n, P, M) for n in NAMES for P, M in cases} == set(frozen)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("P", [*range(1, 12), *(pytest.param(P, marks=pytest.mark.slow)
                                                for P in range(12, 17))])
@pytest.mark.slow
def test_small_schedules_unchanged(frozen, name, P):
    """Every M at each P (P 12..16, the costliest to build, in the slow tier)."""
    changed = [key(name, P, M) for p, M in small_cases() if p == P
               if fingerprint(name, P, M) != frozen[key(name, P, M)]]
    assert not changed


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("P, M", [pytest.param(P, M, marks=() if (P, M) in FAST_LARGE
                                               else pytest.mark.slow) for P, M in LARGE])
def test_large_schedules_unchanged(frozen, name, P, M):
    assert fingerprint(name, P, M) == frozen[key(name, P, M)]


def test_fingerprint_sees_one_moved_action():
    """The hash changes when two actions of one rank swap (the test can fail)."""
    s = make_schedule("v-zb", 4, 8)
    text = "\n".join(" ".join(str(op) for op in ops) for ops in s.ranks)
    ops = s.ranks[0]
    swapped = [[*ops[:1], ops[2], ops[1], *ops[3:]], *s.ranks[1:]]
    other = "\n".join(" ".join(str(op) for op in ops) for ops in swapped)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == fingerprint("v-zb", 4, 8)
    assert hashlib.sha256(other.encode()).hexdigest()[:16] != fingerprint("v-zb", 4, 8)


if __name__ == "__main__":                  # regenerate from the current implementation
    cases = small_cases() + list(LARGE)
    data = {key(n, P, M): fingerprint(n, P, M) for n in NAMES for P, M in cases}
    DATA.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"wrote {len(data)} fingerprints to {DATA}")
