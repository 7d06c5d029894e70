"""Plain data across the sandbox wall: what the student's code returns becomes JSON, and the
trusted side rebuilds it without ever running anything the student wrote.

``encode`` runs inside the sandbox (it may be tampered with: the trusted side assumes
nothing about what arrives). It reads the value with the same ``normalise`` the public
checks use, so a generator, a numpy array or a ``Decimal`` is read alike in both places.
``decode`` runs in the trusted grader: it first measures what arrived against caps on size,
depth and length (a range's length by arithmetic, never by walking it) and refuses with the
reason before building anything; then it builds only lists, dicts, numbers, strings,
tensors and a short allow-list of pplab value types from their fields.
"""
from __future__ import annotations

import dataclasses
import json
import math
from operator import index

from ...exercises.normalise import Unreadable, normalise

#: the largest reply the trusted side reads from a sandbox, in bytes
MAX_REPLY = 8 << 20

#: decoding caps, all checked on the JSON before anything is built (docs/teaching.md)
MAX_NODES = 2_000_000       # values in one answer, the lengths of its ranges counted in
MAX_LEN = 1_000_000         # items in one list, set, dict or range
MAX_DEPTH = 100             # JSON nesting
MAX_TEXT = 1_000_000        # characters in one string
MAX_INT_BITS = 256          # the size of one whole number
MAX_INT_DIGITS = 78         # its decimal digits (2**256 has 78)

#: tensor dtypes rebuilt on the trusted side; a tensor sent without one is float32
TENSOR_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool")

__all__ = ["encode", "decode", "read_reply", "Unreadable", "MAX_REPLY", "schedule_from_fields"]


# ---- inside the sandbox -------------------------------------------------------------------

def encode(x, depth: int = 0):
    """The student's value as JSON-able data, read first by :func:`normalise` (the public
    checks read answers with the same function)."""
    return _encode(normalise(x), depth)


