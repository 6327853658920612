"""Render a report spec (report.yaml): an ordered document of headings, prose, KPI rows, charts, tables and page breaks.

A report is the dashboard's sibling on the same memory: its charts, tables
and KPI cards are dashboard components rendered by their kinds
(`lib/artifacts/components/`), its parameters are dashboard filters bound the same way,
and its queries go through the same query engine and cache (`lib.data.engine`). What is its own is
the order (a document, read top to bottom, printed on pages) and its prose:
Markdown whose `{{query.column|format}}` placeholders read the first row of
the report's named `queries`. A prose section renders as a `text` component
whose queries are the named ones it uses, so a query several sections share
runs once per data version and parameter values.

Nothing here knows Streamlit; `app_pages/report_view.py` draws `RenderedReport` (the Report page, the Chat page's proposals), and
`lib.artifacts.report_export` writes it as standalone HTML and PDF.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from ..data.engine import CACHE, Engine, QueryCache
from ..memory.shapes import REPORT_COMPONENT_SECTIONS
from ..memory.spec import PLACEHOLDER_RE, prose_id
from .components import Component
from .components import text as text_kind
from .render import FilterState, render_components, render_context


@dataclass
class Section:
    """One rendered section: a heading's text, or the components that draw it (prose is one `text` component)."""

    type: str
    index: int  # its place in `sections`, for messages and checks
    text: str = ""
    level: int = 1
    components: list[Component] = field(default_factory=list)


@dataclass
class RenderedReport:
    title: str
    description: str
    theme: dict[str, Any]
    sections: list[Section]
    parameters: list[FilterState]
    data_version: str
    seconds: float
    queries_run: int
    chosen_params: dict[str, Any] = field(default_factory=dict)  # the parameter values this rendering used

    @property
    def components(self) -> list[Component]:
        return [c for s in self.sections for c in s.components]

    def component(self, component_id: str) -> Component:
        return next(c for c in self.components if c.id == component_id)

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(c.id, c.error) for c in self.components if c.error] + [(p.id, p.error) for p in self.parameters if p.error]


def prose_spec(report: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A prose section as a `text` component: its markdown, and the report's named queries its placeholders use."""
    markdown = report["sections"][index]["markdown"]
    named = report.get("queries") or {}
    used = dict.fromkeys(m.group(1) for m in PLACEHOLDER_RE.finditer(markdown))
    return text_kind.new(prose_id(index), "", markdown, {name: named[name] for name in used if name in named})


def render_report(
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    version: str,
    chosen_params: Mapping[str, Any] | None = None,
    *,
    cache: QueryCache = CACHE,
    workspace_path: Path | None = None,
    engine: Engine | None = None,
) -> RenderedReport:
    """Render the report in `files["report"]` over `tables` (the data of `version`), section by section.

    A section that fails shows its error in its place (as a dashboard component does); the rest still render.
    `engine` runs the queries instead of the workspace's default one (the viewer's, which holds them to their rows).
    """
    started = time.perf_counter()
    report = files.get("report") or {}
    ctx, states, misses_before = render_context(files, report, report.get("parameters"), tables, version, chosen_params, cache, workspace_path, engine)
    sections: list[Section] = []
    cells: list[tuple[Section, Mapping[str, Any]]] = []  # each component with the section it goes in, rendered together below
    for i, spec in enumerate(report.get("sections") or []):
        kind = spec.get("type")
        section = Section(kind, i)
        if kind == "heading":
            section.text, section.level = spec.get("text", ""), int(spec.get("level", 1))
        elif kind == "prose":
            cells.append((section, prose_spec(report, i)))
        elif kind == "kpis":
            cells += [(section, card) for card in spec.get("components") or []]
        elif kind in REPORT_COMPONENT_SECTIONS:
            cells.append((section, spec))
        sections.append(section)
    for (section, _), component in zip(cells, render_components([(spec, 1) for _, spec in cells], ctx)):
        section.components.append(component)
    chosen = {k: v for k, v in (chosen_params or {}).items() if v not in (None, "", [], ())}
    return RenderedReport(
        report.get("title", ""),
        report.get("description", ""),
        ctx.theme,
        sections,
        states,
        version,
        time.perf_counter() - started,
        ctx.engine.misses - misses_before,
        chosen,
    )
