"""Plain data across the sandbox wall: what the student's code returns becomes JSON, and the
trusted side rebuilds it without ever running anything the student wrote.

``encode`` runs inside the sandbox (it may be tampered with: the trusted side assumes
nothing about what arrives). ``decode`` runs in the trusted grader: it only builds lists,
dicts, numbers, strings and a short allow-list of pplab value types from their fields.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from operator import index

#: the largest reply the trusted side reads from a sandbox, in bytes
MAX_REPLY = 8 << 20


class Unreadable:
    """A value the sandbox could not express as data (its repr, cut short): it compares
    equal to nothing, so a grader reports it as a wrong answer."""

    def __init__(self, text: str):
        self.text = str(text)[:200]

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return False

    __hash__ = None


def _tensor_data(x):
    return {"__tensor__": x.detach().cpu().tolist()}


def encode(x, depth: int = 0):
    """The student's value as JSON-able data (inside the sandbox)."""
    if depth > 40:
        return {"__repr__": "nested too deep"}
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        f = float(x)
        return f if math.isfinite(f) else {"__float__": repr(f)}
    if type(x).__name__ == "Tensor":
        return _tensor_data(x)
    if _is_schedule(x):
        return {"__obj__": "Schedule", "fields": _schedule_fields(x)}
    if hasattr(x, "_fields") and isinstance(x, tuple):          # a NamedTuple
        return {"__obj__": type(x).__name__,
                "fields": {f: encode(getattr(x, f), depth + 1) for f in x._fields}}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"__obj__": type(x).__name__,
                "fields": {f.name: encode(getattr(x, f.name), depth + 1)
                           for f in dataclasses.fields(x)}}
    if isinstance(x, tuple):
        return {"__tuple__": [encode(v, depth + 1) for v in x]}
    if isinstance(x, range):
        return {"__range__": [x.start, x.stop, x.step]}
    if isinstance(x, list):
        return [encode(v, depth + 1) for v in x]
    if isinstance(x, (set, frozenset)):
        return {"__set__": [encode(v, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
    try:
        text = repr(x)
    except Exception as e:                      # noqa: BLE001 — a student's broken __repr__
        text = f"<unprintable {type(x).__name__}: {e}>"
    return {"__repr__": text[:200]}


def _is_schedule(x) -> bool:
    """pplab's Schedule or a subclass (a generator's KeyedSchedule): by class, not by name,
    so a look-alike class the student named Schedule goes as its repr."""
    from ..ir import Schedule
    return isinstance(x, Schedule)


def _schedule_fields(s) -> dict:
    return {"ranks": [list(r) for r in s.rank_texts()], "stage_to_rank": list(s.stage_to_rank),
            "M": int(s.M), "name": str(s.name), "V": int(s.V), "copies": int(s.copies)}


def schedule_from_fields(f: dict):
    """A Schedule from its fields; whole numbers must be ints and op texts strings (what
    else arrives raises, and the caller makes it an Unreadable)."""
    from ..ir import Schedule
    ranks = [[str(_text(t)) for t in row] for row in f["ranks"]]
    return Schedule.from_text(ranks, stage_to_rank=[index(r) for r in f["stage_to_rank"]],
                              num_microbatches=index(f["M"]), name=str(_text(f["name"])),
                              virtual=index(f["V"]), copies=index(f["copies"]))


def _text(x) -> str:
    if not isinstance(x, str):
        raise TypeError(f"expected text, got {type(x).__name__}")
    return x


def _value_types() -> dict:
    """Types the trusted side rebuilds from fields; anything else stays an Unreadable."""
    from ..lower import Message
    from ..exercises.memory import Budget
    from ..memory import ParallelConfig
    return {"Message": Message, "ParallelConfig": ParallelConfig, "Budget": Budget}


def decode(x, depth: int = 0):
    """Rebuild data from the sandbox (trusted side): never more than the allow-list."""
    if depth > 60:
        return Unreadable("nested too deep")
    if isinstance(x, list):
        return [decode(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    if "__tuple__" in x:
        return tuple(decode(v, depth + 1) for v in x["__tuple__"])
    if "__set__" in x:
        try:
            return {decode(v, depth + 1) for v in x["__set__"]}
        except TypeError:
            return Unreadable("an unhashable set")
    if "__dict__" in x:
        try:
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in x["__dict__"]}
        except (TypeError, ValueError):
            return Unreadable("a dict that cannot be rebuilt")
    if "__range__" in x:
        try:
            return range(*(int(v) for v in x["__range__"][:3]))
        except (TypeError, ValueError):
            return Unreadable("a range that cannot be rebuilt")
    if "__float__" in x:
        return float(x["__float__"]) if x["__float__"] in ("nan", "inf", "-inf") \
            else Unreadable(x["__float__"])
    if "__tensor__" in x:
        import torch
        try:
            return torch.tensor(x["__tensor__"], dtype=torch.float64).float()
        except (TypeError, ValueError, RuntimeError):
            return Unreadable("a tensor that cannot be rebuilt")
    if "__obj__" in x:
        return _decode_obj(x, depth)
    return Unreadable(str(x.get("__repr__", "unknown data"))[:200])


def _decode_obj(x, depth):
    name, fields = x.get("__obj__"), x.get("fields")
    if not isinstance(fields, dict):
        return Unreadable(f"{name} without fields")
    fields = {str(k): decode(v, depth + 1) for k, v in fields.items()}
    try:
        if name == "Schedule":
            return schedule_from_fields(fields)
        cls = _value_types().get(name)
        return cls(**fields) if cls else Unreadable(f"a {name} object")
    except Exception as e:                      # noqa: BLE001 — bad fields are a wrong answer
        return Unreadable(f"a {name} that cannot be rebuilt ({type(e).__name__})")
