"""What changed since the last refresh (lib.artifacts.changes) and data time travel (lib.artifacts.time_travel).

Two real refreshes, each in its own process (`python -m lib refresh`), with
different CSV data; the previous values and the changes list are then read in
this process and in a third one (`python -m lib changes`), and checked against
sums worked out from the CSV files with the csv module.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from lib.artifacts.changes import ONLY_ONE_LOAD, compare, compare_tables, previous_of
from lib.artifacts.drilldown import drilldown
from lib.artifacts.explain import explain
from lib.artifacts.time_travel import ReadOnlyData, TimeTravelError, open_as_of
from lib.core.formats import format_value
from lib.data.engine import NO_EARLIER_DATA, NoEarlierData
from lib.data.snapshots import Warehouse, loaded_at
from lib.memory import workspace
from lib.roles.access import PermissionDenied, User
from tests.helpers.app import signed_in

from ..conftest import ROOT

VIEWER = User("vera", app_role="viewer")
META = {"access": {"owners": ["olga"], "stewards": ["sam"], "viewers": ["vera"]}}


def cli(*args, cache: Path) -> subprocess.CompletedProcess:
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "HOME": str(cache),
        "DASHMEM_CACHE_DIR": str(cache),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }
    return subprocess.run([sys.executable, "-m", "lib", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")


def second_week(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Brno ships 10 % less, Porto's Process gate stops reporting, a new site Zagreb reports one gate."""
    changed = []
    for r in rows:
        if r["site"] == "Porto" and r["gate"] == "Process":
            continue
        changed.append({**r, "actual": str(int(int(r["actual"]) * 0.9))} if r["site"] == "Brno" else dict(r))
    changed.append({**rows[0], "site": "Zagreb", "actual": "700"})
    return changed


def attainment(rows, *key_columns) -> dict[tuple, float]:
    """sum(actual) / sum(target) by the key columns, worked out from the CSV rows."""
    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        key = tuple(r[c] for c in key_columns)
        sums[key][0] += int(r["actual"])
        sums[key][1] += int(r["target"])
    return {k: a / t for k, (a, t) in sums.items()}


@pytest.fixture
def two_loads(ws_copy, tmp_path):
    """The supply workspace refreshed twice, each refresh in its own process, with different data."""
    folder = ws_copy("supply-chain-weekly")
    cache = tmp_path / "cache"
    data = folder / "data" / "gates.csv"
    first = read_rows(data)
    proc = cli("refresh", folder, cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    second = second_week(first)
    write_rows(data, second)
    proc = cli("refresh", folder, cache=cache)
    assert proc.returncode == 0 and "switched to snapshot" in proc.stdout, proc.stdout + proc.stderr
    return folder, cache, first, second


@pytest.mark.slow
def test_the_cli_reads_earlier_loads_without_writing_and_refuses_hostile_arguments_plainly(two_loads):
    folder, cache, _, _ = two_loads
    older = Warehouse.for_workspace(folder, cache).snapshots()[-1]

    def state() -> dict:
        return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for root in (folder, cache) for p in sorted(root.rglob("*")) if p.is_file()}

    before = state()
    for args in (
        ["changes", folder, "--snapshot", older.id, "--json"],
        ["changes", folder, "--top", "1"],
        ["rows", folder, "by_site", "--select", "site=Brno"],
        ["explain", folder, "kpi_attainment", "--filter", "site=Brno"],
    ):
        proc = cli(*args, cache=cache)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for args, message in (
        (["changes", folder, "--snapshot", "../../" + older.id], "no kept snapshot '../../"),
        (["changes", folder, "--top", "-5"], "the moves listed per component (--top) must be 0 or more (got -5)"),
        (["rows", folder, "by_site", "--select", "site=x'; DROP TABLE gates; --"], "is not one of its options"),
        (["explain", folder, "../../etc/passwd"], "no component '../../etc/passwd'"),
    ):
        proc = cli(*args, cache=cache)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert state() == before  # looking back, listing rows and explaining write nothing: not the cache, not the workspace


