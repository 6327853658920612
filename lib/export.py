"""Export a rendered dashboard for use offline: one standalone HTML file, and PNGs of its charts.

The HTML file carries everything it needs: styles, the data of every chart
(inlined into its Vega-Lite spec at export time) and one inline copy of Vega,
Vega-Lite and vega-embed from vl-convert. It loads nothing from the network,
so it can be mailed, archived or opened on a plane. All text from specs and
data is escaped; the markdown of text blocks is converted by a small,
deliberately limited converter rather than passed through as HTML.
"""
from __future__ import annotations

import datetime as dt
import functools
import html
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

import pyarrow as pa
import vl_convert

from . import workspace
from .access import User
from .diagnostics import ValidationFailed, has_errors
from .errors import DashmemError
from .formats import readable_text_on
from .refresh import refresh
from .render import DEFAULT_THEME, Component, Rendered, render
from .warehouse import Warehouse

COLOR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
# Font families are pasted into CSS, so only characters a family list needs pass.
FONT_RE = re.compile(r"^[A-Za-z0-9 ,'\"_-]+$")
COMPONENT_ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Charts that follow their container's width get this width in a PNG, which has no container.
PNG_WIDTH = 640

# Runs after the page body is parsed (the bundle is the last element of <body>).
EMBED_SNIPPET = """
const specs = JSON.parse(document.getElementById("chart-specs").textContent);
for (const holder of document.querySelectorAll("[data-chart]")) {
  vegaEmbed(holder, specs[Number(holder.dataset.chart)], {actions: false, renderer: "svg"}).catch((error) => {
    holder.className = "error";
    holder.textContent = "This chart could not be drawn: " + error.message;
  });
}
"""

STYLE = """
* { box-sizing: border-box; }
body { margin: 0; background: var(--background); color: var(--text); font-family: var(--font); line-height: 1.45; }
.page { max-width: 1280px; margin: 0 auto; padding: 24px 32px 16px; }
header h1 { margin: 0 0 4px; font-size: 1.8rem; }
header p { margin: 0 0 20px; opacity: 0.8; }
.row { display: grid; gap: 16px; margin-bottom: 16px; }
.component { min-width: 0; padding: 14px 16px; border: 1px solid rgba(127, 127, 127, 0.25); border-radius: 8px; }
.component h2 { margin: 0 0 8px; font-size: 1rem; font-weight: 600; }
.kpi-value { font-size: 2.2rem; font-weight: 600; line-height: 1.15; }
.kpi-delta { margin-top: 4px; font-size: 0.95rem; opacity: 0.75; }
.chart { width: 100%; }
.table-scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { padding: 4px 8px; border-bottom: 1px solid rgba(127, 127, 127, 0.25); text-align: left; }
th.number, td.number { text-align: right; font-variant-numeric: tabular-nums; }
.note { margin: 6px 0 0; font-size: 0.85rem; opacity: 0.7; }
.error { padding: 10px 12px; border: 1px solid #d62728; border-left-width: 4px; border-radius: 4px;
         background: #fdecea; color: #7f1d1d; white-space: pre-wrap; overflow-wrap: anywhere; }
a { color: var(--primary); }
footer { margin-top: 24px; padding-top: 8px; border-top: 1px solid rgba(127, 127, 127, 0.25); font-size: 0.8rem; opacity: 0.7; }
@media (max-width: 720px) { .row { grid-template-columns: minmax(0, 1fr) !important; } }
@media print { .component { break-inside: avoid; } }
"""


# --------------------------------------------------------------------------- HTML


def to_html(rendered: Rendered) -> str:
    """The dashboard as one standalone HTML page that works offline."""
    chart_specs: list[dict[str, Any]] = []  # filled as chart holders are written; a holder's index is its spec's
    rows = "\n".join(_row_html(row, chart_specs) for row in rendered.rows)
    exported = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    description = f"<p>{_escape(rendered.description)}</p>" if rendered.description else ""
    scripts = ""
    if chart_specs:
        scripts = (f'<script type="application/json" id="chart-specs">{_script_json(chart_specs)}</script>\n'
                   f"<script>{vega_bundle()}</script>\n")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_escape(rendered.title)}</title>
