"""Render time of a 10-component dashboard over a 1M-row table, cold and warm.

    python -m bench.render [--rows N] [--repeat R]

Cold: a new query cache (as after a refresh: every query runs). Warm: the
same data version and filters again (results come from the cache). Targets
(issue #4): under 1 s cold and under 0.2 s warm. The table is the generated
44-column table of bench.profile, loaded into a warehouse snapshot first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from .common import print_table, wide_table_csv

WHERE = "WHERE ($cat IS NULL OR list_contains($cat, category_00))"
SPEC = {
    "title": "Wide table",
    "filters": [{"id": "cat", "type": "multiselect", "options_query": "SELECT DISTINCT category_00 FROM t ORDER BY 1"}],
    "components": [
        {"id": "k_rows", "type": "kpi", "title": "Rows", "query": f"SELECT count(*) AS value FROM t {WHERE}", "format": ",d"},
        {"id": "k_sum", "type": "kpi", "title": "Total", "query": f"SELECT sum(measure_00) AS value FROM t {WHERE}", "format": ",.0f"},
        {
            "id": "k_avg",
            "type": "kpi",
            "title": "Average",
            "query": f"SELECT avg(measure_01) AS value, avg(measure_02) AS previous FROM t {WHERE}",
            "compare_column": "previous",
            "format": ",.2f",
        },
        {
            "id": "trend",
            "type": "chart",
            "title": "Trend",
            "mark": "line",
            "query": f"SELECT date_trunc('month', date_0) AS month, sum(measure_00) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 1",
            "encoding": {"x": {"field": "month", "type": "temporal"}, "y": {"field": "total", "type": "quantitative"}},
        },
        {
            "id": "by_cat",
            "type": "chart",
            "title": "By category",
            "mark": "bar",
            "query": f"SELECT category_03 AS cat3, sum(measure_03) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 15",
            "encoding": {"x": {"field": "cat3", "type": "nominal"}, "y": {"field": "total", "type": "quantitative"}},
        },
        {
            "id": "by_cat2",
            "type": "chart",
            "title": "Counts",
            "mark": "bar",
            "query": f"SELECT category_05 AS cat5, count(*) AS n FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
            "encoding": {"x": {"field": "cat5", "type": "nominal"}, "y": {"field": "n", "type": "quantitative"}},
        },
        {
            "id": "scatter",
            "type": "chart",
            "title": "Two measures",
            "mark": "point",
            "query": f"SELECT category_07 AS c7, avg(measure_04) AS a, avg(measure_05) AS b FROM t {WHERE} GROUP BY 1",
            "encoding": {"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b", "type": "quantitative"}},
        },
        {
            "id": "table",
            "type": "table",
            "title": "Top customers",
            "max_rows": 20,
            "query": f"SELECT customer_id, sum(measure_00) AS total, count(*) AS orders FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
        },
        {
            "id": "mix",
            "type": "chart",
            "title": "Mix",
            "mark": "arc",
            "query": f"SELECT category_08 AS c8, sum(count_00) AS n FROM t {WHERE} GROUP BY 1",
            "encoding": {"theta": {"field": "n", "type": "quantitative"}, "color": {"field": "c8", "type": "nominal"}},
        },
        {
            "id": "text",
            "type": "text",
            "markdown": "Top category: **{{top.cat}}** with {{top.total|,.0f}}.",
            "queries": {"top": f"SELECT category_00 AS cat, sum(measure_00) AS total FROM t {WHERE} GROUP BY 1 ORDER BY 2 DESC LIMIT 1"},
        },
    ],
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    from lib.artifacts.render import QueryCache, render
    from lib.data.connectors.base import FetchContext, fetch
    from lib.data.snapshots import Warehouse

    csv = wide_table_csv(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        wh = Warehouse(Path(tmp))
        wh.write_snapshot({"t": fetch({"name": "t", "type": "csv", "path": str(csv)}, FetchContext(workspace_path=csv.parent))})
        snapshot = wh.current()
        assert snapshot is not None
        tables, version = wh.tables(), snapshot.id
        files = {"dashboard": SPEC, "output": {"data_injection": {"mode": "queries_at_render"}}}
        rows = []
        for label, chosen in (("no filter", {}), ("filtered", {"cat": ["cat0_1", "cat0_2"]})):
            cold, warm = [], []
            first = None
            for _ in range(args.repeat):
                cache = QueryCache()
                start = time.perf_counter()
                first = render(files, tables, version, chosen, cache=cache)
                cold.append(time.perf_counter() - start)
                assert not first.errors, first.errors
                start = time.perf_counter()
                again = render(files, tables, version, chosen, cache=cache)
                warm.append(time.perf_counter() - start)
                assert again.queries_run == 0
            assert first is not None, "--repeat is at least 1"
            rows.append(
                [
                    label,
                    len(SPEC["components"]),
                    first.queries_run,
                    round(statistics.median(cold), 3),
                    round(statistics.median(warm), 4),
                    "yes" if statistics.median(cold) < 1 else "NO",
                    "yes" if statistics.median(warm) < 0.2 else "NO",
                ]
            )
    print_table(["case", "components", "queries (cold)", "cold s", "warm s", "cold < 1 s", "warm < 0.2 s"], rows)
    print(f"\n{args.rows:,} rows x 44 columns; median of {args.repeat}; cold = new query cache, warm = same version and filters.")


if __name__ == "__main__":
    main()
