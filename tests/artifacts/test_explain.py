""" "Explain this number": lib.artifacts.explain over the demo workspaces, refreshed into a temporary cache,
checked against the spec and against the CSV files themselves; the CLI in its own processes."""

from __future__ import annotations

import csv
import json
import sqlite3
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa

from lib.artifacts.explain import ExplainError, explain, inline, parse_filters
from lib.artifacts.render import CACHE, filter_states, render
from lib.data.queries import run_query
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR
from tests.helpers import current_id
from tests.helpers.app import signed_in
from tests.helpers.report import cli

from ..conftest import ROOT, SERVERS, server_engine, statements_sent


def loaded(folder: Path, cache: Path):
    """The workspace, its warehouse after a refresh into `cache`, the snapshot and its tables."""
    ws, _ = workspace.load(folder)
    wh = Warehouse.for_workspace(folder, cache)
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok, report.summary()
    snapshot = wh.current()
    assert snapshot is not None
    return ws, snapshot, wh.tables(snapshot)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def supply(ws_copy, tmp_path):
    folder = ws_copy("supply-chain-weekly")
    return (folder, *loaded(folder, tmp_path / "cache"))


def test_kpi_bound_sql_reproduces_the_rendered_number_and_the_rows_behind_it_satisfy_the_filter(supply):
    folder, ws, snapshot, tables = supply
    chosen = {"site": ["Brno", "Leipzig"]}
    e = explain(ws.data, tables, snapshot, "kpi_attainment", chosen, workspace_path=folder)
    spec = next(c for c in ws.data["dashboard"]["components"] if c["id"] == "kpi_attainment")

    (q,) = e.queries
    assert q.sql == spec["query"] and q.params == {"site": ["Brno", "Leipzig"]}
    rendered = render(ws.data, tables, snapshot.id, chosen, workspace_path=folder).component("kpi_attainment")
    assert rendered.value is not None
    # The bound SQL, run as it is listed, gives the number on the dashboard.
    assert run_query(tables, q.sql, q.params).rows[0][0] == pytest.approx(rendered.value)
    assert q.result_rows[0]["value"] == pytest.approx(rendered.value)
    # ... and so does the CSV itself.
    gates = [r for r in csv_rows(folder / "data" / "gates.csv") if r["site"] in chosen["site"]]
    assert rendered.value == pytest.approx(sum(int(r["actual"]) for r in gates) / sum(int(r["target"]) for r in gates))

    # The readable form inlines the values; the parameters are what runs.
    assert "$site" not in q.readable and "['Brno', 'Leipzig']" in q.readable
    # Rows behind it: the base table with the same WHERE, every one inside the filter.
    assert q.sample_sql is not None and q.sample_sql.startswith("SELECT * FROM gates WHERE")
    assert 0 < len(q.sample_rows) <= 5 and all(r["site"] in chosen["site"] for r in q.sample_rows)
    assert q.sample_matching == len(gates)
    assert set(q.sample_rows[0]) == set(tables["gates"].column_names)

    assert [(s.table, s.source, s.type, s.location, s.rows) for s in e.sources] == [("gates", "gates", "csv", "file data/gates.csv", tables["gates"].num_rows)]
    assert e.data == {"live": [], "snapshot_id": snapshot.id, "loaded": snapshot.created}
    rules = {r.id: r.why for r in e.rules}
    assert "attainment-weighted" in rules and "actual" in rules["attainment-weighted"]  # its text names the columns summed
    assert rules["week-label"].startswith("global")
    assert rules["attainment-green"].startswith("its check is on 'attainment'")  # the measure the KPI's title names
    assert not {"gate-colors", "gate-colors-orders", "gate-colors-process"} & set(rules)  # about `gate`, which this KPI does not read


def test_no_filter_binds_null_and_covers_every_row(supply):
    folder, ws, snapshot, tables = supply
    e = explain(ws.data, tables, snapshot, "by_gate", {}, workspace_path=folder)
    (q,) = e.queries
    assert q.params == {"site": None} and "NULL IS NULL" in q.readable
    assert q.sample_matching == tables["gates"].num_rows
    rendered = render(ws.data, tables, snapshot.id, {}, workspace_path=folder).component("by_gate")
    assert rendered.result is not None and q.result_rows == rendered.result.table.slice(0, 5).to_pylist()
    assert {"gate-colors", "gate-colors-orders", "gate-colors-process", "attainment-green"} <= {r.id for r in e.rules}


