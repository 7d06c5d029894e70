"""What the formgrader shows of a submission carries nothing a student wrote that could run.

nbgrader's formgrader renders a submission with nbconvert's HTMLExporter on the hub's own
origin, in the browser of the instructor signed in as the grader. Its template turns every
markdown cell into HTML with the raw HTML left in, so an ``<img onerror=…>``, a ``<script>``
or a ``javascript:`` link a student typed would run there, with the grader's rights. The
kit's grader configuration (``jupyter/grader/jupyter_server_config.json``) replaces that
template filter with :func:`markdown2html`, which keeps only an allow-list of tags and
attributes (nh3, the Rust ammonia sanitiser; the content of a script or style is dropped),
and sets ``HTMLExporter.sanitize_html`` so that outputs are cleaned by nbconvert too
(scripts and widgets in outputs are not shown). No style at all: a student's CSS could hide
or fake parts of the grading form.
"""
from __future__ import annotations

import nh3
from nbconvert.filters.markdown import markdown2html as _render

TAGS = set("""a abbr b blockquote br code dd del div dl dt em h1 h2 h3 h4 h5 h6 hr i img kbd li
ol p pre s span strong sub sup table tbody td th thead tr ul""".split())
ATTRIBUTES = {"*": {"class", "title"}, "a": {"href"}, "img": {"src", "alt"},
              "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"}}
SCHEMES = {"http", "https", "mailto"}


def markdown2html(source: str) -> str:
    """A markdown cell as HTML with only harmless tags and attributes, links and images
    only to http, https, mailto or a relative address."""
    return nh3.clean(_render(source), tags=TAGS, attributes=ATTRIBUTES, url_schemes=SCHEMES,
                     link_rel="noopener noreferrer")
