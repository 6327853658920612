"""Pure functions over a dashboard or report spec: its queries, their parameters, text placeholders.

No data, no SQL engine and no renderer: `refresh` (does every query still
bind?), `checks` and `render` all read a spec through these, so the ones that
only need the spec do not import the renderer.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Iterator, Mapping, Sequence

from .shapes import ComponentSpec, DashboardSpec, ReportSpec, report_components

# A named query parameter: `$site`, `$week_from`.
PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# A text block's placeholder: `{{query.column}}` or `{{query.column|format}}`.
PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z][a-z0-9_]*)\.([^}|\s]+)\s*(?:\|\s*([^}]*?))?\s*\}\}")


def queries(dashboard: DashboardSpec | ReportSpec | Mapping[str, Any]) -> Iterator[tuple[tuple, str, str]]:
    """(path in the spec, description, sql) of every query a dashboard, or a report, runs.

    A report's parameters are filters, its named `queries` are read by its prose, and its components
    stand in its sections (`report_components`); a dashboard has none of the report's keys, nor it the dashboard's.
    """
    for key, what in (("filters", "filter"), ("parameters", "parameter")):
        for i, f in enumerate(dashboard.get(key) or []):
            for field in ("options_query", "bounds_query"):
                if f.get(field):
                    yield (key, i, field), f"{what} '{f.get('id')}'", f[field]
    if "sections" in dashboard:
        for name, sql in (dashboard.get("queries") or {}).items():
            if isinstance(sql, str):
                yield ("queries", name), f"query '{name}'", sql
    for path, c in components(dashboard):
        query = c.get("query")
        if isinstance(query, str):
            yield path + ("query",), f"component '{c.get('id')}'", query
        for name, sql in (c.get("queries") or {}).items():
            yield path + ("queries", name), f"component '{c.get('id')}' query '{name}'", sql


def components(spec: DashboardSpec | ReportSpec | Mapping[str, Any]) -> Iterator[tuple[tuple, ComponentSpec]]:
    """(path in the spec, spec) of every component of a dashboard, or of a report (`report_components`)."""
    if "sections" in spec:
        yield from report_components(spec)
        return
    for i, c in enumerate(spec.get("components") or []):
        if isinstance(c, Mapping):
            yield ("components", i), c


def prose_id(index: int) -> str:
    """The id a report's prose section renders under (it has none of its own): where it stands, `prose_3` for sections[2]."""
    return f"prose_{index + 1}"


def unset_params(sql: str) -> dict[str, None]:
    """Every parameter of a query, unset: what checks bind and run with."""
    return params_for(sql, {})


def params_for(sql: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the named parameters a query uses; unset filters are NULL (meaning 'all')."""
    return {name: values.get(name) for name in PARAM_RE.findall(sql)}


# Which schema definitions each shape covers ("" is the file's top level): tests/memory/test_shapes.py compares their fields.


def selections(component: ComponentSpec | Mapping[str, Any]) -> list[tuple[tuple, str, str]]:
    """(path below the component, field, filter id) of each pair a chart's `select` declares: one pair or a list."""
    select = component.get("select")
    if isinstance(select, Mapping):
        return [(("select",), str(select.get("field", "")), str(select.get("filter", "")))]
    if isinstance(select, list):
        return [(("select", j), str(s.get("field", "")), str(s.get("filter", ""))) for j, s in enumerate(select) if isinstance(s, Mapping)]
    return []


POINT_FILTERS = ("select", "multiselect")  # filter types a clicked mark's value can set


def selection_values(value: Any) -> list[Any]:
    """A point filter's chosen value as the list of values it stands for (none chosen: [])."""
    if value in (None, "", [], ()):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


# --------------------------------------------------------------------------- a chart's selection, as the browser sends it


def selected_points(selection: Any) -> list[Mapping[str, Any]]:
    """The selected marks' field values: Streamlit gives a point selection as a list of {field: value}."""
    if isinstance(selection, Mapping):
        selection = [selection] if selection else []
    return [p for p in selection or [] if isinstance(p, Mapping)]


def matching_options(options: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    """A point filter's own `options` for the values a browser sent (JSON numbers and text), in click order, once each.

    A date or timestamp arrives as its text (lib.artifacts.components.chart.select_key) and
    is matched to the option at the same calendar instant: a day option takes
    the text of that day at midnight, as a date_trunc over DATE gives it.
    The event is the browser's to write, so the options are indexed once and
    each value sent is looked up: a forged event of many points costs their
    number, not their number times the options'; anything but a JSON scalar matches nothing.
    """
    equal: dict[Any, Any] = {}
    text: dict[str, Any] = {}
    instant: dict[tuple[dt.datetime, bool], Any] = {}
    for option in options:
        try:
            equal.setdefault(option, option)
        except TypeError:  # an unhashable option is found by its text
            pass
        text.setdefault(str(option), option)
        if isinstance(option, dt.date):
            mine = option if isinstance(option, dt.datetime) else dt.datetime.combine(option, dt.time())
            instant.setdefault((mine.replace(tzinfo=None), mine.tzinfo is not None), option)
    found: list[Any] = []
    for value in values:
        if not isinstance(value, (str, int, float)):
            continue
        option = equal.get(value, text.get(str(value)))
        when = _instant(value) if option is None and isinstance(value, str) and instant else None
        if when is not None:
            option = instant.get(when)
        if option is not None and option not in found:
            found.append(option)
            if len(found) == len(options):
                break
    return found


def _instant(value: str) -> tuple[dt.datetime, bool] | None:
    try:
        sent = dt.datetime.fromisoformat(value) if len(value) <= 40 else None
    except ValueError:
        return None
    return None if sent is None else (sent.replace(tzinfo=None), sent.tzinfo is not None)