def _encode(x, depth: int):
    if depth > 40:
        return {"__repr__": "nested too deep"}
    if x is None or isinstance(x, (bool, str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, Unreadable):
        return {"__repr__": x.text}
    if type(x).__name__ == "Tensor":
        return {"__tensor__": x.tolist(), "dtype": str(x.dtype).rpartition(".")[2]}
    if _is_schedule(x):
        return {"__obj__": "Schedule", "fields": _schedule_fields(x)}
    if hasattr(x, "_fields") and isinstance(x, tuple):          # a NamedTuple
        return _obj(x, list(x._fields), depth)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _obj(x, [f.name for f in dataclasses.fields(x)], depth)
    if isinstance(x, tuple):
        return {"__tuple__": [_encode(v, depth + 1) for v in x]}
    if isinstance(x, range):
        return {"__range__": [x.start, x.stop, x.step]}
    if isinstance(x, list):
        return [_encode(v, depth + 1) for v in x]
    if isinstance(x, (set, frozenset)):
        return {"__set__": [_encode(v, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {"__dict__": [[_encode(k, depth + 1), _encode(v, depth + 1)]
                             for k, v in x.items()]}
    return {"__repr__": _repr(x)}


def _obj(x, names: list, depth: int) -> dict:
    """A value object by its fields, each read by ``normalise`` (a field may hold numpy)."""
    return {"__obj__": type(x).__name__,
            "fields": {f: _encode(normalise(getattr(x, f)), depth + 1) for f in names}}


def _repr(x) -> str:
    try:
        text = repr(x)
    except Exception as e:                      # noqa: BLE001 — a student's broken __repr__
        text = f"<unprintable {type(x).__name__}: {e}>"
    return text[:200]


def _is_schedule(x) -> bool:
    """pplab's Schedule or a subclass: by class, not by name,
    so a look-alike class the student named Schedule goes as its repr."""
    from ...ir import Schedule
    return isinstance(x, Schedule)


def _schedule_fields(s) -> dict:
    return {"ranks": [list(r) for r in s.rank_texts()], "stage_to_rank": list(s.stage_to_rank),
            "M": int(s.M), "name": str(s.name), "V": int(s.V), "copies": int(s.copies)}


# ---- in the trusted grader: the budget ----------------------------------------------------

class OverBudget(Exception):
    """What arrived breaks a decoding cap (the message says which)."""


def read_reply(line: bytes | str) -> dict:
    """A sandbox's reply line as a dict. Nesting too deep for the JSON reader becomes a
    refused value (that task scores 0 with the reason) rather than an error that stops the
    grader; what is not JSON raises ValueError, as ``json.loads`` does."""
    try:
        reply = json.loads(line, parse_int=_whole_number)
    except RecursionError:
        why = "the answer is nested too deeply to read"
        return {"value": {"__repr__": why}, "refused": why,
                "outputs": [{"output_type": "error", "ename": "Refused", "evalue": why}]}
    if not isinstance(reply, dict):
        raise ValueError("a reply is a JSON object")
    return reply


def _whole_number(text: str):
    """A whole number as JSON sent it; one far past the cap stays a refused value (Python
    would refuse to read one of over 4,300 digits, and that error would end the sandbox)."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return {"__repr__": f"refused: a whole number of {len(text.lstrip('-'))} digits; the "
                            f"cap is {MAX_INT_BITS} bits"}
    return int(text)


def _range_length(spec) -> int:
    """A __range__'s length by arithmetic (never by walking it); raises on a bad spec."""
    start, stop, step = (index(v) for v in spec[:3])
    if step == 0:
        raise OverBudget("a range with step 0")
    for v in (start, stop, step):
        _whole(v)
    return max(0, (stop - start + step - (1 if step > 0 else -1)) // step)


def _whole(v: int) -> None:
    if v.bit_length() > MAX_INT_BITS:
        raise OverBudget(f"a whole number of {v.bit_length()} bits; the cap is {MAX_INT_BITS}")


def _count(x, n: int) -> int:
    """Add ``x``'s own size to the running total; raise past any cap."""
    if isinstance(x, str):
        if len(x) > MAX_TEXT:
            raise OverBudget(f"a text of {len(x)} characters; the cap is {MAX_TEXT}")
    elif isinstance(x, int) and not isinstance(x, bool):
        _whole(x)
    elif isinstance(x, (list, dict)) and len(x) > MAX_LEN:
        raise OverBudget(f"a container of {len(x)} items; the cap is {MAX_LEN}")
    elif isinstance(x, dict) and "__range__" in x:
        try:
            length = _range_length(x["__range__"])
        except (TypeError, ValueError):
            return n + 1                        # a malformed range: refused when built
        if length > MAX_LEN:
            raise OverBudget(f"a range of {length} items; the cap is {MAX_LEN}")
        n += length
    n += 1
    if n > MAX_NODES:
        raise OverBudget(f"more than {MAX_NODES} values")
    return n


def measure(x) -> None:
    """Walk the raw JSON once, without recursion and without building anything, and raise
    :class:`OverBudget` at the first cap broken: size, nesting, length, text, numbers."""
    n, stack = 0, [(x, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise OverBudget(f"nested deeper than {MAX_DEPTH} levels")
        n = _count(v, n)
        if isinstance(v, list):
            stack.extend((c, depth + 1) for c in v)
        elif isinstance(v, dict):
            stack.extend((c, depth + 1) for c in v.values())
            n = _count_keys(v, n)


def _count_keys(d: dict, n: int) -> int:
    for k in d:
        n = _count(k, n)
    return n


# ---- in the trusted grader: building ------------------------------------------------------

def decode(x, depth: int = 0):
    """Rebuild data from the sandbox (trusted side): the budget first, then never more
    than the allow-list. A broken cap is an :class:`Unreadable` with the reason."""
    try:
        measure(x)
    except OverBudget as e:
        return Unreadable(f"refused: {e}")
    return _decode(x, depth)


def schedule_from_fields(f: dict):
    """A Schedule from its fields; whole numbers must be ints and op texts strings (what
    else arrives raises, and the caller makes it an Unreadable)."""
    from ...ir import Schedule
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
    from ...exercises.memory import Budget
    from ...ir import Action
    from ...lower import Message
    from ...memory import ParallelConfig
    return {"Action": Action, "Message": Message, "ParallelConfig": ParallelConfig,
            "Budget": Budget}


def _decode(x, depth: int):
    if depth > MAX_DEPTH:
        return Unreadable("nested too deep")
    if isinstance(x, list):
        return [_decode(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    if "__tuple__" in x:
        return tuple(_decode(v, depth + 1) for v in _list(x["__tuple__"]))
    if "__set__" in x:
        try:
            return {_decode(v, depth + 1) for v in _list(x["__set__"])}
        except TypeError:
            return Unreadable("an unhashable set")
    if "__dict__" in x:
        try:
            return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in x["__dict__"]}
        except (TypeError, ValueError):
            return Unreadable("a dict that cannot be rebuilt")
    return _decode_tagged(x, depth)


def _list(x) -> list:
    return x if isinstance(x, list) else []


def _decode_tagged(x: dict, depth: int):
    if "__range__" in x:
        try:
            return range(*(index(v) for v in x["__range__"][:3]))
        except (TypeError, ValueError):
            return Unreadable("a range that cannot be rebuilt")
    if "__float__" in x:
        return float(x["__float__"]) if x["__float__"] in ("nan", "inf", "-inf") \
            else Unreadable(x["__float__"])
    if "__tensor__" in x:
        return _decode_tensor(x)
    if "__obj__" in x:
        return _decode_obj(x, depth)
    return Unreadable(str(x.get("__repr__", "unknown data"))[:200])


def _decode_tensor(x: dict):
    """A tensor in the dtype it was sent with (float64 stays float64)."""
    import torch
    dtype = x.get("dtype", "float32")
    if dtype not in TENSOR_DTYPES:
        return Unreadable(f"a tensor of dtype {str(dtype)[:40]}")
    try:
        return torch.tensor(x["__tensor__"], dtype=getattr(torch, dtype))
    except (TypeError, ValueError, RuntimeError, OverflowError):
        return Unreadable("a tensor that cannot be rebuilt")


def _decode_obj(x, depth):
    name, fields = x.get("__obj__"), x.get("fields")
    if not isinstance(fields, dict):
        return Unreadable(f"{name} without fields")
    fields = {str(k): _decode(v, depth + 1) for k, v in fields.items()}
    try:
        if name == "Schedule":
            return schedule_from_fields(fields)
        cls = _value_types().get(name)
        return cls(**fields) if cls else Unreadable(f"a {name} object")
    except Exception as e:                      # noqa: BLE001 — bad fields are a wrong answer
        return Unreadable(f"a {name} that cannot be rebuilt ({type(e).__name__})")
