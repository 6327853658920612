"""Text block: markdown whose figures are placeholders filled from the first row of its named queries.

Spec: `markdown` with `{{query.column}}` or `{{query.column|format}}` (a format
may end in a noun that agrees with the number: `{{wk.sites|d site}}` reads
"1 site", "6 sites"), and `queries: {name: SQL}`. In the HTML export the markdown goes through a small,
deliberately limited converter (paragraphs, headings, lists, emphasis, links);
everything else is escaped text.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.formats import format_counted
from ...memory.spec import PLACEHOLDER_RE
from .base import Component, ComponentKind, RenderContext, Spec, escape

NAME = "text"


def new(cid: str, title: str, markdown: str, queries: dict[str, str]) -> dict[str, Any]:
    """A text block's spec."""
    return {"id": cid, "type": NAME, "title": title, "markdown": markdown, "queries": queries}


# --------------------------------------------------------------------------- render


def render(comp: Component, ctx: RenderContext) -> None:
    spec = comp.spec
    firsts: dict[str, dict[str, Any]] = {}
    for name, sql in (spec.get("queries") or {}).items():
        result = ctx.run(sql, 1)
        comp.text_results[name] = result
        firsts[name] = {k.lower(): v for k, v in (result.table.to_pylist()[0] if result.table.num_rows else {}).items()}

    def fill(match: re.Match) -> str:
        query, column, fmt = match.group(1), match.group(2).lower(), match.group(3)
        if query not in firsts:
            raise KeyError(f"placeholder {match.group(0)} names no query (queries: {', '.join(firsts) or 'none'})")
        if column not in firsts[query]:
            if not firsts[query]:
                return "—"
            raise KeyError(f"placeholder {match.group(0)}: query {query!r} has no column {match.group(2)!r}")
        return format_counted(firsts[query][column], fmt)

    comp.markdown = PLACEHOLDER_RE.sub(fill, spec["markdown"])


# --------------------------------------------------------------------------- what the checks read


def placeholders(spec: Spec) -> list[tuple[re.Match, tuple]]:
    """Each placeholder (group 1 the query, group 2 the column) and where it is written."""
    return [(match, ("markdown",)) for match in PLACEHOLDER_RE.finditer(spec.get("markdown") or "")]


def prose(spec: Spec) -> list[tuple[tuple, str]]:
    return [(("markdown",), spec.get("markdown", ""))]


# --------------------------------------------------------------------------- HTML export


def to_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    return markdown_to_html(comp.markdown)


IMAGE_RE = re.compile(r"!\[")


def inert_images(markdown: str) -> str:
    """The markdown with its images (`![alt](url)`, `![alt][ref]`) escaped to text, for a renderer that would draw them.

    An image makes every reader's browser call its URL, with a figure in it if a placeholder was; the
    HTML export has no images, and the app shows them as the text they are.
    """
    return IMAGE_RE.sub(r"!\\[", markdown)


HEADING_RE = re.compile(r"^(#{1,6})\s+(.+)$")
LIST_ITEM_RE = re.compile(r"^-\s+(.+)$")
LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
SAFE_URL_RE = re.compile(r"^(https?://|mailto:)", re.IGNORECASE)
BOLD_RE = re.compile(r"\*\*(?!\s)(.+?)(?<!\s)\*\*")
ITALIC_RE = re.compile(r"\*(?!\s)(.+?)(?<!\s)\*")
# The page has the dashboard title as h1 and component titles as h2, so "#" in a text block is h3.
HEADING_OFFSET = 2


def markdown_to_html(markdown: str) -> str:
    """Paragraphs, `#` headings, `- ` lists, **bold**, *italic* and [links](https://…); all else is escaped text."""
    blocks: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []

    def close_open_block() -> None:
        if paragraph:
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            blocks.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>")
            items.clear()

    for line in markdown.splitlines():
        line = line.strip()
        heading, item = HEADING_RE.match(line), LIST_ITEM_RE.match(line)
        if heading:
            close_open_block()
            level = min(len(heading.group(1)) + HEADING_OFFSET, 6)
            blocks.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif item:
            if paragraph:
                close_open_block()
            items.append(item.group(1))
        elif line:
            if items:
                close_open_block()
            paragraph.append(line)
        else:
            close_open_block()
    close_open_block()
    return "\n".join(blocks)


def _inline(text: str) -> str:
    """Escape the text, then add emphasis and links; a link with another scheme stays plain text."""
    out, position = [], 0
    for link in LINK_RE.finditer(text):
        out.append(_emphasis(escape(text[position : link.start()])))
        label, url = _emphasis(escape(link.group(1))), link.group(2)
        out.append(f'<a href="{escape(url)}">{label}</a>' if SAFE_URL_RE.match(url) else escape(link.group(0)))
        position = link.end()
    out.append(_emphasis(escape(text[position:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    return ITALIC_RE.sub(r"<em>\1</em>", BOLD_RE.sub(r"<strong>\1</strong>", escaped))


KIND = ComponentKind(NAME, render, to_html, placeholders=placeholders, prose=prose)
