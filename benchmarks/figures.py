"""docs/figures.json holds every measured figure the README and docs quote, with when, where
and by which command it was measured; the docs carry each figure between markers,

    <!--fig simulator.dualpipev_p64_ms-->38 ms<!--/fig-->

(invisible once rendered). Benchmarks run with ``--record`` put what they measured into the
file (``record``); ``python benchmarks/figures.py --write`` then rewrites every marked figure
in the docs from it, and ``--check`` (the docs test) lists the ones that differ. ``make bench``
does both, so a number in the docs is the last measurement, never a copy of it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures.json"
MARKER = re.compile(r"<!--fig (?P<key>[\w.-]+)-->(?P<text>.*?)<!--/fig-->", re.S)


def load(path: Path = FIGURES) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def machine() -> str:
    """Where a figure was measured: cores, load (the 5-minute average, which spans a
    benchmark's run) and CPython, the things that move it."""
    load5 = os.getloadavg()[1] if hasattr(os, "getloadavg") else float("nan")
    return (f"{os.cpu_count()} cores, load {load5:.1f}, {platform.machine()}, "
            f"CPython {platform.python_version()}")


def record(section: str, values: dict[str, str], by: str, path: Path = FIGURES) -> None:
    """Replace ``section``'s figures with ``values`` (already formatted as the docs print
    them), stamped with today's date, this machine and the command ``by``."""
    data = load(path)
    data[section] = {"measured": datetime.datetime.now(datetime.timezone.utc)
                     .strftime("%Y-%m-%d %H:%M UTC"), "by": by, "machine": machine(),
                     "values": dict(values)}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


def value(data: dict, key: str) -> str:
    """The text for ``section.name``; ``section.measured`` is the section's date and
    ``section.machine`` where it was measured."""
    section, _, name = key.partition(".")
    if section not in data:
        raise KeyError(f"no section {section!r} in docs/figures.json")
    if name == "measured":
        return data[section]["measured"].split(" ")[0]
    if name == "machine":
        return data[section]["machine"]
    if name not in data[section]["values"]:
        raise KeyError(f"no figure {name!r} in section {section!r}")
    return data[section]["values"][name]


def differences(data: dict | None = None) -> list[str]:
    """Every marked figure whose text is not the file's, as "doc:line key: 'a' != 'b'"."""
    data = load() if data is None else data
    out = []
    for doc in docs():
        text = doc.read_text()
        for m in MARKER.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            try:
                want = value(data, m["key"])
            except KeyError as e:
                out.append(f"{doc.relative_to(ROOT)}:{line} {m['key']}: {e}")
                continue
            if m["text"] != want:
                out.append(f"{doc.relative_to(ROOT)}:{line} {m['key']}: {m['text']!r} != "
                           f"{want!r}")
    return out


def write(data: dict | None = None) -> int:
    """Put the file's figures between the docs' markers; the number of docs changed."""
    data = load() if data is None else data
    changed = 0

    def fill(m) -> str:
        try:
            return f"<!--fig {m['key']}-->{value(data, m['key'])}<!--/fig-->"
        except KeyError:                     # not measured yet: --check names it
            return m.group(0)
    for doc in docs():
        text = doc.read_text()
        new = MARKER.sub(fill, text)
        if new != text:
            doc.write_text(new)
            changed += 1
    return changed


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the docs' marked figures")
    ap.add_argument("--check", action="store_true", help="list the figures that differ")
    a = ap.parse_args()
    if a.write:
        print(f"figures written into {write()} doc(s)")
    diff = differences()
    print("\n".join(diff) or "every marked figure equals docs/figures.json")
    sys.exit(1 if diff and a.check else 0)
