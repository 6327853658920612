"""The component kinds of a dashboard, one module each, behind one registry.

Each kind's module (`kpi.py`, `chart.py`, `table.py`, `text.py`) holds
everything about that kind: a constructor for its spec (`new`), its render
(query results -> the `Component` the Dashboard page and the export draw),
what the checks read from its spec, and its HTML for the standalone export.
`render`, `checks`, `export`, `autodraft` and the Dashboard page find a kind
here, by the spec's `type`.

Adding a kind: write `lib/artifacts/components/<kind>.py` ending in `KIND =
ComponentKind(...)` (see `base.py` for what a kind provides), add it to
`KINDS` below and to the `type` enum of schemas/dashboard.schema.json (with
its `$defs` entry), and give the Dashboard page a drawing function for it
(`app_pages/dashboard_view.py`). tests/artifacts/test_components.py fails until the
registry and the schema agree.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import chart, kpi, table, text
from .base import Component, ComponentKind, FieldRef, RenderContext

KINDS: dict[str, ComponentKind] = {
    kpi.NAME: kpi.KIND,
    chart.NAME: chart.KIND,
    table.NAME: table.KIND,
    text.NAME: text.KIND,
}


def kind_of(component: Mapping[str, Any] | Component) -> ComponentKind:
    """The kind of a component spec (a dict) or a rendered `Component`; KeyError (naming the type) if there is none."""
    name = component.get("type") if isinstance(component, Mapping) else component.type
    if not isinstance(name, str):
        raise KeyError(name)  # no type at all
    return KINDS[name]


__all__ = ["KINDS", "Component", "ComponentKind", "FieldRef", "RenderContext", "kind_of"]