def test_own_file_in_place_of_a_table_is_explained_on_that_file_not_from_the_cache(supply):
    """The Dashboard's "try it with your own data": the tables differ from the snapshot's under another version."""
    folder, ws, snapshot, tables = supply
    before = render(ws.data, tables, snapshot.id, {}, workspace_path=folder).component("kpi_volume").value  # now cached under the snapshot id
    own = tables["gates"].slice(0, 3)
    swapped = {**tables, "gates": own}
    e = explain(ws.data, swapped, snapshot, "kpi_volume", {}, workspace_path=folder, version=f"{snapshot.id}+gates:own")
    (q,) = e.queries
    assert q.result_rows[0]["value"] == sum(own.column("actual").to_pylist()) != before
    assert q.sample_matching == 3 and e.data["replaced"] == f"{snapshot.id}+gates:own"


def test_a_query_over_a_subquery_has_no_rows_behind_it(supply):
    folder, ws, snapshot, tables = supply
    e = explain(ws.data, tables, snapshot, "kpi_gates_missed", {"site": ["Porto"]}, workspace_path=folder)
    (q,) = e.queries
    assert q.sample_sql is None and q.sample_rows == [] and "subquery" in q.sample_note
    assert q.tables == ["gates"]
    assert run_query(tables, q.sql, q.params).rows[0][0] == q.result_rows[0]["value"]


def test_a_text_block_explains_each_of_its_queries(supply):
    folder, ws, snapshot, tables = supply
    e = explain(ws.data, tables, snapshot, "insight", {"site": ["Lyon"]}, workspace_path=folder)
    assert [q.name for q in e.queries] == ["wk", "worst", "best", "day"]
    assert all(r["site"] == "Lyon" for q in e.queries for r in q.sample_rows)
    assert e.queries[2].result_rows == [{"site": "Lyon", "attainment": pytest.approx(e.queries[0].result_rows[0]["attainment"])}]


def test_each_query_is_named_as_a_person_reads_it(supply):
    """Issue #31, 14: Explain said "Query `query`" of a KPI's one query."""
    folder, ws, snapshot, tables = supply
    (kpi_query,) = explain(ws.data, tables, snapshot, "kpi_attainment", {}, workspace_path=folder).queries
    assert kpi_query.label == "This component's query"
    text_queries = explain(ws.data, tables, snapshot, "insight", {}, workspace_path=folder).queries
    assert [q.label for q in text_queries] == ["The query `wk`", "The query `worst`", "The query `best`", "The query `day`"]


def test_a_range_filter_on_the_gdp_workspace(ws_copy, tmp_path):
    folder = ws_copy("gdp-explorer")
    ws, snapshot, tables = loaded(folder, tmp_path / "cache")
    chosen = parse_filters(ws.data["dashboard"], filter_states(ws.data["dashboard"], tables, snapshot.id), ["year=2000..2002"])
    assert chosen == {"year": (2000, 2002)}
    e = explain(ws.data, tables, snapshot, "world_trend", chosen, workspace_path=folder)
    (q,) = e.queries
    assert q.params == {"year_from": 2000, "year_to": 2002}
    assert [r["year"] for r in q.result_rows] == [2000, 2001, 2002]
    assert q.sample_matching == 3 and all(r["Country Code"] == "WLD" and 2000 <= r["Year"] <= 2002 for r in q.sample_rows)
    world = {int(r["Year"]): float(r["Value"]) for r in csv_rows(folder / "data" / "gdp.csv") if r["Country Code"] == "WLD"}
    assert [r["gdp_bn"] for r in q.result_rows] == pytest.approx([world[y] / 1e9 for y in (2000, 2001, 2002)])
    # A WITH query reads its table but has no rows behind it that one WHERE describes.
    top = explain(ws.data, tables, snapshot, "top_economies", {}, workspace_path=folder)
    assert top.queries[0].tables == ["gdp"] and "WITH" in top.queries[0].sample_note


def test_bad_component_and_filters_are_refused_naming_what_exists(supply):
    folder, ws, snapshot, tables = supply
    with pytest.raises(ExplainError, match=r"no component 'nope'.*kpi_attainment, kpi_volume"):
        explain(ws.data, tables, snapshot, "nope", {})
    dashboard = ws.data["dashboard"]
    states = filter_states(dashboard, tables, snapshot.id, CACHE)
    with pytest.raises(ExplainError, match=r"filter 'colour' is not a filter of this dashboard; its filters: site"):
        parse_filters(dashboard, states, ["colour=red"])
    with pytest.raises(ExplainError, match=r"'Atlantis' is not one of its options \(Brno, Leipzig"):
        parse_filters(dashboard, states, ["site=Atlantis"])
    with pytest.raises(ExplainError, match="ID=VALUE"):
        parse_filters(dashboard, states, ["site"])
    assert parse_filters(dashboard, states, ["site=Brno", "site=Porto"]) == {"site": ["Brno", "Porto"]}


