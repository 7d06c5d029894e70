"""The sources the lessons cite, by the title a student can look up.

Lessons name a source by its title (a paper with its section or table, an article or lecture
by its title, a documentation page by its name) before they refer back to it as "the
article" or "the lecture". ``NOUNS`` says which words refer back to which sources; the course's
text test (tests/notebooks/test_course_words.py) checks every such word has its source named
earlier in the same lesson.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One cited work: how lessons name it, and the words that refer back to it."""
    title: str
    by: str
    names: tuple[str, ...]           # any of these in the text names the source
    nouns: tuple[str, ...]           # "the article", "the post": words that refer back to it


SOURCES = (
    Source("Pipeline Parallelism: From GPipe to DualPipe — Eliminating the Bubble",
           "an article in the series “Inference Optimization Timeline” (part 43)",
           ("From GPipe to DualPipe",), ("article", "post", "blog")),
    Source("Language Modeling from Scratch · CS336 · Lecture 8: Parallelism II: Pipeline & FSDP",
           "engineeringmaxxing.com, an independent lesson page on Stanford CS336's lecture 8 "
           "(not Stanford's own notes)", ("CS336",), ("lecture", "notes", "page")),
    Source("Pipeline Parallelism (PP) & Virtual PP", "a hands-on guide to Megatron-LM",
           ("Pipeline Parallelism (PP) & Virtual PP",), ("hands-on", "guide")),
    Source("KempnerForge documentation: Pipeline parallelism", "the Kempner Institute",
           ("KempnerForge",), ("documentation",)),
)


def sources_for(noun: str) -> list[Source]:
    """The sources ``noun`` ("article", "lecture", ...) may refer back to."""
    return [s for s in SOURCES if noun.lower() in s.nouns]