@pytest.mark.slow
def test_two_refreshes_in_other_processes_give_each_kpi_its_previous_value_and_the_biggest_moves(two_loads):
    folder, cache, first, second = two_loads
    ws, _ = workspace.load(folder)
    wh = Warehouse.for_workspace(folder, cache)
    kept = wh.snapshots()
    assert len(kept) == 2 and previous_of(wh, kept[0]) == kept[1] and previous_of(wh, kept[1]) is None
    found = compare(ws.data, wh, workspace_path=folder)
    assert found.current["id"] == kept[0].id and found.previous is not None and found.previous["id"] == kept[1].id

    # Each KPI then and now, against the CSV files.
    before, after = attainment(first)[()], attainment(second)[()]
    kpi = found.of("kpi_attainment")
    assert kpi is not None and kpi.kpi is not None
    assert kpi.kpi.before == pytest.approx(before) and kpi.kpi.after == pytest.approx(after)
    assert kpi.kpi.before_display == format_value(before, ".1%") and kpi.kpi.relative == pytest.approx((after - before) / before)
    assert kpi.kpi.delta_display == format_value((after - before) * 100, "+.1f") + " pts"
    assert found.was("kpi_attainment").startswith(f"was {format_value(before, '.1%')} ({kpi.kpi.delta_display}) on ")
    volume = found.of("kpi_volume")
    assert volume is not None and volume.kpi is not None
    assert (volume.kpi.before, volume.kpi.after) == (sum(int(r["actual"]) for r in first), sum(int(r["actual"]) for r in second))
    assert volume.kpi.delta_display == format_value(volume.kpi.after - volume.kpi.before, "+,.0f")

    # The table, keyed on site and gate: moves are the CSV's sums; Zagreb Supply appeared, Porto Process disappeared.
    table = found.of("site_gate")
    assert table is not None and not table.note
    old, new = attainment(first, "site", "gate"), attainment(second, "site", "gate")
    assert [tuple(m.key.values()) for m in table.appeared] == [("Zagreb", "Supply")] and table.appeared_count == 1
    assert [tuple(m.key.values()) for m in table.disappeared] == [("Porto", "Process")] and table.disappeared_count == 1
    assert "Zagreb Supply: new (" in table.appeared[0].text and "Porto Process: no longer shown (was " in table.disappeared[0].text
    shown_changes = [k for k in old.keys() & new.keys() if format_value(old[k], ".1%") != format_value(new[k], ".1%")]
    attainment_moves = [m for m in table.moves if m.measure == "Attainment"]
    assert attainment_moves and all(m.before == pytest.approx(old[tuple(m.key.values())]) for m in attainment_moves)
    assert all(m.after == pytest.approx(new[tuple(m.key.values())]) for m in attainment_moves)
    assert {tuple(m.key.values()) for m in attainment_moves} <= set(shown_changes)
    assert all(k[0] == "Brno" for k in shown_changes)  # only Brno's figures moved
    scores = [abs(m.relative) for m in table.moves if m.relative is not None]
    assert scores == sorted(scores, reverse=True) and len(table.moves) <= 5
    brno = next(m for m in table.moves if m.key == {"Site": "Brno", "Gate": "Supply"} and m.measure == "Attainment")
    assert (
        brno.text
        == f"Brno Supply Attainment {format_value(old[('Brno', 'Supply')], '.1%')} → {format_value(new[('Brno', 'Supply')], '.1%')} ({brno.delta_display})"
    )

    # A chart by site: its measure compared per site, in the chart's own format (y: .0%).
    by_site = found.of("by_site")
    assert by_site is not None
    sites_old, sites_new = attainment(first, "site"), attainment(second, "site")
    (brno_site,) = [m for m in by_site.moves if m.key == {"Site": "Brno"}]
    assert brno_site.before == pytest.approx(sites_old[("Brno",)]) and brno_site.after_display == format_value(sites_new[("Brno",)], ".0%")
    assert [m.key for m in by_site.appeared] == [{"Site": "Zagreb"}] and by_site.disappeared == []

    # A filter narrows both sides: Lyon's figures did not move.
    lyon = compare(ws.data, wh, chosen_filters={"site": ["Lyon"]}, workspace_path=folder)
    assert all(not c.changed for c in lyon.components) and lyon.was("kpi_attainment").startswith("unchanged since")

    # The same, from a third process.
    proc = cli("changes", folder, "--json", cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    as_json = json.loads(proc.stdout)
    assert as_json["ok"] is True and as_json["previous"]["id"] == kept[1].id and as_json["previous"]["created"] == kept[1].created
    (kpi_json,) = [c for c in as_json["components"] if c["component"] == "kpi_attainment"]
    assert kpi_json["kpi"]["before"] == pytest.approx(before) and kpi_json["kpi"]["after"] == pytest.approx(after)
    text = cli("changes", folder, "--top", "1", cache=cache)
    assert text.returncode == 0 and f"kpi kpi_attainment (Attainment this week): {kpi.kpi.before_display} → {kpi.kpi.after_display}" in text.stdout
    assert "Zagreb Supply: new" in text.stdout and "smaller change(s)" in text.stdout
    older = cli("changes", folder, "--snapshot", kept[1].id, cache=cache)  # the oldest kept load has none before it
    assert older.returncode == 0 and ONLY_ONE_LOAD in older.stdout
    unknown = cli("changes", folder, "--snapshot", "nope", cache=cache)
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: no kept snapshot 'nope'") and "Traceback" not in unknown.stderr


def test_a_workspace_with_one_load_has_nothing_to_compare(ws_copy, tmp_path):
    from lib.data.refresh import refresh
    from lib.roles.access import OPERATOR

    folder = ws_copy("supply-chain-weekly")
    wh = Warehouse.for_workspace(folder, tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    ws, _ = workspace.load(folder)
    found = compare(ws.data, wh, workspace_path=folder)
    assert found.previous is None and found.components and all(c.note == ONLY_ONE_LOAD and c.kpi is None for c in found.components)
    assert found.was("kpi_attainment") == "" and "nothing to compare with" in found.text()
    assert "insight" not in [c.component for c in found.components]  # text blocks are not compared
    as_of = open_as_of(wh, None, user=VIEWER, meta=META)
    assert as_of.is_latest and as_of.banner() == ""


def orders_and_targets(orders_url: str, targets_path: str) -> dict:
    """Sources and dashboard: a KPI over a live SQL table `orders` (sales), one over a CSV snapshot table `targets` (target)."""
    return {
        "sources": {
            "sources": [
                {"name": "orders", "type": "sql", "url": orders_url, "table": "orders", "mode": "live", "cache_ttl_s": 0},
                {"name": "targets", "type": "csv", "path": targets_path},
            ]
        },
        "dashboard": {
            "title": "Orders",
            "components": [
                {"id": "sales", "type": "kpi", "title": "Sales", "query": "SELECT sum(sales) AS value FROM orders", "format": ",d"},
                {"id": "target", "type": "kpi", "title": "Target", "query": "SELECT sum(target) AS value FROM targets", "format": ",d"},
            ],
            "layout": [["sales", "target"]],
        },
    }


def live_workspace(tmp_path: Path) -> tuple[Path, dict, Warehouse]:
    """A live SQLite source beside a snapshot table, loaded twice with different targets."""
    folder = tmp_path / "ws"
    folder.mkdir()
    with sqlite3.connect(folder / "local.db") as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1200), ("south", 3400)])
    files = orders_and_targets("sqlite:///local.db", "targets.csv")
    wh = Warehouse(tmp_path / "cache")
    empty = pa.table({"region": pa.array([], "string"), "sales": pa.array([], "int64")})  # what refresh keeps of a live table
    wh.write_snapshot({"orders": empty, "targets": pa.table({"target": [1000, 2000]})})
    wh.write_snapshot({"orders": empty, "targets": pa.table({"target": [1500, 2000]})})
    return folder, files, wh


