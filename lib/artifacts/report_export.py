"""Export a rendered report: one standalone HTML document for print, and its PDF printed by headless Chromium.

The HTML is the dashboard export's (lib/artifacts/export.py): inline styles, each
chart's data inlined in its Vega-Lite spec and one inline copy of Vega, so it
loads nothing from the network; every component's body comes from its kind.
What is the report's own is paged media: an A4 page with margins, a running
header (the title) and footer (data version, page "n of m") in the page's
margin boxes, no chart, table or KPI row split across a page break
(`break-inside: avoid`), headings kept with what follows, and `page_break`
sections starting a new page, unless that would end a page less than two thirds full (in the PDF).

The PDF is that HTML printed by Chromium (DASHMEM_CHROMIUM) through
Playwright, once every chart is drawn: a chart still drawing when the page is
printed would be a blank box on paper.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import DashmemError
from ..data.engine import Engine
from ..data.refresh import loaded_for_export
from ..data.snapshots import Warehouse
from ..roles.access import User
from . import pdf_print
from .components import Component
from .components import text as text_kind
from .components.base import escape
from .export import STYLE, _component_html, _error_html, _theme_style, chart_scripts, write_atomically
from .report import RenderedReport, Section, render_report

log = logging.getLogger(__name__)

PAGE_SIZE = "A4"
MARGINS = "18mm 16mm 20mm 16mm"  # top right bottom left: room for the running header and footer
PX_PER_MM = 96 / 25.4
# What is printed on a page, in CSS px (A4 is 210 x 297 mm): the page is laid out this wide before its charts are
# drawn, so a chart takes the width it has on paper and Chromium does not shrink the whole page to fit a wider one.
PRINT_WIDTH_PX = round((210 - 16 - 16) * PX_PER_MM)
PRINT_HEIGHT_PX = round((297 - 18 - 20) * PX_PER_MM)

PRINT_STYLE = """
.report { max-width: 960px; }
.report main > h2 { margin: 28px 0 10px; font-size: 1.45rem; }
.report main > h3 { margin: 22px 0 8px; font-size: 1.15rem; }
.report main > h4 { margin: 18px 0 6px; font-size: 1rem; }
.report .prose { margin: 0 0 14px; }
.report .prose p { margin: 0 0 8px; }
.report .meta { font-size: 0.85rem; opacity: 0.7; }
.report .kpis { margin-bottom: 16px; }
.report .component { margin-bottom: 16px; }
.page-break { height: 0; }
.component, .kpis, .chart, table, tr { break-inside: avoid; }
h2, h3, h4 { break-after: avoid; }
.page-break { break-before: page; }
.page-break.not-taken { break-before: auto; }
@media print {
  body { background: var(--background); }
  .report { max-width: none; padding: 0; }
  footer { display: none; }
}
"""


class ReportExportError(DashmemError, RuntimeError):
    """The report cannot be exported; the message says why (and what to install or set)."""


# --------------------------------------------------------------------------- HTML


def to_html(rendered: RenderedReport) -> str:
    """The report as one standalone HTML document that works offline and prints on A4 pages."""
    chart_specs: list[dict[str, Any]] = []  # filled as chart holders are written; a holder's index is its spec's
    body = "\n".join(_section_html(section, chart_specs) for section in rendered.sections)
    exported = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"{params_text(rendered)} · data version {rendered.data_version} · exported {exported}"
    description = f"<p>{escape(rendered.description)}</p>" if rendered.description else ""
    scripts = chart_scripts(chart_specs)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(rendered.title)}</title>
<style>{_theme_style(rendered.theme)}{STYLE}{PRINT_STYLE}{_page_style(rendered.title, rendered.data_version)}</style>
</head>
<body>
<div class="page report">
<header><h1>{escape(rendered.title)}</h1>{description}<p class="meta">{escape(meta)}</p></header>
<main>
{body}
</main>
<footer>{escape(meta)}</footer>
</div>
{scripts}</body>
</html>
"""


def _section_html(section: Section, chart_specs: list[dict[str, Any]]) -> str:
    if section.type == "heading":
        level = min(section.level + 1, 4)  # the report's title is the page's h1
        return f"<h{level}>{escape(section.text)}</h{level}>"
    if section.type == "page_break":
        return '<div class="page-break"></div>'
    if section.type == "prose":
        return "\n".join(_prose_html(comp) for comp in section.components)
    if section.type == "kpis":
        cells = "\n".join(_component_html(c, chart_specs) for c in section.components)
        columns = f"repeat({max(len(section.components), 1)}, minmax(0, 1fr))"
        return f'<div class="row kpis" style="grid-template-columns: {columns}">\n{cells}\n</div>'
    return "\n".join(_component_html(c, chart_specs) for c in section.components)


def _prose_html(comp: Component) -> str:
    body = _error_html(comp.error) if comp.error else text_kind.markdown_to_html(comp.markdown)
    return f'<div class="prose" id="{escape(comp.id)}">{body}</div>'


