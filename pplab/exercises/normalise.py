"""One reading of an answer, for the public check and for the grade alike.

A student's function may honestly return a generator, a tuple, a numpy array or scalar, a
torch tensor, a ``Decimal`` or a ``Fraction``, or pplab's own objects. The public check (in
the student's kernel) and the grade (in the trusted grader, after the answer crossed the
sandbox wall as data) must read all of these the same way, or an answer the student saw
pass could fail, or the other way round. So both go through :func:`normalise`:
``pplab.grading.untrusted.wire.encode`` calls it before encoding, and the checks call
:func:`as_data` (``normalise`` plus tensors as plain lists) on what they receive, raw or
decoded.

Decisions: a ``Fraction`` or ``Decimal`` counts as its value (an int when whole, else the
nearest float; the checks compare reals to 1e-9 relative, far above that rounding); numpy
and torch values become Python numbers and lists, tensors keep their dtype while they cross
the wire; generators and iterators are read into a list, at most ``MAX_LEN`` items.
"""
from __future__ import annotations

import collections
import collections.abc as abc
import itertools
import numbers
import sys
from decimal import Decimal
from fractions import Fraction

#: the most items one container (list, iterator, array) may hold
MAX_LEN = 1_000_000
#: the deepest nesting read (lists in lists ...)
MAX_DEPTH = 40
#: the most ranks, and characters per rank, of a hand-written schedule that is read
MAX_ROWS = 64
MAX_ROW_TEXT = 20_000
#: a Fraction or Decimal this large is read as a float, never as a huge int
_WHOLE = 10 ** 30


class Unreadable:
    """A value that could not be read as data (why, cut short): it compares equal to
    nothing, so a check reports it as a wrong answer with that reason."""

    def __init__(self, text: str):
        self.text = str(text)[:200]

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return False

    __hash__ = None


def _module(name: str):
    """A library the student already imported (never imported here: no cost, no side
    effects when the answer holds none of its values)."""
    return sys.modules.get(name)


def _number(x):
    """Exact numbers as int when whole; other reals as float. None if ``x`` is no number."""
    if isinstance(x, bool):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, Decimal) and not x.is_finite():
        return float(x)
    if isinstance(x, (Fraction, Decimal)):
        whole = abs(x) < _WHOLE and x == int(x)
        return int(x) if whole else float(x)
    if isinstance(x, numbers.Real):
        return float(x)
    return None


def _array(x, depth: int, tensors: bool):
    """A numpy array as lists (a 0-d array as its one value); checked by size first."""
    if x.size > MAX_LEN:
        return Unreadable(f"an array of {x.size} values; the most that is read is {MAX_LEN}")
    return _walk(x.tolist(), depth, tensors)


def _tensor(x, depth: int, tensors: bool):
    """A torch tensor, detached and on the CPU with its dtype kept; as lists when the
    caller wants plain data."""
    if x.numel() > MAX_LEN:
        return Unreadable(f"a tensor of {x.numel()} values; the most that is read is {MAX_LEN}")
    x = x.detach().cpu()
    return _walk(x.tolist(), depth, tensors) if tensors else x


def _items(x):
    """At most MAX_LEN + 1 items of an iterable (one more tells it was too long)."""
    return list(itertools.islice(x, MAX_LEN + 1))


def _walk(x, depth: int, tensors: bool):
    if depth > MAX_DEPTH:
        return Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    if x is None or type(x) in (str, bool, int, float):
        return x
    np, torch = _module("numpy"), _module("torch")
    if np is not None and isinstance(x, np.ndarray):
        return _array(x, depth, tensors)
    if np is not None and isinstance(x, np.generic):
        return _walk(x.item(), depth, tensors)
    if torch is not None and isinstance(x, torch.Tensor):
        return _tensor(x, depth, tensors)
    if isinstance(x, str):
        return str(x)
    number = _number(x)
    if number is not None:
        return number
    return _container(x, depth, tensors)


def _container(x, depth: int, tensors: bool):
    """Lists, tuples, sets and dicts with their items read; iterators and views read into
    a list; anything else (pplab's objects, a range, the unknown) as it is."""
    down = depth + 1
    if isinstance(x, dict):
        if len(x) > MAX_LEN:
            return Unreadable(f"a dict of {len(x)} items; the most that is read is {MAX_LEN}")
        return {_walk(k, down, tensors): _walk(v, down, tensors) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)) and not hasattr(x, "_fields"):
        if len(x) > MAX_LEN:
            return Unreadable(f"{len(x)} items; the most that is read is {MAX_LEN}")
        items = [_walk(v, down, tensors) for v in x]
        kind = type(x) if type(x) in (list, tuple, set, frozenset) else list
        return items if kind is list else _rebuilt(kind, items)
    if isinstance(x, (abc.Iterator, abc.MappingView, collections.deque)):
        items = _items(x)
        if len(items) > MAX_LEN:
            return Unreadable(f"more than {MAX_LEN} items; the most that is read is {MAX_LEN}")
        return [_walk(v, down, tensors) for v in items]
    return x


def _rebuilt(kind, items):
    try:
        return kind(items)
    except TypeError:                           # a set of lists: unhashable
        return Unreadable(f"a {kind.__name__} of unhashable items")


def normalise(x):
    """The answer as canonical data: what ``wire.encode`` sends and what a check reads.
    Tensors stay tensors (their dtype kept) for the checks that compare tensors."""
    return _walk(x, 0, tensors=False)


def as_data(x):
    """:func:`normalise`, with tensors as plain numbers and lists: what the checks of
    numeric and text answers compare."""
    return _walk(x, 0, tensors=True)


def schedule_rows(rows) -> list:
    """A hand-written schedule as one text per rank, from text with a line per rank, rows
    of text, rows of actions or tokens, or a pplab Schedule (read as its rank texts)."""
    rows = as_data(rows)
    if hasattr(rows, "rank_texts") and callable(rows.rank_texts):
        rows = rows.rank_texts()
    if isinstance(rows, str):
        rows = [ln for ln in rows.strip().splitlines() if ln.strip()]
    if not isinstance(rows, (list, tuple)):
        raise AssertionError(f"expected your schedule as text, one string of actions per "
                             f"rank, got {type(rows).__name__}: {rows!r:.200}")
    rows = [_row_text(r) for r in rows[:MAX_ROWS + 1]]
    long = next((i for i, r in enumerate(rows) if len(str(r)) > MAX_ROW_TEXT), None)
    if len(rows) > MAX_ROWS or long is not None:    # the parser is not linear on any text
        raise AssertionError(f"your schedule is longer than any exercise needs (at most "
                             f"{MAX_ROWS} ranks of {MAX_ROW_TEXT} characters): not read")
    return rows


def _row_text(row):
    """One rank's actions as text (a row of actions or tokens joined by spaces)."""
    if isinstance(row, (list, tuple)):
        return " ".join(str(t) for t in row)
    return row


__all__ = ["normalise", "as_data", "schedule_rows", "Unreadable", "MAX_LEN", "MAX_DEPTH"]