def test_a_live_source_has_no_earlier_data_and_a_snapshot_table_beside_it_does(tmp_path):
    folder, files, wh = live_workspace(tmp_path)
    found = compare(files, wh, workspace_path=folder)
    sales, target = found.of("sales"), found.of("target")
    assert sales is not None and target is not None
    assert sales.note.startswith(NO_EARLIER_DATA) and "orders is a live source" in sales.note and sales.kpi is None
    assert found.was("sales") == sales.note
    assert target.kpi is not None and (target.kpi.before, target.kpi.after, target.kpi.delta_display) == (3000, 3500, "+500")

    # Time travel over the same workspace: the live KPI says so instead of showing today's figure as an old one.
    older = wh.snapshots()[1]
    as_of = open_as_of(wh, older.id, user=VIEWER, meta=META)
    rendered = as_of.render(files, workspace_path=folder)
    assert rendered.component("target").value == 3000
    error = rendered.component("sales").error
    assert error is not None and error.startswith(NO_EARLIER_DATA)
    explained = explain(files, as_of.tables, older, "sales", workspace_path=folder, engine=as_of.engine(files))  # Explain on that view
    assert explained.queries[0].error is not None and explained.queries[0].error.startswith(NO_EARLIER_DATA)
    assert explain(files, as_of.tables, older, "target", workspace_path=folder, engine=as_of.engine(files)).queries[0].result_rows == [{"value": 3000}]
    latest = open_as_of(wh, None, user=VIEWER, meta=META).render(files, workspace_path=folder)
    assert latest.component("sales").value == 4600 and latest.component("target").value == 3500