def test_inlining_is_for_reading_and_quotes_hostile_values():
    sql = "SELECT 1 FROM t WHERE name = $who AND day >= $from_day AND ($ids IS NULL OR list_contains($ids, id))"
    import datetime as dt

    text = inline(sql, {"who": "x'; DROP TABLE t; --", "from_day": dt.date(2026, 11, 16), "ids": [1, 2]})
    assert text == "SELECT 1 FROM t WHERE name = 'x''; DROP TABLE t; --' AND day >= DATE '2026-11-16' AND ([1, 2] IS NULL OR list_contains([1, 2], id))"
    assert inline("SELECT $unknown", {}) == "SELECT $unknown"  # a parameter without a value stays as written


def test_a_live_sqlite_source_is_explained_from_its_database_with_the_url_redacted(tmp_path, monkeypatch):
    folder = tmp_path / "ws"
    folder.mkdir()
    with sqlite3.connect(folder / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1200), ("south", 3400), ("north", 50)])
    files = {
        "sources": {"sources": [{"name": "orders", "type": "sql", "url": "sqlite:///local.db", "table": "orders", "mode": "live", "cache_ttl_s": 0}]},
        "dashboard": {
            "title": "Orders",
            "filters": [{"id": "region", "type": "select", "options_query": "SELECT DISTINCT region FROM orders ORDER BY 1"}],
            "components": [{"id": "total", "type": "kpi", "query": "SELECT sum(sales) AS value FROM orders WHERE ($region IS NULL OR region = $region)"}],
        },
        "task": {"rules": []},
    }
    tables = {"orders": pa.table({"region": pa.array([], "string"), "sales": pa.array([], "int64")})}  # what refresh keeps of a live table
    e = explain(files, tables, None, "total", {"region": "north"}, workspace_path=folder)
    (q,) = e.queries
    assert q.result_rows == [{"value": 1250}] and q.sample_matching == 2 and {r["region"] for r in q.sample_rows} == {"north"}
    assert e.data == {"live": ["orders"], "live_cache_s": {"orders": 0}}
    assert "orders is live, read from its database when the query runs" in e.text()
    (source,) = e.sources
    assert source.live and source.rows is None and source.location == "sqlite:///local.db, table orders"


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_live_server_source_explains_a_multiselect_with_the_rows_read_read_only_from_it(kind, tmp_path):
    """The sample query goes to the database like the component's own: transpiled, the list bound value by value."""
    engine = server_engine(kind)
    table = f"explain_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        connection.execute(sa.text(f"CREATE TABLE {table} (site VARCHAR(20), actual INTEGER)"))
        connection.execute(sa.text(f"INSERT INTO {table} VALUES ('Brno', 5), ('Porto', 7), ('Lyon', 11), ('Brno', 13)"))
    try:
        files = {
            "sources": {"sources": [{"name": "gates", "type": "sql", "url": SERVERS[kind][2], "table": table, "mode": "live", "cache_ttl_s": 0}]},
            "dashboard": {
                "filters": [{"id": "site", "type": "multiselect", "options_query": "SELECT DISTINCT site FROM gates ORDER BY 1"}],
                "components": [
                    {"id": "k", "type": "kpi", "query": "SELECT sum(actual) AS value FROM gates WHERE ($site IS NULL OR list_contains($site, site))"}
                ],
            },
        }
        empty = {"gates": pa.table({"site": pa.array([], "string"), "actual": pa.array([], "int64")})}
        with statements_sent() as sent:
            e = explain(files, empty, None, "k", {"site": ["Brno", "Lyon"]}, workspace_path=tmp_path)
        (q,) = e.queries
        assert q.result_rows == [{"value": 29}] and q.sample_matching == 3
        assert sorted(r["site"] for r in q.sample_rows) == ["Brno", "Brno", "Lyon"]
        read = [text for text, _ in sent if table in text]
        assert len(read) >= 3 and not [text for text in read if "Brno" in text]  # the values travel as parameters, never in the SQL text
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE {table}"))


def test_source_locations_never_show_credentials():
    files = {
        "sources": {
            "sources": [
                {"name": "sales", "type": "sql", "url": "postgresql://reader:s3cret-pw@db.example/sales", "table": "public.sales"},
                {"name": "rates", "type": "rest", "url": "https://api.example/v1/rates?access_token=tok-123456&base=EUR"},
            ]
        },
        "dashboard": {"components": [{"id": "t", "type": "table", "query": "SELECT s.amount * r.rate AS eur FROM sales s JOIN rates r ON s.cur = r.cur"}]},
    }
    tables = {"sales": pa.table({"amount": [10.0], "cur": ["USD"]}), "rates": pa.table({"cur": ["USD"], "rate": [0.5]})}
    e = explain(files, tables, None, "t", {})
    assert e.queries[0].result_rows == [{"eur": 5.0}] and "joins" in e.queries[0].sample_note
    where = {s.table: s.location for s in e.sources}
    assert where == {
        "rates": "GET https://api.example/v1/rates?access_token=***&base=EUR",
        "sales": "postgresql://reader:***@db.example/sales, table public.sales",
    }


