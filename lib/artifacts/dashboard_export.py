"""The dashboard exported: `python -m lib export WS --html F --png DIR --picture F.png`, and a subscription's copy
(lib.delivery).

The HTML is lib.artifacts.export's; this module renders the dashboard over the newest snapshot for it, with the
changes since the load before, as the user it is for sees them. The picture is that HTML drawn by headless
Chromium (lib.artifacts.pdf_print) as one PNG, PICTURE_WIDTH_PX wide and as tall as the dashboard.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import DashmemError
from ..data.engine import Engine
from ..data.refresh import loaded_for_export
from ..data.snapshots import Warehouse, loaded_at
from ..roles.access import User
from . import pdf_print
from .changes import compare_tables, previous_of
from .export import ExportError, chart_pngs, to_html, write_atomically
from .render import render

_log = logging.getLogger(__name__)

PICTURE_WIDTH_PX = 1280  # a laptop's screen: the dashboard's rows keep their columns (narrower, they stack)
# Run on the page before it is drawn as a picture: a picture cannot be clicked, so the notes that say how go.
WITHOUT_CLICK_NOTES = """() => document.querySelectorAll(".note.clicks").forEach((note) => note.remove())"""


def export_workspace(
    ws_path: Path,
    html_out: Path | None,
    png_dir: Path | None,
    warehouse: Warehouse | None = None,
    *,
    user: User,
    viewer: User | None = None,
    chosen: Mapping[str, Any] | None = None,
    picture_out: Path | None = None,
) -> dict[str, Any]:
    """Render the workspace's dashboard over its current data and write the HTML, the chart PNGs and/or the picture
    of the whole dashboard (`picture_out`, drawn first: without Chromium nothing is written).

    Data is loaded first if the workspace has none yet (which needs `user` to
    have the right to refresh; `access.OPERATOR` from the command line). The
    figures are `viewer`'s: their row filters hold (lib.data.row_filters); None, every row; the filters are
    at `chosen` (as `explain.parse_filters` gives them), else at their defaults. Returns
    {"html": path or None, "pngs": [paths], "picture": path or None, "data_version": snapshot id,
    "errors": [(component id, message)]}.
    """
    ws, warehouse, snapshot = loaded_for_export(Path(ws_path), "dashboard", warehouse, user=user, error=ExportError)
    tables = warehouse.tables(snapshot)
    engine = Engine.for_workspace(ws.data, tables, snapshot.id, workspace_path=ws.path, user=viewer)
    rendered = render(ws.data, tables, snapshot.id, chosen, workspace_path=ws.path, engine=engine)
    written: dict[str, Any] = {"html": None, "pngs": [], "picture": None, "data_version": snapshot.id, "errors": rendered.errors}
    if html_out is not None or picture_out is not None:
        previous = previous_of(warehouse, snapshot)
        earlier = warehouse.tables(previous) if previous else None
        try:
            changes = compare_tables(ws.data, snapshot, tables, previous, earlier, chosen or {}, workspace_path=ws.path, engine=engine)
        except DashmemError as exc:  # the comparison is a detail of the file: it is written without the earlier values
            _log.warning("export of %s: no earlier values: %s", ws_path.name, exc)
            changes = None
        html = to_html(rendered, changes, f"Data as of the load of {loaded_at(snapshot)}")
        if picture_out is not None:
            picture = pdf_print.run(html, "png", "the dashboard", ExportError, before_print=WITHOUT_CLICK_NOTES, page_px=(PICTURE_WIDTH_PX, 800))
            write_atomically(Path(picture_out), picture)
            written["picture"] = Path(picture_out)
        if html_out is not None:
            write_atomically(Path(html_out), html.encode("utf-8"))
            written["html"] = Path(html_out)
    if png_dir is not None:
        written["pngs"] = chart_pngs(rendered, Path(png_dir))
    return written