def test_time_travel_is_read_only_and_for_anyone_who_may_view(tmp_path):
    folder, files, wh = live_workspace(tmp_path)
    newest, older = wh.snapshots()

    def state() -> dict:
        return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(wh.folder.rglob("*"))}

    before = state()
    as_of = open_as_of(wh, older.id, user=VIEWER, meta=META)  # a viewer may not pin (switch_to), but may look back
    assert not as_of.is_latest and as_of.latest == newest and "not what everyone sees" in as_of.banner() and "for your session only" in as_of.banner()
    assert as_of.render(files, workspace_path=folder).component("target").value == 3000
    for write in (
        lambda: as_of.warehouse.write_snapshot({"targets": pa.table({"target": [1]})}),
        lambda: as_of.warehouse.switch_to(older.id, user=VIEWER, meta=META),
        lambda: as_of.warehouse.mark_checked(),
        lambda: as_of.warehouse.current(),  # its housekeeping deletes files
        lambda: setattr(as_of.warehouse, "folder", tmp_path),
    ):
        with pytest.raises(ReadOnlyData, match="read-only"):
            write()
    with pytest.raises(PermissionDenied):
        wh.switch_to(older.id, user=VIEWER, meta=META)
    assert state() == before and wh.current() == newest and not wh.pin.exists()  # nothing anyone else sees has changed
    with pytest.raises(PermissionDenied):
        open_as_of(wh, older.id, user=User("mallory"), meta=META)
    with pytest.raises(TimeTravelError, match="no longer kept"):
        open_as_of(wh, "20200101T000000.000000Z-000000", user=VIEWER, meta=META)
    with pytest.raises(TimeTravelError, match="no data loaded yet"):
        open_as_of(Warehouse(tmp_path / "empty"), None, user=VIEWER, meta=META)


def test_show_rows_on_an_earlier_load_reads_no_live_database_and_gives_that_loads_snapshot_rows(tmp_path):
    folder, files, wh = live_workspace(tmp_path)
    newest, older = wh.snapshots()
    as_of = open_as_of(wh, older.id, user=VIEWER, meta=META)
    with pytest.raises(NoEarlierData) as refused:  # today's orders are not the rows behind an earlier load's figures
        drilldown(files, as_of.tables, as_of.version, "sales", workspace_path=folder, engine=as_of.engine(files))
    assert str(refused.value).startswith(NO_EARLIER_DATA) and "orders is a live source" in str(refused.value)
    earlier = drilldown(files, as_of.tables, as_of.version, "target", workspace_path=folder, engine=as_of.engine(files))
    assert (earlier.rows, earlier.matching) == ([{"target": 1000}, {"target": 2000}], 2)

    latest = open_as_of(wh, None, user=VIEWER, meta=META)  # the data everyone sees: the live source read as before
    assert latest.engine(files) is None
    today = drilldown(files, latest.tables, latest.version, "sales", workspace_path=folder, engine=latest.engine(files))
    assert (today.rows, today.matching) == ([{"region": "north", "sales": 1200}, {"region": "south", "sales": 3400}], 2)
    assert drilldown(files, latest.tables, latest.version, "target", workspace_path=folder).rows == [{"target": 1500}, {"target": 2000}]


def test_changes_of_an_earlier_load_never_query_the_live_database(tmp_path):
    """Its live component says there is no earlier data, even when today's database cannot be read at all."""
    folder, files, wh = live_workspace(tmp_path)
    empty = pa.table({"region": pa.array([], "string"), "sales": pa.array([], "int64")})
    wh.write_snapshot({"orders": empty, "targets": pa.table({"target": [1700, 2000]})})
    newest, middle, oldest = wh.snapshots()
    (folder / "local.db").unlink()  # any query of today's database now fails, and says so
    as_of = open_as_of(wh, middle.id, user=VIEWER, meta=META)
    for found in (
        compare(files, wh, middle, workspace_path=folder),  # python -m lib changes --snapshot
        compare_tables(files, middle, as_of.tables, oldest, wh.tables(oldest), workspace_path=folder, engine=as_of.engine(files)),  # the page's panel
    ):
        sales, target = found.of("sales"), found.of("target")
        assert sales is not None and sales.note.startswith(NO_EARLIER_DATA) and "orders is a live source" in sales.note, sales
        assert sales.kpi is None and target is not None and target.kpi is not None and (target.kpi.before, target.kpi.after) == (3000, 3500)
    latest = compare(files, wh, workspace_path=folder).of("sales")  # the data served: the query does run in today's database
    assert latest is not None and latest.note.startswith("not compared: the query fails"), latest


