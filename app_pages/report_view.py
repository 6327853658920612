"""Drawing a rendered report, and the Chat page's preview of a proposed one: its checks, then the report itself.

Used by the Report page (the saved report, with the parameters a reader chose) and the Chat page's proposals
(a Claude session's or the auto-draft's), so a steward sees what a report reads like before saving it.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
import streamlit as st

from app_pages import dashboard_view, ui
from lib.artifacts import checks
from lib.artifacts.components import text as text_kind
from lib.artifacts.report import RenderedReport, render_report
from lib.core.diagnostics import Diagnostic
from lib.memory import workspace


def header(title: str, description: str, where: Any = st) -> None:
    """The report's title and description; `where` is the container (the Report page's column beside its buttons)."""
    where.title(text_kind.inert_images(title))
    if description:
        where.caption(text_kind.inert_images(description))


def show(rendered: RenderedReport) -> None:
    """The sections top to bottom; a KPI row side by side, a page break as a rule."""
    for section in rendered.sections:
        if section.type == "heading":
            st.markdown(text_kind.inert_images(f"{'#' * (section.level + 1)} {section.text}"))
        elif section.type == "page_break":
            st.divider()
        elif section.type == "prose":
            for comp in section.components:
                if comp.error:
                    st.error(f"This paragraph cannot be shown: {comp.error}")
                else:
                    st.markdown(text_kind.inert_images(comp.markdown))
        else:
            for column, comp in zip(st.columns(len(section.components) or 1), section.components):
                with column.container(border=True):
                    dashboard_view.component(comp)


def preview(ws: workspace.Workspace, report: dict[str, Any], tables: Mapping[str, pa.Table] | None, version: str) -> list[Diagnostic]:
    """The checks' findings on a proposed report.yaml, then the report itself over the data shown; returns the findings.

    Drawn with no parameter chosen (every row), as the Report page opens; the reader's choices there are
    the saved report's business, and nothing here is saved.
    """
    candidate = workspace.Workspace(ws.path, {**ws.data, "report": report}, {})
    found = checks.run(candidate, tables, f"preview:{version}", file=workspace.FILES["report"], kind="report")
    ui.show_check_verdict(found, "report", "The report's checks pass")
    if tables is not None:
        with st.expander("Report preview", expanded=True):
            # A proposal the checks refuse may still be drawn wrongly shaped (a section without its id): say so plainly.
            with ui.user_errors("Could not draw this report"):
                rendered = render_report(candidate.data, tables, f"preview:{version}", workspace_path=ws.path)
                st.caption("On the data loaded now, with no parameter chosen (every row), as the Report page opens it.")
                header(rendered.title or ws.name, rendered.description)
                for parameter in rendered.parameters:  # no parameter bar here to show its error in
                    if parameter.error:
                        st.error(f"{parameter.label}: {parameter.error}")
                show(rendered)
    return found