def params_text(rendered: RenderedReport) -> str:
    """The parameter values the report was rendered with, in words ("Sites: Brno, Porto")."""
    if not rendered.chosen_params:
        return "all data (no parameters set)"
    labels = {p.id: p.label for p in rendered.parameters}
    parts = []
    for pid, value in rendered.chosen_params.items():
        shown = " – ".join(map(str, value)) if isinstance(value, tuple) else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{labels.get(pid, pid)}: {shown}")
    return "; ".join(parts)


def _page_style(title: str, data_version: str) -> str:
    """The paged-media rules: page size, margins, and the running header and footer in the margin boxes."""
    box = "font-family: var(--font); font-size: 8.5pt; color: #5f6b7a;"
    return f"""
@page {{
  size: {PAGE_SIZE};
  margin: {MARGINS};
  @top-left {{ content: {css_string(title)}; {box} }}
  @bottom-left {{ content: {css_string("Data version " + data_version)}; {box} }}
  @bottom-right {{ content: "Page " counter(page) " of " counter(pages); {box} }}
}}
"""


def css_string(text: str) -> str:
    """`text` as a quoted CSS string: quotes, backslashes and anything that could end the <style> element are escaped."""
    out = []
    for ch in " ".join(str(text).split()):
        out.append(f"\\{ord(ch):x} " if ch in '"\\<>&' or ord(ch) < 0x20 else ch)
    return '"' + "".join(out) + '"'


# --------------------------------------------------------------------------- PDF

# Run before printing, once the charts are drawn: follows the page's blocks down the pages as print lays them
# out (a block kept whole moves to the next page when it does not fit, with the heading before it) and drops
# each page break that would end a page less than two thirds full: the part after it follows on that page, so
# a break after one chart pushed to a new page does not leave most of that page blank. Returns how many it dropped.
SETTLE_PAGE_BREAKS = """(pageHeight) => {
  const blocks = Array.from(document.querySelectorAll("main > *"));
  const at = (el) => { const r = el.getBoundingClientRect(); return [r.top + window.scrollY, r.bottom + window.scrollY]; };
  let pageTop = 0, dropped = 0;
  blocks.forEach((el, i) => {
    const [start, end] = at(el);
    if (el.classList.contains("page-break")) {
      if (start - pageTop < pageHeight * 2 / 3) { el.classList.add("not-taken"); dropped += 1; }
      else { pageTop = start; }
      return;
    }
    if (end - pageTop <= pageHeight) return;
    if (getComputedStyle(el).breakInside === "avoid" && end - start <= pageHeight) {
      const before = blocks[i - 1];
      pageTop = before && /^H[1-6]$/.test(before.tagName) ? at(before)[0] : start;
    } else {
      while (end - pageTop > pageHeight) pageTop += pageHeight;
    }
  });
  return dropped;
}"""


def to_pdf(html: str) -> bytes:
    """Print the report's HTML to PDF with headless Chromium, after every chart is drawn.

    The page is laid out for print (the width A4 prints within its margins, print media) before
    the charts are drawn, so each chart takes the width it will have on paper; a page break that
    would end a page less than two thirds full is not taken (SETTLE_PAGE_BREAKS). Printing runs in a process of its own
    (`lib.artifacts.pdf_print`) that is ended, with the Chromium it started, after DASHMEM_PDF_SECONDS.
    Raises ReportExportError, saying what is missing or what went wrong, when Playwright or
    Chromium is not installed, the charts are not drawn in time, or the print fails.
    """
    return pdf_print.run(html, "pdf", "the report", ReportExportError, before_print=SETTLE_PAGE_BREAKS, page_px=(PRINT_WIDTH_PX, PRINT_HEIGHT_PX))


# --------------------------------------------------------------------------- one workspace, end to end


def export_report(
    ws_path: Path,
    html_out: Path | None,
    pdf_out: Path | None,
    warehouse: Warehouse | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    user: User,
    viewer: User | None = None,
) -> dict[str, Any]:
    """Render the workspace's report over its newest snapshot and write the HTML and/or the PDF (each atomically).

    Data is loaded first only if the workspace has none yet (which needs `user` to have the right to
    refresh); otherwise the newest snapshot is read as it is, whichever process wrote it. The figures
    are `viewer`'s: their row filters hold (lib.data.row_filters); None, every row. Returns
    {"html": path or None, "pdf": path or None, "data_version": snapshot id, "errors": [(id, message)]}.
    """
    ws, warehouse, snapshot = loaded_for_export(Path(ws_path), "report", warehouse, user=user, error=ReportExportError)
    tables = warehouse.tables(snapshot)
    engine = Engine.for_workspace(ws.data, tables, snapshot.id, workspace_path=ws.path, user=viewer)
    rendered = render_report(ws.data, tables, snapshot.id, params or {}, workspace_path=ws.path, engine=engine)
    html = to_html(rendered)
    written: dict[str, Any] = {"html": None, "pdf": None, "data_version": snapshot.id, "errors": rendered.errors}
    if pdf_out is not None:  # printed first: a missing Chromium writes nothing at all
        pdf = to_pdf(html)
        write_atomically(Path(pdf_out), pdf)
        written["pdf"] = Path(pdf_out)
    if html_out is not None:
        write_atomically(Path(html_out), html.encode("utf-8"))
        written["html"] = Path(html_out)
    return written