<style>{_theme_style(rendered.theme)}{STYLE}</style>
</head>
<body>
<div class="page">
<header><h1>{_escape(rendered.title)}</h1>{description}</header>
<main>
{rows}
</main>
<footer>Data version {_escape(rendered.data_version)} · {_escape(_filters_text(rendered))} · exported {exported}</footer>
</div>
{scripts}</body>
</html>
"""


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega, Vega-Lite, vega-embed and the snippet that draws every chart, as one inline script.

    Bundling takes about a second, so it is built once per process.
    """
    bundle = vl_convert.javascript_bundle(EMBED_SNIPPET, vl_version=_vega_lite_version())
    # A literal "</script" anywhere in the code would end the <script> element early.
    return re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _vega_lite_version() -> str | None:
    """The Vega-Lite version Altair writes specs for, if vl-convert has it (None: its latest)."""
    import altair as alt  # already loaded by whoever rendered the charts

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return major_minor if major_minor in vl_convert.get_vegalite_versions() else None


def _filters_text(rendered: Rendered) -> str:
    if not rendered.chosen_filters:
        return "no filters"
    labels = {f.id: f.label for f in rendered.filters}
    parts = []
    for fid, value in rendered.chosen_filters.items():
        shown = " – ".join(map(str, value)) if isinstance(value, tuple) else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{labels.get(fid, fid)}: {shown}")
    return "filtered by " + "; ".join(parts)


def _theme_style(theme: dict[str, Any]) -> str:
    def color(key: str) -> str:
        value = theme.get(key)
        return value if isinstance(value, str) and COLOR_RE.match(value) else DEFAULT_THEME[key]

    font = theme.get("font")
    font = font if isinstance(font, str) and FONT_RE.match(font) else DEFAULT_THEME["font"]
    return (f":root {{ --background: {color('background')}; --text: {color('text')}; "
            f"--primary: {color('primary')}; --font: {font}; }}")


def _row_html(row: list[Component], chart_specs: list[dict[str, Any]]) -> str:
    columns = " ".join(f"minmax(0, {max(int(c.width), 1)}fr)" for c in row)
    cells = "\n".join(_component_html(c, chart_specs) for c in row)
    return f'<div class="row" style="grid-template-columns: {columns}">\n{cells}\n</div>'


def _component_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    title = f"<h2>{_escape(comp.title)}</h2>" if comp.title else ""
    if comp.error:
        body = _error_html(comp.error)
    elif comp.type == "kpi":
        body = _kpi_html(comp)
    elif comp.type == "chart":
        body = _chart_html(comp, chart_specs)
    elif comp.type == "table":
        body = _table_html(comp)
    else:
        body = markdown_to_html(comp.markdown)
    return f'<section class="component {_escape(comp.type)}" id="{_escape(comp.id)}">{title}{body}</section>'


def _error_html(message: str) -> str:
    return f'<div class="error" role="alert">{_escape(message)}</div>'


def _kpi_html(comp: Component) -> str:
    style = f' style="color: {comp.color}"' if comp.color and COLOR_RE.match(comp.color) else ""
    delta = f'<div class="kpi-delta">{_escape(comp.delta_display)}</div>' if comp.delta_display else ""
    return f'<div class="kpi-value"{style}>{_escape(comp.display)}</div>{delta}'


def _chart_html(comp: Component, chart_specs: list[dict[str, Any]]) -> str:
    chart_specs.append(vega_lite_spec(comp))
    return f'<div class="chart" data-chart="{len(chart_specs) - 1}"></div>'


def vega_lite_spec(comp: Component) -> dict[str, Any]:
    """The chart's Vega-Lite spec (validated by render) as plain JSON values, data inlined."""
    return json.loads(json.dumps(comp.vega, default=_json_value))


def _json_value(value: Any) -> Any:
    """Query values Altair leaves as Python objects, such as the dates of DATE columns.

    A date becomes local midnight ("…T00:00:00", no zone), as Altair writes
    datetime columns: browsers read a bare "YYYY-MM-DD" as UTC midnight, which
    shows as the day before west of Greenwich. Other objects (times,
    intervals) are written as their text.
    """
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time()).isoformat()
    return str(value)


def _table_html(comp: Component) -> str:
    frame = comp.frame
    numeric = _numeric_labels(comp)
    head = "".join(f"<th{_number_class(label, numeric)}>{_escape(label)}</th>" for label in frame.columns)
    body_rows = []
    for position, values in enumerate(frame.itertuples(index=False, name=None)):
        cells = []
        for label, value in zip(frame.columns, values):
            background = comp.cell_colors.get((position, label))
            style = (f' style="background: {background}; color: {readable_text_on(background)}"'
                     if background and COLOR_RE.match(background) else "")
            cells.append(f"<td{_number_class(label, numeric)}{style}>{_escape(value)}</td>")
        body_rows.append("<tr>" + "".join(cells) + "</tr>")
    notes = ""
    if not body_rows:
        notes = '<p class="note">No rows.</p>'
    elif comp.result is not None and comp.result.truncated:
        notes = f'<p class="note">Showing the first {len(body_rows):,} rows.</p>'
    return (f'<div class="table-scroll"><table><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body_rows)}</tbody></table></div>{notes}')


