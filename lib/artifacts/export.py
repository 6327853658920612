"""Export a rendered dashboard for use offline: one standalone HTML file, and PNGs of its charts.

The HTML file carries everything it needs: styles, the data of every chart
(inlined into its Vega-Lite spec at export time) and one inline copy of Vega,
Vega-Lite and vega-embed from vl-convert. It loads nothing from the network,
so it can be mailed, archived or opened on a plane. All text from specs and
data is escaped; the markdown of text blocks is converted by a small,
deliberately limited converter rather than passed through as HTML. Each
component's body comes from its kind (`lib/artifacts/components/<kind>.py`, `to_html`);
this module writes the page around them.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import vl_convert

from ..core import settings
from ..core.errors import DashmemError
from ..core.fsutil import atomic_write
from ..memory import schemas
from ..memory.kinds.output import DEFAULT_THEME
from .components import Component, kind_of, vegalite
from .components.base import COLOR_RE
from .components.base import escape as _escape
from .components.chart import vega_lite_spec
from .components.kpi import NAME as KPI
from .render import Rendered

if TYPE_CHECKING:
    from .changes import Changes

_log = logging.getLogger(__name__)

# Font families are pasted into CSS, so only characters a family list needs pass.
FONT_RE = re.compile(r"^[A-Za-z0-9 ,'\"_-]+$")
COMPONENT_ID_RE = re.compile(schemas.pattern("dashboard", "id"))
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
.kpi-bar { height: 4px; margin-bottom: 6px; border-radius: 2px; }
.kpi-status { margin-top: 4px; font-size: 0.85rem; opacity: 0.75; }
.kpi-was { margin-top: 4px; font-size: 0.85rem; opacity: 0.7; }
header p.as-of { font-weight: 600; opacity: 1; }
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
@media screen and (max-width: 720px) { .row { grid-template-columns: minmax(0, 1fr) !important; } }
@media print { .component { break-inside: avoid; } }
"""


# --------------------------------------------------------------------------- HTML


def to_html(rendered: Rendered, changes: Changes | None = None, as_of: str = "") -> str:
    """The dashboard as one standalone HTML page that works offline.

    `changes` (lib.artifacts.changes, the data shown against the load before it) puts each KPI's
    earlier value beside it, as the Dashboard page does; `as_of` says which load the
    data is (lib.artifacts.time_travel.AsOf.as_of_note), above the dashboard.
    """
    chart_specs: list[dict[str, Any]] = []  # filled as chart holders are written; a holder's index is its spec's
    was = {c.id: changes.was(c.id) for c in rendered.components if c.type == KPI and not c.error} if changes is not None else {}
    rows = "\n".join(_row_html(row, chart_specs, was) for row in rendered.rows)
    exported = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    description = f"<p>{_escape(rendered.description)}</p>" if rendered.description else ""
    if as_of:
        description += f'<p class="as-of">{_escape(as_of)}</p>'
    scripts = chart_scripts(chart_specs)
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


def chart_scripts(chart_specs: list[dict[str, Any]]) -> str:
    """The page's chart specs and the inlined Vega bundle that draws them offline; nothing when it has no chart."""
    if not chart_specs:
        return ""
    return f'<script type="application/json" id="chart-specs">{_script_json(chart_specs)}</script>\n<script>{vega_bundle()}</script>\n'


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega, Vega-Lite, vega-embed and the snippet that draws every chart, as one inline script.

    Bundling takes one to two seconds, most of a cron export's time, and depends only on the versions and the
    snippet: it is built once per machine and kept in the cache folder (named by what it depends on), then
    read by every later process; a cached file that cannot be read or written is simply built again.
    """
    vl_version = _vega_lite_version()
    key = hashlib.sha256(f"{importlib.metadata.version('vl-convert-python')}|{vl_version}|{EMBED_SNIPPET}".encode()).hexdigest()[:16]
    cached = settings.cache_dir() / "vega" / f"bundle-{key}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    bundle = vl_convert.javascript_bundle(EMBED_SNIPPET, vl_version=vl_version)
    # A literal "</script" anywhere in the code would end the <script> element early.
    bundle = re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cached, bundle, fsync=False)
    except OSError as exc:
        _log.info("the chart bundle could not be cached (%s); it is built again next time", exc)
    return bundle


@functools.lru_cache(maxsize=1)
def _vega_lite_version() -> str | None:
    """The Vega-Lite version the charts are written for, if vl-convert has it (None: its latest)."""
    major_minor = ".".join(vegalite.version().split(".")[:2])
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
    return f":root {{ --background: {color('background')}; --text: {color('text')}; --primary: {color('primary')}; --font: {font}; }}"


def _row_html(row: list[Component], chart_specs: list[dict[str, Any]], was: dict[str, str]) -> str:
    columns = " ".join(f"minmax(0, {max(int(c.width), 1)}fr)" for c in row)
    cells = "\n".join(_component_html(c, chart_specs, was.get(c.id, "")) for c in row)
    return f'<div class="row" style="grid-template-columns: {columns}">\n{cells}\n</div>'


def _component_html(comp: Component, chart_specs: list[dict[str, Any]], was: str = "") -> str:
    """A component's section: its title, then its kind's HTML (lib/artifacts/components/), or its error; a KPI's earlier value below."""
    title = f"<h2>{_escape(comp.title)}</h2>" if comp.title else ""
    body = _error_html(comp.error) if comp.error else kind_of(comp).to_html(comp, chart_specs)
    if was:
        body += f'<div class="kpi-was">{_escape(was)}</div>'
    return f'<section class="component {_escape(comp.type)}" id="{_escape(comp.id)}">{title}{body}</section>'


def _error_html(message: str) -> str:
    return f'<div class="error" role="alert">{_escape(message)}</div>'


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no "<", ">" or "&" that could end it or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --------------------------------------------------------------------------- PNG


def chart_pngs(rendered: Rendered, folder: Path, scale: float = 2) -> list[Path]:
    """One PNG per chart, `<component id>.png` in `folder`; charts that failed to render are left out."""
    folder = Path(folder)
    written = []
    for comp in rendered.components:
        if comp.error or comp.vega is None:  # only a chart that rendered has a Vega-Lite spec
            continue
        if not COMPONENT_ID_RE.match(comp.id):  # the id becomes a file name
            raise ValueError(f"component id {comp.id!r} cannot be a file name")
        spec = vega_lite_spec(comp)
        if spec.get("width") == "container":
            spec["width"] = PNG_WIDTH
        png = vl_convert.vegalite_to_png(spec, vl_version=_vega_lite_version(), scale=scale, allowed_base_urls=[])  # the data is inline; fetch nothing
        target = folder / f"{comp.id}.png"
        write_atomically(target, png)
        written.append(target)
    return written


# --------------------------------------------------------------------------- one workspace, end to end


class ExportError(DashmemError, RuntimeError):
    """The workspace cannot be exported; the message says why."""


def write_atomically(target: Path, content: bytes) -> None:
    """Write through a temporary file in the same folder, so readers never see a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, content)  # with the umask's permissions, not mkstemp's 0600: an export is meant to be shared