# --------------------------------------------------------------------------- the Dashboard page


def test_a_viewer_opens_an_earlier_load_sees_its_figures_and_the_banner_and_others_see_the_latest(env):
    at = signed_in("vera")
    path = at.session_state["config_repo"].published_path("supply-chain-weekly")
    wh = Warehouse.for_workspace(path)
    first = wh.current()
    assert first is not None and not [s for s in at.selectbox if s.label == "Data as of"]  # one load: nothing to choose
    gates = wh.tables(first)["gates"]
    rows = read_rows(path / "data" / "gates.csv")
    first_value = attainment(rows)[()]
    second = second_week(rows)
    # A second load with other figures (written as a refresh writes it).
    actual = pa.array([int(r["actual"]) for r in second[:-1]] + [700], gates.schema.field("actual").type)
    kept = [i for i, r in enumerate(rows) if not (r["site"] == "Porto" and r["gate"] == "Process")] + [0]
    changed = gates.take(pa.array(kept)).set_column(gates.schema.get_field_index("actual"), "actual", actual)
    changed = changed.set_column(changed.schema.get_field_index("site"), "site", pa.array([r["site"] for r in second]))
    wh.write_snapshot({"gates": changed})
    second_value = attainment(second)[()]

    at.run()
    assert not at.exception, [e.message for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Attainment this week"] == format_value(second_value, ".1%")
    assert any(c.value.startswith(f"was {format_value(first_value, '.1%')}") for c in at.caption), [c.value for c in at.caption]
    assert any(e.label.startswith("Changes since the load of") for e in at.expander)
    assert any("Zagreb Supply: new" in m.value.replace("\\", "") for m in at.markdown)

    def exported() -> str:
        """The HTML file the Export HTML button prepares, as text."""
        import html

        from app_pages import state

        next(b for b in at.button if b.label == "Export HTML").click().run()
        assert not at.exception, [e.message for e in at.exception]
        return html.unescape(at.session_state[state.EXPORT_HTML][1])

    page = exported()  # the file shows what the page shows beside each KPI, and which load it is
    assert f"was {format_value(first_value, '.1%')}" in page and "Data as of the load of" in page and "an earlier load kept" not in page

    (choice,) = [s for s in at.selectbox if s.label == "Data as of"]
    assert choice.options[0].endswith("(latest)") and len(choice.options) == 2
    choice.set_value(first.id).run()
    assert not at.exception, [e.message for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Attainment this week"] == format_value(first_value, ".1%")
    assert any("not what everyone sees" in w.value for w in at.warning)
    assert any(c.value.startswith("Only one load is kept so far") or "nothing to compare" in c.value for c in at.caption)
    page = exported()
    assert "an earlier load kept: everyone is served the load of" in page and format_value(first_value, ".1%") in page

    other = signed_in("sam")  # another session: still the latest, no banner
    assert {m.label: m.value for m in other.metric}["Attainment this week"] == format_value(second_value, ".1%")
    assert not any("not what everyone sees" in w.value for w in other.warning)
    assert (current := wh.current()) is not None and current.id != first.id and not wh.pin.exists()

    # A third load: the session that never chose follows it; the one looking back stays where it was.
    wh.write_snapshot({"gates": gates})
    other.run()
    assert {m.label: m.value for m in other.metric}["Attainment this week"] == format_value(first_value, ".1%")
    assert not any("not what everyone sees" in w.value for w in other.warning)
    at.run()
    assert [s.value for s in at.selectbox if s.label == "Data as of"] == [first.id]
    assert any("not what everyone sees" in w.value for w in at.warning)


def test_a_table_the_earlier_load_lacks_is_said_in_a_plain_sentence(tmp_path):
    """A published version that adds a source is served with its table from then on; the load before has none.
    The KPI beside its value and the Changes panel say so, naming the table, not with the engine's text."""
    wh = Warehouse(tmp_path / "cache")
    sales = pa.table({"region": ["north", "south"], "amount": [10, 5]})
    earlier = wh.write_snapshot({"sales": sales})
    wh.write_snapshot({"sales": sales, "orders": pa.table({"region": ["north"], "orders": [3]})})
    components = [
        {"id": "orders", "type": "kpi", "title": "Orders", "query": "SELECT sum(orders) AS value FROM orders"},
        {"id": "total", "type": "kpi", "title": "Total", "query": "SELECT sum(amount) AS value FROM sales"},
    ]
    found = compare({"dashboard": {"components": components}}, wh)
    note = found.was("orders")
    assert note.startswith("not compared:") and "orders" in note and "earlier load" in note and "added" in note
    assert "Catalog Error" not in note and "does not exist" not in note
    assert loaded_at(earlier) in note  # it says which load: its time, as the page shows loads
    assert found.was("total").startswith("unchanged")  # the rest is compared as before
    assert "Catalog Error" not in found.text()


def test_what_cannot_be_compared_says_why_and_the_rest_is_still_compared(tmp_path):
    wh = Warehouse(tmp_path / "cache")
    wh.write_snapshot({"sales": pa.table({"region": ["north", "south"], "amount": [10, 0], "score": [0.5, 0.25]})})
    wh.write_snapshot({"sales": pa.table({"region": ["north", "south", "south"], "amount": [12, 5, 1], "score": [0.5, 0.75, 0.1], "extra": [1, 2, 3]})})
    components = [
        {"id": "total", "type": "kpi", "title": "Total", "query": "SELECT sum(amount) AS value FROM sales"},
        {"id": "by_region", "type": "table", "query": "SELECT region, sum(amount) AS amount FROM sales GROUP BY region ORDER BY region"},
        {"id": "rows", "type": "table", "query": "SELECT region, amount FROM sales"},  # south twice: rows cannot be matched
        {
            "id": "points",
            "type": "chart",
            "query": "SELECT amount, score FROM sales",
            "mark": "point",
            "encoding": {"x": {"field": "amount", "type": "quantitative"}, "y": {"field": "score", "type": "quantitative"}},
        },
        {"id": "new_column", "type": "kpi", "query": "SELECT sum(extra) AS value FROM sales"},
        {"id": "broken", "type": "kpi", "query": "SELECT sum(nope) AS value FROM sales"},
        {"id": "words", "type": "text", "markdown": "{{q.n}} rows", "queries": {"q": "SELECT count(*) AS n FROM sales"}},
    ]
    found = compare({"dashboard": {"components": components}, "output": {"number_formats": {"default": ",.1f"}}}, wh)
    notes = {c.component: c.note for c in found.components}
    assert notes["total"] == "" and found.of("total").kpi.text == "Total 10.0 → 18.0 (+8.0)"  # type: ignore[union-attr]  # the default format, as the card shows it
    assert notes["rows"] == "not compared row by row: its rows repeat the same region"
    assert notes["points"] == "not compared row by row: no category, date or year column to match its rows by"
    assert notes["new_column"].startswith("not compared: the query does not run on the earlier data") and "extra" in notes["new_column"]
    assert notes["broken"].startswith("not compared: the query fails") and "nope" in notes["broken"]
    assert "words" not in notes
    by_region = found.of("by_region")
    assert by_region is not None and [m.text for m in by_region.moves] == ["south amount 0 → 6 (+6)", "north amount 10 → 12 (+2)"]  # from 0 ranks first


def test_a_load_pruned_while_a_viewer_looks_at_it_gives_a_plain_message_not_a_crash(env):
    from lib.data.snapshots import KEEP_SNAPSHOTS

    at = signed_in("vera")
    path = at.session_state["config_repo"].published_path("supply-chain-weekly")
    wh = Warehouse.for_workspace(path)
    first = wh.current()
    assert first is not None
    gates = wh.tables(first)["gates"]
    wh.write_snapshot({"gates": gates.slice(0, 10)})
    at.run()
    (choice,) = [s for s in at.selectbox if s.label == "Data as of"]
    choice.set_value(first.id).run()
    assert any("not what everyone sees" in w.value for w in at.warning)
    other = signed_in("sam")
    for _ in range(KEEP_SNAPSHOTS + 1):  # keep five, load six more: the load vera looks at is gone
        wh.write_snapshot({"gates": gates})
        other.run()
        assert not other.exception, [e.message for e in other.exception]
    assert first.id not in {s.id for s in wh.snapshots()}
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not any("not what everyone sees" in w.value for w in at.warning)  # the data everyone is served, said plainly
    assert any(m in e.value for e in [*at.error, *at.warning, *at.info] for m in ("no longer kept",)), [e.value for e in [*at.error, *at.warning, *at.info]]
    assert at.metric and not other.exception
    # The session that never looked back followed each load without a word about pruning.
    assert not any("no longer kept" in e.value for e in [*other.error, *other.warning, *other.info])


def test_one_session_cross_filtering_and_another_looking_back_each_see_only_their_own_choice(env):
    import pyarrow.compute as pc

    viewer, steward = signed_in("vera"), signed_in("sam")
    path = viewer.session_state["config_repo"].published_path("supply-chain-weekly")
    wh = Warehouse.for_workspace(path)
    first = wh.current()
    assert first is not None
    gates = wh.tables(first)["gates"]
    rows = read_rows(path / "data" / "gates.csv")
    brno = [r for r in rows if r["site"] == "Brno"]
    wh.write_snapshot({"gates": gates.filter(pc.equal(gates["site"], "Brno"))})  # pyright: ignore[reportAttributeAccessIssue]  # a second load: Brno only (pc has no stubs)

    def shown(at) -> str:
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        return {m.label: m.value for m in at.metric}["Attainment this week"]

    everything_then, brno_now = format_value(attainment(rows)[()], ".1%"), format_value(attainment(brno)[()], ".1%")
    assert shown(viewer) == shown(steward) == brno_now
    (choice,) = [s for s in viewer.selectbox if s.label == "Data as of"]
    choice.set_value(first.id).run()  # vera looks back at the first load
    lyon = [r for r in rows if r["site"] == "Lyon"]
    next(m for m in steward.multiselect if m.label == "Sites").select("Brno").run()  # sam cross-filters today's data
    assert shown(viewer) == everything_then and any("not what everyone sees" in w.value for w in viewer.warning)
    assert next(m for m in viewer.multiselect if m.label == "Sites").value == []
    assert shown(steward) == brno_now and not any("not what everyone sees" in w.value for w in steward.warning)
    next(m for m in viewer.multiselect if m.label == "Sites").select("Lyon").run()
    assert shown(viewer) == format_value(attainment(lyon)[()], ".1%") and shown(steward) == brno_now
    assert [m.value for m in steward.multiselect if m.label == "Sites"] == [["Brno"]]


def loads_in_one_second(wh: Warehouse, *tables: dict) -> list:
    """Write one load per mapping of tables, all stamped within the same second (as a fast scheduled refresh can)."""
    for _ in range(20):
        loads = [wh.write_snapshot(t) for t in tables]
        if len({s.created[:19] for s in loads}) == 1:
            return loads
    raise AssertionError("could not write the loads within one second")


def with_actual_scaled(gates: pa.Table, factor: float) -> pa.Table:
    import pyarrow.compute as pc

    i = gates.schema.get_field_index("actual")
    return gates.set_column(i, "actual", pc.cast(pc.multiply(gates["actual"], factor), gates.schema.field("actual").type, safe=False))  # pyright: ignore[reportAttributeAccessIssue]  # pc has no stubs


def signed_in_with_two_loads_in_one_second(user: str):
    """`user`'s session on the demo, and two more loads within one second (actual halved, then as it was); the second returned."""
    at = signed_in(user)
    wh = Warehouse.for_workspace(at.session_state["config_repo"].published_path("supply-chain-weekly"))
    gates = wh.tables(wh.current())["gates"]
    _, second = loads_in_one_second(wh, {"gates": with_actual_scaled(gates, 0.5)}, {"gates": gates})
    return at, wh, gates, second


def test_two_loads_in_the_same_second_are_told_apart_when_looking_back(env):
    """Streamlit remembers a choice by its label: two loads shown with the same time were one choice."""
    at, wh, gates, third = signed_in_with_two_loads_in_one_second("vera")
    follower = signed_in("sam")
    third_value = {m.label: m.value for m in follower.metric}["Attainment this week"]
    wh.write_snapshot({"gates": with_actual_scaled(gates, 0.25)})
    at.run()
    (choice,) = [s for s in at.selectbox if s.label == "Data as of"]
    assert len(set(choice.options)) == len(choice.options), choice.options
    choice.set_value(third.id).run()
    assert not at.exception, [e.message for e in at.exception]
    assert [s.value for s in at.selectbox if s.label == "Data as of"] == [third.id]
    assert {m.label: m.value for m in at.metric}["Attainment this week"] == third_value
    assert any("not what everyone sees" in w.value for w in at.warning)


def test_serving_one_of_two_loads_in_the_same_second_serves_that_one(env):
    """The steward's "Earlier data": what everyone sees must be the load chosen, not its same-second neighbour."""
    at, wh, gates, third = signed_in_with_two_loads_in_one_second("sam")
    wh.write_snapshot({"gates": with_actual_scaled(gates, 0.25)})
    at.run()
    (loaded,) = [s for s in at.selectbox if s.label == "Loaded at"]
    assert len(set(loaded.options)) == len(loaded.options), loaded.options
    loaded.set_value(third.id).run()
    wh.write_snapshot({"gates": with_actual_scaled(gates, 0.75)})  # a scheduled refresh lands while sam reads the list
    next(b for b in at.button if b.label == "Serve this data").click().run()
    assert not at.exception, [e.message for e in at.exception]
    current = wh.current()
    assert current is not None and current.id == third.id
    (loaded,) = [s for s in at.selectbox if s.label == "Loaded at"]
    assert loaded.value == third.id  # and serving keeps the choice shown


def test_on_an_earlier_load_the_page_reads_nothing_of_the_live_database(env, monkeypatch):
    """Show rows, Explain and the Changes panel over a live SQLite source beside a CSV, looking back at an earlier load
    while today's database cannot be read at all: the live KPI says there is no earlier data, the CSV shows that load's rows."""
    import shutil

    from app_pages import state

    templates, data = env / "templates", env / "data"
    folder = templates / "supply-chain-weekly"
    shutil.copytree(ROOT / "workspaces" / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    (folder / "profile.yaml").unlink()
    data.mkdir()
    database = data / "orders.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE orders (region TEXT, sales INTEGER)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)", [("north", 1200), ("south", 3400)])
    (data / "targets.csv").write_text("target\n1000\n2000\n")
    ws, _ = workspace.load(folder)
    ws.data.update(orders_and_targets(f"sqlite:///{database}", str(data / "targets.csv")))
    ws.data["dashboard"]["filters"] = [{"id": "region", "type": "select", "label": "Region", "options_query": "SELECT DISTINCT region FROM orders ORDER BY 1"}]
    workspace.save(folder, ws.data)
    monkeypatch.setenv("DASHMEM_TEMPLATES", str(templates))
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(data))

    at = signed_in("vera")
    slug = "supply-chain-weekly"
    wh = Warehouse.for_workspace(at.session_state["config_repo"].published_path(slug))
    first = wh.current()
    assert first is not None and {m.label: m.value for m in at.metric} == {"Sales": "4,600", "Target": "3,000"}
    middle = wh.write_snapshot({**wh.tables(first), "targets": pa.table({"target": [1500, 2000]})})  # two more loads, as a refresh writes them
    wh.write_snapshot({**wh.tables(first), "targets": pa.table({"target": [1700, 2000]})})
    at.run()
    next(s for s in at.selectbox if s.label == "Data as of").set_value(middle.id).run()
    for popover in (state.rows_popover, state.explain_popover):  # every popover of both components open, as clicking them does
        for cid in ("sales", "target"):
            at.session_state[popover(slug, cid)] = True

    def rename_orders(old: str, new: str) -> None:
        with sqlite3.connect(database) as connection:
            connection.execute(f"ALTER TABLE {old} RENAME TO {new}")

    rename_orders("orders", "orders_away")  # today's database cannot answer: looking back must not need it
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("not what everyone sees" in w.value for w in at.warning)

    def frames() -> list[list[dict]]:
        return [d.value.to_dict("records") for d in at.dataframe]

    texts = [e.value for e in [*at.markdown, *at.caption, *at.error, *at.warning, *at.info]]
    assert not [t for t in texts if "no such table" in t or "query fails" in t or "Could not" in t], texts
    assert {m.label: m.value for m in at.metric}["Target"] == "3,500"
    assert [{"target": 1500}, {"target": 2000}] in frames()  # Show rows of the CSV: that load's rows
    assert "was 3,000 (+500)" in " ".join(texts)  # and its KPI's value at the load before
    said = [t for t in texts if t.startswith(NO_EARLIER_DATA)]
    assert said and all("orders is a live source" in t for t in said), texts  # the live KPI, in its card and beside it
    assert not [s for s in at.selectbox if s.label == "Region"]  # no options of today's database to offer for that load
    assert f"Region: {NO_EARLIER_DATA}: orders is a live source" in " ".join(c.value for c in at.caption)

    rename_orders("orders_away", "orders")
    next(s for s in at.selectbox if s.label == "Data as of").set_value("served").run()  # the data everyone sees: live rows as before
    assert not at.exception, [e.message for e in at.exception]
    assert [{"region": "north", "sales": 1200}, {"region": "south", "sales": 3400}] in frames()
    assert [{"target": 1700}, {"target": 2000}] in frames()
    assert [s.options for s in at.selectbox if s.label == "Region"] == [["All", "north", "south"]]