def _numeric_labels(comp: Component) -> set[str]:
    """Labels of the table's number columns, right-aligned. Frame columns follow the query's columns in order."""
    if comp.result is None:
        return set()
    return {label for label, field in zip(comp.frame.columns, comp.result.table.schema)
            if pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)}


def _number_class(label: str, numeric: set[str]) -> str:
    return ' class="number"' if label in numeric else ""


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no "<", ">" or "&" that could end it or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --------------------------------------------------------------------------- markdown of text blocks

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
        out.append(_emphasis(_escape(text[position:link.start()])))
        label, url = _emphasis(_escape(link.group(1))), link.group(2)
        out.append(f'<a href="{_escape(url)}">{label}</a>' if SAFE_URL_RE.match(url) else _escape(link.group(0)))
        position = link.end()
    out.append(_emphasis(_escape(text[position:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    return ITALIC_RE.sub(r"<em>\1</em>", BOLD_RE.sub(r"<strong>\1</strong>", escaped))


# --------------------------------------------------------------------------- PNG


def chart_pngs(rendered: Rendered, folder: Path, scale: float = 2) -> list[Path]:
    """One PNG per chart, `<component id>.png` in `folder`; charts that failed to render are left out."""
    folder = Path(folder)
    written = []
    for comp in rendered.components:
        if comp.type != "chart" or comp.error or comp.vega is None:
            continue
        if not COMPONENT_ID_RE.match(comp.id):  # the id becomes a file name
            raise ValueError(f"component id {comp.id!r} cannot be a file name")
        spec = vega_lite_spec(comp)
        if spec.get("width") == "container":
            spec["width"] = PNG_WIDTH
        png = vl_convert.vegalite_to_png(spec, vl_version=_vega_lite_version(), scale=scale,
                                         allowed_base_urls=[])  # the data is inline; fetch nothing
        target = folder / f"{comp.id}.png"
        write_atomically(target, png)
        written.append(target)
    return written


# --------------------------------------------------------------------------- one workspace, end to end


class ExportError(DashmemError, RuntimeError):
    """The workspace cannot be exported; the message says why."""


def export_workspace(ws_path: Path, html_out: Path | None, png_dir: Path | None,
                     warehouse: Warehouse | None = None, *, user: User) -> dict[str, Any]:
    """Render the workspace's dashboard over its current data and write the HTML and/or the chart PNGs.

    Data is loaded first if the workspace has none yet (which needs `user` to
    have the right to refresh; `access.OPERATOR` from the command line). Returns
    {"html": path or None, "pngs": [paths], "data_version": snapshot id,
    "errors": [(component id, message)]}.
    """
    ws_path = Path(ws_path)
    ws, diagnostics = workspace.load(ws_path)
    rendered_files = (workspace.FILES["dashboard"], workspace.FILES["output"])
    problems = [d for d in diagnostics if d.file and d.file.endswith(rendered_files)]
    if has_errors(problems):
        raise ValidationFailed(problems)
    if not ws.get("dashboard"):
        raise ExportError(f"{ws_path.name} has no {workspace.FILES['dashboard']} to export")
    warehouse = warehouse or Warehouse.for_workspace(ws_path)
    if warehouse.current() is None:
        report = refresh(ws_path, warehouse, user=user)
        if warehouse.current() is None:
            raise ExportError(f"no data could be loaded for {ws_path.name}:\n{report.summary()}")
    snapshot = warehouse.current()
    rendered = render(ws.data, warehouse.tables(snapshot), snapshot.id)
    written: dict[str, Any] = {"html": None, "pngs": [], "data_version": snapshot.id, "errors": rendered.errors}
    if html_out is not None:
        write_atomically(Path(html_out), to_html(rendered).encode("utf-8"))
        written["html"] = Path(html_out)
    if png_dir is not None:
        written["pngs"] = chart_pngs(rendered, Path(png_dir))
    return written


def write_atomically(target: Path, content: bytes) -> None:
    """Write through a temporary file in the same folder, so readers never see a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkstemp: its files are private (0600); an export is meant to be shared, so the umask decides.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
