"""What a student reads never talks about how the course was made, and names its sources
(issue 30): no "seed", "source documents", "the write-up", "an earlier version", "the machine
this course was written on", line numbers of notes the course does not ship; and "the
article", "the lecture" only once the lesson has named that article or lecture by its title
(pplab.course.sources). Read in the order a student meets it: every cell's text and saved
output, each question's prompt, options, feedback and id where it is asked, each reveal's
text where it is printed; the README and the exercises too.
"""
import re
from pathlib import Path

import nbformat
import pytest
from course_pending import lesson_params
from lesson_run import measured

from pplab.course.bank import LESSONS, get
from pplab.course.sources import SOURCES, sources_for

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))}
EXERCISES = sorted((ROOT / "solutions").glob("*/*.ipynb"))
ASK = re.compile(r'ask\("([^"]+)"\)')

#: words about how the course was made: never in what a student reads
MAKING = [re.compile(p, re.I) for p in (
    r"\b(a|the|our|this|each|every)\s+seeds?\b", r"\bseed_\w+", r"\bseeds/",
    r"\bseeds?\s+(files?|documents?|statements?|claims?|errors?|material|sections?)\b",
    r"\bsource documents?\b", r"\b(among|in|from)\s+the\s+(course's\s+)?sources\b",
    r"\bwrite-?ups?\b",
    r"\b(earlier|previous|older)\s+(version|draft|edition)s?\b",
    r"\b(machine|computer|laptop|server)s?\s+(that\s+)?(this|the)\s+course\s+(was|is)\s+"
    r"(written|built|made|developed|tested)",
    r"\b(this|the)\s+course's\s+(own\s+)?machines?\b",
    r"\blines?\s+\d+\b",
    r"\bwidely\s+(read|shared|cited|quoted)\b",
    r"\bpopular\s+(posts?|blogs?|articles?|write-?ups?|summar(y|ies))\b",
    r"\bsummary\s+among\b",
)]
#: words that refer back to a source: fine once the lesson has named it
NOUN = re.compile(r"\b(?:(?:the|a|an|this|that|its|their|same|whose)\s+(?:[\w-]+\s+){0,2}?"
                  r"(article|post|blog|lecture|notes|hands-on|guide|documentation|summary)"
                  r"|(article|post|blog|lecture|summary)'s)(?![\w-])", re.I)
ID_WORDS = re.compile(r"seed|source|write|blog|post\b|article|version|machine|line-?\d", re.I)


def _question_text(qid: str) -> str:
    q = get(qid)
    parts = [q.id, q.prompt, q.explain, q.hint, q.source]
    parts += [t for o in q.options for t in (o.text, o.feedback)]
    parts += [fb for _, fb in q.traps]
    return "\n".join(parts)


def lesson_texts(path: Path):
    """(where, text) in reading order: cell sources and saved outputs, with each asked
    question's words and the measurement its commit shows, where it is asked."""
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        yield f"cell {i}", cell.source
        for out in cell.get("outputs", []):
            yield f"cell {i} output", out.get("text", "") + str(out.get("data", {}).get(
                "text/plain", ""))
        for qid in ASK.findall(cell.source):
            yield f"cell {i} question {qid}", _question_text(qid)
            yield f"cell {i} measurement {qid}", measured(qid)


def problems(texts) -> list[str]:
    """Words about the course's making, and sources referred to before being named."""
    found, named = [], set()
    texts = list(texts)
    for where, text in texts:
        named |= {s.title for s in SOURCES if any(n in text for n in s.names)}
        flat = " ".join(text.split())
        for pattern in MAKING:
            found += [f"{where}: {m.group(0)!r} in …{flat[max(0, m.start() - 40):m.end() + 40]}…"
                      for m in pattern.finditer(flat)]
        for m in NOUN.finditer(flat):
            noun = (m.group(1) or m.group(2)).lower()
            if not any(s.title in named for s in sources_for(noun)):
                found.append(f"{where}: unnamed source {m.group(0)!r} in "
                             f"…{flat[max(0, m.start() - 40):m.end() + 40]}…")
        if " question " in where:
            qid = where.split(" question ")[1]
            if ID_WORDS.search(qid):
                found.append(f"{where}: the id {qid!r} talks about the course's making")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("lesson", lesson_params("words", LESSONS))
def test_lesson_says_nothing_about_its_making_and_names_its_sources(lesson):
    found = problems(lesson_texts(NOTEBOOKS[lesson]))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", EXERCISES, ids=[p.parent.name for p in EXERCISES])
def test_exercise_says_nothing_about_its_making(path):
    found = problems(lesson_texts(path))
    assert not found, "\n".join(found)


def test_readme_says_nothing_about_the_course_making():
    found = problems([("README.md", (ROOT / "README.md").read_text())])
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, bad", [
    ("A seed to correct.", True), ("the seed's DP 16", True), ("Line 213 of the notes", True),
    ("a contradiction in the course's source documents", True), ("the write-up says", True),
    ("An earlier version of this lesson said so", True), ("a widely read post lists", True),
    ("the machine this course was written on", True), ("On the course's machine this printed",
                                                        True),
    ("The blog article draws it", True), ("the lecture's own example", True),
    ("the same seed, data and optimizer", False), ("TinyGPT(TinyConfig(), seed=0)", False),
    ("It seeds Zero Bubble's list scheduler", False), ("rank 1 posts each receive", False),
    ("its optimizer post-validation", False),
    ("The CS336 lecture notes give 7/15; the lecture's own formula says 7/8", False),
])
def test_the_check_catches_the_words(text, bad):
    assert bool(problems([("cell 0", text)])) == bad, problems([("cell 0", text)])


def test_ids_are_checked():
    assert problems([("cell 3 question 14.q-seed-105", "")])
