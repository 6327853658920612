"""The Sources page's profile charts: one small chart per profiled column, built from the profile and a
histogram query's rows, so what a steward sees is testable without Streamlit.

- A column with frequent values (`top` in profile.yaml): horizontal bars, one row of `STEP` px per value, so
  the labels sit beside their bars and never on top of each other; a long label ends in "…" (its tooltip
  has it whole).
- A number column: its histogram (`histogram_query`), each bar as wide as its bin, from its start to its end.
- A time column: the same over time. A DATE column's bins are whole days, and its axis ticks fall on days,
  months or years, whichever its span needs: never "12 PM" between two days.

Every chart carries a description, which Vega-Embed puts as the chart's `aria-label`: the column, what the
chart shows and the range of its data. `filled` is the "filled" bar beside each chart: a full column is drawn
full, and a share that rounds to 100 % but is not all says so.

Each chart is a Vega-Lite dict over its rows as Arrow (lib.artifacts.components.vegalite.Drawn), checked
against Vega-Lite's schema, as the dashboard's charts are: no Altair or pandas.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Mapping

import pyarrow as pa

from ..core.formats import format_value
from ..data import coltypes, profile
from .components import vegalite

COLOR = "#4c78a8"
STEP = 22  # px per bar of a frequent-values chart: room for its label
TOP = 8  # frequent values drawn
LABEL_PX = 180  # a value's label is cut (with "…") past this width
HEIGHT = 110  # px of a histogram's plot
BINS = 20
# Plot sizes are the plot's own (axes and labels come on top), and the width follows the page's column:
# under Streamlit's default ("fit"), a 60 px chart with an axis below it had no room left for its bars.
AUTOSIZE = {"type": "fit-x", "contains": "padding"}


def histogram_query(table: str, column: Mapping[str, Any]) -> str | None:
    """The SQL of a column's histogram (bin_start, bin_end, rows), or None when its chart is not a histogram."""
    family = coltypes.family(column["type"])
    if column.get("top") or family not in ("number", "time"):
        return None
    return profile.histogram_sql(table, column["name"], family, BINS, days=_is_date(column))


def filled(column: Mapping[str, Any]) -> tuple[float, str]:
    """(the share of rows with a value, from 0.0 to 1.0, and its words): "100% filled · 7 distinct".

    The share is a float: Streamlit reads an int as percent, so a full column's 1 drew as 1 %.
    """
    null_share = float(column.get("null_share") or 0.0)
    share = min(max(1.0 - null_share, 0.0), 1.0)
    if 0.0 < null_share and round(share * 100) == 100:
        words = "over 99% filled"
    elif 0.0 < share and round(share * 100) == 0:
        words = "under 1% filled"
    else:
        words = f"{share:.0%} filled"
    if column.get("distinct") is not None:
        words += f" · {column['distinct']:,} distinct"
    return share, words


def column_chart(column: Mapping[str, Any], histogram: pa.Table | None = None) -> vegalite.Drawn | None:
    """The column's chart: its frequent values, or its histogram from `histogram`'s rows (`histogram_query`'s
    answer); None when there is nothing to draw."""
    if column.get("top"):
        return _frequent_values(column)
    if histogram is None or histogram.num_rows == 0:
        return None
    return _histogram(column, histogram)


def _frequent_values(column: Mapping[str, Any]) -> vegalite.Drawn:
    top = list(column["top"])[:TOP]
    values, counts = [str(t["value"]) for t in top], [int(t["count"]) for t in top]
    table = pa.table([pa.array(values, pa.string()), pa.array(counts, pa.int64())], names=["value", "rows"])
    first, last = top[0], top[-1]
    described = f"{column['name']}: bar chart of its {len(top)} most frequent value{'s' if len(top) != 1 else ''}"
    described += f", from {first['value']} ({first['count']:,} rows)" + (f" to {last['value']} ({last['count']:,} rows)" if len(top) > 1 else "")
    spec = {
        "mark": {"type": "bar", "color": COLOR},
        "encoding": {
            "x": {"field": "rows", "type": "quantitative", "title": "rows", "axis": {"tickMinStep": 1, "format": ",d"}},
            "y": {"field": "value", "type": "nominal", "sort": "-x", "title": None, "axis": {"labelLimit": LABEL_PX}},
            "tooltip": [{"field": "value", "type": "nominal", "title": column["name"]}, {"field": "rows", "type": "quantitative", "format": ",d"}],
        },
        "width": "container",
        "height": STEP * len(top),
        "autosize": AUTOSIZE,
        "description": described,
    }
    return vegalite.draw(spec, table)[0]