# --------------------------------------------------------------------------- the CLI, in its own processes


@pytest.mark.slow
def test_cli_refresh_in_one_process_explain_in_another(ws_copy, tmp_path):
    folder = ws_copy("supply-chain-weekly")
    cache = tmp_path / "cache"
    refreshed = cli("refresh", folder, cache=cache)
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    proc = cli("explain", folder, "kpi_volume", "--filter", "site=Brno", "--filter", "site=Porto", "--json", cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    e = json.loads(proc.stdout)
    gates = [r for r in csv_rows(folder / "data" / "gates.csv") if r["site"] in ("Brno", "Porto")]
    (q,) = e["queries"]
    assert e["ok"] is True and e["filters"] == {"site": ["Brno", "Porto"]} and q["params"] == {"site": ["Brno", "Porto"]}
    assert q["result_rows"] == [{"value": sum(int(r["actual"]) for r in gates), "target": sum(int(r["target"]) for r in gates)}]
    assert q["sample_matching"] == len(gates) and all(r["site"] in ("Brno", "Porto") for r in q["sample_rows"])
    wh = Warehouse.for_workspace(folder, cache)
    assert e["data"]["snapshot_id"] == current_id(wh)  # the data the first process loaded, not a new load
    text = cli("explain", folder, "kpi_volume", "--filter", "site=Brno", cache=cache)
    assert text.returncode == 0 and "$site = ['Brno']" in text.stdout and "file data/gates.csv" in text.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "no component 'nope' in this dashboard; its components: kpi_attainment"),
        (["kpi_volume", "--filter", "colour=red"], "filter 'colour' is not a filter of this dashboard; its filters: site"),
        (["kpi_volume", "--filter", "site=Atlantis"], "'Atlantis' is not one of its options"),
    ],
)
def test_cli_errors_exit_1_in_one_line(ws_copy, tmp_path, args, message):
    folder = ws_copy("supply-chain-weekly")
    proc = cli("explain", folder, *args, cache=tmp_path / "cache")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and message in proc.stderr and "Traceback" not in proc.stderr
    as_json = cli("explain", folder, *args, "--json", cache=tmp_path / "cache")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["ok"] is False and message in json.loads(as_json.stdout)["error"]


# --------------------------------------------------------------------------- the Dashboard's popover


def test_dashboard_popover_shows_the_sql_and_sources_only_when_opened(env):
    at = signed_in("vera")
    assert not [c for c in at.code if "FROM gates" in c.value]  # closed popovers work nothing out
    at.session_state["explain:supply-chain-weekly:kpi_attainment"] = True  # what opening it sets
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    spec = next(c for c in workspace.load(ROOT / "workspaces" / "supply-chain-weekly")[0].data["dashboard"]["components"] if c["id"] == "kpi_attainment")
    assert [c.value for c in at.code if c.language == "sql"][0] == spec["query"]
    (sources,) = [d.value for d in at.dataframe if "location" in d.value.columns]
    assert sources.to_dict("records") == [
        {
            "table": "gates",
            "source": "gates",
            "type": "csv",
            "location": "file data/gates.csv",
            "rows": len(csv_rows(ROOT / "workspaces" / "supply-chain-weekly" / "data" / "gates.csv")),
        }
    ]
    assert any("snapshot" in c.value for c in at.caption)
    assert any("attainment-weighted" in m.value for m in at.markdown)


def test_a_constant_and_a_failing_query_are_explained_not_raised():
    files = {
        "dashboard": {
            "components": [
                {"id": "const", "type": "kpi", "query": "SELECT 42 AS value"},
                {"id": "broken", "type": "kpi", "query": "SELECT sum(volume) AS value FROM gates"},
            ]
        }
    }
    tables = {"gates": pa.table({"actual": [1, 2]})}
    const = explain(files, tables, None, "const", {})
    assert const.queries[0].result_rows == [{"value": 42}] and const.queries[0].sample_note == "it reads no table" and const.sources == []
    broken = explain(files, tables, None, "broken", {})
    (q,) = broken.queries
    assert q.error and "volume" in q.error and q.result_rows == [] and q.tables == ["gates"]
    assert "error: " in broken.text() and [s.table for s in broken.sources] == ["gates"]
