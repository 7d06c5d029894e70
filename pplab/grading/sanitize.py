"""Feedback pages without active content: what the instructor and TAs open carries no script
a student wrote.

nbconvert copies a markdown cell's raw HTML into the page it renders, so a ``<script>``, an
``<img onerror=...>`` or a ``javascript:`` link in a submission would run in the browser of
whoever opens the feedback. :func:`clean_html` re-writes a page from a parse (the standard
library's ``html.parser``): only allow-listed tags and attributes come out, re-quoted and
re-escaped by this module, so what the browser reads is what was checked. Scripts (nbgrader's
own MathJax loader included: formulas then show as TeX), frames, objects, forms and event
handlers are gone; ``href``/``src`` keep only http(s), mailto, relative links and inline
images. Styles (nbgrader's layout) are kept.
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

#: tags written back (with allowed attributes only); any other tag is dropped, its text kept
TAGS = frozenset("""
a abbr article aside b blockquote body br caption cite code col colgroup dd del details dfn
div dl dt em figcaption figure footer h1 h2 h3 h4 h5 h6 head header hr html i img ins kbd li
link main mark meta nav ol p pre q s samp section small span strong style sub summary sup
table tbody td tfoot th thead time title tr tt u ul var wbr""".split())

#: tags dropped with everything inside them
DROP_CONTENT = frozenset("""script iframe object embed applet frame frameset noscript noembed
noframes template svg math xmp plaintext textarea select button""".split())

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())

ATTRS = frozenset("""class id title alt width height colspan rowspan align valign lang dir
name rel type charset start reversed open datetime span scope headers role tabindex
href src style""".split())

URL_ATTRS = frozenset(("href", "src"))
SAFE_SCHEMES = frozenset(("http", "https", "mailto"))
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp)[;,]", re.I)
SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")
UNSAFE_CSS = re.compile(r"expression\s*\(|javascript\s*:|vbscript\s*:|behavior\s*:|"
                        r"-moz-binding|@import", re.I)
IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]+")


def safe_url(value: str, attr: str) -> bool:
    """Whether a link or source may stay: relative, http(s), mailto, or an inline image."""
    bare = IGNORED_IN_URLS.sub("", value).lower()
    if attr == "src" and IMAGE_DATA.match(bare):
        return True
    scheme = SCHEME.match(bare)
    return scheme is None or scheme.group(1) in SAFE_SCHEMES


def _keep_attr(tag: str, name: str, value: str | None) -> bool:
    if name not in ATTRS or value is None and name not in ("open", "reversed"):
        return False
    if name in URL_ATTRS:
        return safe_url(value, name)
    if name == "style":
        return not UNSAFE_CSS.search(IGNORED_IN_URLS.sub("", value))
    return not (tag == "link" and name == "rel" and value.lower() != "stylesheet")


def _keep_tag(tag: str, attrs: dict) -> bool:
    if tag == "meta":                       # charset and viewport only: no http-equiv refresh
        return set(attrs) <= {"charset", "name", "content"} and \
            attrs.get("name", "viewport") == "viewport"
    if tag == "link":
        return (attrs.get("rel") or "").lower() == "stylesheet" and "href" in attrs
    return True


def _safe_css(css: str) -> str:
    """A style sheet with its script-capable constructs defused in place (the rest of the
    layout stays), and no way to close the ``<style>`` element early."""
    return UNSAFE_CSS.sub("removed-", css).replace("</", "<\\/")


class _Cleaner(HTMLParser):
    """Re-writes a page tag by tag, keeping only what the allow-lists name."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skipping: list[str] = []       # open tags whose content is being dropped
        self.in_style = False

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype") and not self.skipping:
            self.out.append("<!DOCTYPE html>")

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs, closed=True)

    def _start(self, tag: str, attrs, closed: bool) -> None:
        if self.skipping or tag in DROP_CONTENT:
            if not closed and tag not in VOID:
                self.skipping.append(tag)
            return
        kept = {k: v for k, v in attrs if _keep_attr(tag, k, v)}
        if tag not in TAGS or not _keep_tag(tag, dict(attrs)):
            return
        text = "".join(f' {k}' if v is None else f' {k}="{html.escape(v, quote=True)}"'
                       for k, v in kept.items())
        self.out.append(f"<{tag}{text}>")
        if tag == "style" and not closed:
            self.in_style = True

    def handle_endtag(self, tag: str) -> None:
        if self.skipping:
            if tag in self.skipping:
                while self.skipping.pop() != tag:
                    pass
            return
        if tag == "style":
            self.in_style = False
        if tag in TAGS and tag not in VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.in_style:                   # raw CSS: it must not close the element early
            self.out.append(_safe_css(data))
        else:
            self.out.append(html.escape(data, quote=False))


def clean_html(text: str) -> str:
    """``text`` (an HTML page) with no active content left in it."""
    cleaner = _Cleaner()
    cleaner.feed(text)
    cleaner.close()
    return "".join(cleaner.out)


def clean_folder(folder: Path) -> int:
    """Clean every ``.html`` file under ``folder`` in place (links are not followed: they are
    removed); return how many pages were cleaned."""
    n = 0
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_symlink():
            path.unlink()
        elif path.is_file() and path.suffix.lower() in (".html", ".htm"):
            path.write_text(clean_html(path.read_text(errors="replace")))
            n += 1
    return n