def _histogram(column: Mapping[str, Any], histogram: pa.Table) -> vegalite.Drawn:
    time = coltypes.family(column["type"]) == "time"
    low, high = histogram.column("bin_start")[0].as_py(), histogram.column("bin_end")[histogram.num_rows - 1].as_py()
    kind = "temporal" if time else "quantitative"
    axis = _time_axis(low, high, _is_date(column)) if time else {}
    rows = histogram.column("rows").to_pylist()
    starts, ends = histogram.column("bin_start").to_pylist(), histogram.column("bin_end").to_pylist()
    fullest = max(range(len(rows)), key=rows.__getitem__)
    described = (
        f"{column['name']}: histogram of {sum(rows):,} value{'s' if sum(rows) != 1 else ''}, {_span(low, high, column)},"
        f" in {len(rows)} bin{'s' if len(rows) != 1 else ''}; the fullest, {_span(starts[fullest], ends[fullest], column)}, has {rows[fullest]:,} rows"
    )
    tip_format = "%d %b %Y" if _is_date(column) else "%Y-%m-%d %H:%M" if time else ",.4~g"
    spec = {
        # Vertical bars from 0 up to the bin's rows: with a range on x and no bin, Vega-Lite would lay them
        # flat, a thin line at each count.
        "mark": {"type": "bar", "color": COLOR, "stroke": "white", "strokeWidth": 0.5, "orient": "vertical"},
        "encoding": {
            "x": {"field": "bin_start", "type": kind, "title": None, "axis": axis},
            "x2": {"field": "bin_end"},
            "y": {"field": "rows", "type": "quantitative", "title": "rows", "axis": {"tickMinStep": 1, "format": ",d"}},
            "tooltip": [
                {"field": "bin_start", "type": kind, "title": "from", "format": tip_format},
                {"field": "bin_end", "type": kind, "title": "to", "format": tip_format},
                {"field": "rows", "type": "quantitative", "format": ",d"},
            ],
        },
        "width": "container",
        "height": HEIGHT,
        "autosize": AUTOSIZE,
        "description": described,
    }
    return vegalite.draw(spec, vegalite.chart_table(histogram))[0]


def _time_axis(low: Any, high: Any, whole_days: bool) -> dict[str, Any]:
    """Ticks on whole days, months or years, about eight at most, for the span from `low` to `high`."""
    days = (_as_datetime(high) - _as_datetime(low)).total_seconds() / 86400
    if days <= 2 and not whole_days:
        return {"labelOverlap": True}  # within a day or two the hours are what a reader needs
    if days <= 62:
        interval, step, fmt = "day", math.ceil(days / 8), "%d %b"
    elif days <= 2 * 366:
        interval, step, fmt = "month", math.ceil(days / 30.44 / 8), "%b %Y"
    else:
        interval, step, fmt = "year", math.ceil(days / 365.25 / 8), "%Y"
    return {"tickCount": {"interval": interval, "step": max(step, 1)}, "format": fmt, "labelOverlap": True}


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return dt.datetime.combine(value, dt.time())


def _span(start: Any, end: Any, column: Mapping[str, Any]) -> str:
    """A bin or the whole range in words: "from 407 to 1,640"; a DATE column's whole days end the day before the
    bin's end ("from 2026-11-16 to 2026-11-22", "on 2026-11-16")."""
    if _is_date(column):
        first, last = _as_datetime(start).date(), _as_datetime(end).date() - dt.timedelta(days=1)
        return f"on {first.isoformat()}" if last <= first else f"from {first.isoformat()} to {last.isoformat()}"
    return f"from {_shown(start)} to {_shown(end)}"


def _shown(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, float):
        return f"{value:,.4g}"
    return format_value(value)


def _is_date(column: Mapping[str, Any]) -> bool:
    return str(column.get("type", "")).upper().split("(")[0].strip() == "DATE"
