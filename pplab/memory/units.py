"""Sizes and durations in the unit that fits the number: 512 kB, 1.23 MB, 95.1 GB; 850 µs,
12.3 ms, 86.9 s. A tiny model's activations are kilobytes: printed in GB they would read
"0.00 GB" and hide every difference. Decimal units throughout (1 GB = 10⁹ bytes, the ZeRO
paper's convention)."""
from __future__ import annotations

BYTE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _scaled(value: float, units, digits: int) -> str:
    """``value`` in the largest unit it reaches (the smallest unit below all of them)."""
    scale, name = next(((s, n) for s, n in units if abs(value) >= s), units[-1])
    text = f"{value / scale:#.{digits}g}".rstrip(".")     # 12.0 ms: the digits it has
    if "e" in text:                          # 1234 s, not 1.23e+03 s
        text = f"{value / scale:.0f}"
    return f"{text} {name}"


def fmt_bytes(n: float, digits: int = 3, exact: bool = False) -> str:
    """``n`` bytes with ``digits`` significant digits in B, kB, MB, GB or TB; ``exact``
    drops trailing zeros (a GPU's "80 GB", where "80.0 GB" would suggest a measurement)."""
    if exact:
        scale, name = next(((s, u) for s, u in BYTE_UNITS if abs(n) >= s), (1, "B"))
        return f"{n / scale:g} {name}"
    if n == 0:
        return "0 B"
    if abs(n) < 1e3:
        return f"{n:.{digits}g} B"
    return _scaled(n, BYTE_UNITS, digits)


def fmt_seconds(t: float, digits: int = 3) -> str:
    """``t`` seconds with ``digits`` significant digits in ns, µs, ms or s."""
    if t == 0:
        return "0 s"
    return _scaled(t, TIME_UNITS, digits)


def fmt_count(n: float, digits: int = 3) -> str:
    """A count such as parameters: 435k, 8.03B, 70.6B (B = 10⁹, the models' own naming)."""
    for scale, name in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.{digits}g}{name}"
    return f"{n:.{digits}g}"
