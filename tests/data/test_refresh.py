"""Zero-token refresh: new data switches in whole, or the old data keeps being served with a clear report."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pyarrow.csv as pacsv
import pytest

from lib.data.refresh import likely_rename, refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR

from ..conftest import ROOT, WORKSPACES

KPI = "SELECT sum(actual) / sum(target) AS value FROM gates"


# Refreshes run by the CLI in fresh processes (each imports the app and loads data anew): slow loop.
FRESH_PROCESS = pytest.mark.slow


@pytest.fixture
def supply(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    first = refresh(folder, wh, user=OPERATOR)
    assert first.ok, first.summary()
    return folder, wh


def test_first_load_then_next_week_changes_the_numbers(supply):
    folder, wh = supply
    before = wh.query(KPI).rows[0][0]
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    dashboard_before = (folder / "dashboard.yaml").read_bytes()
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok and report.swapped and report.model_calls == 0
    [source] = report.sources
    assert (source.name, source.status, source.rows_before, source.rows_after) == ("gates", "ok", 126, 126)
    after = wh.query(KPI).rows[0][0]
    assert after != before and abs(after - before) > 0.01
    assert wh.query("SELECT DISTINCT week FROM gates").rows == [("2026-W48",)]
    assert (folder / "dashboard.yaml").read_bytes() == dashboard_before


def test_dropped_column_keeps_old_data_and_names_a_likely_rename(supply):
    folder, wh = supply
    served = wh.current().id
    table = pacsv.read_csv(folder / "data" / "next_week" / "gates.csv")
    pacsv.write_csv(table.rename_columns([c if c != "actual" else "actual_units" for c in table.column_names]), folder / "data" / "gates.csv")
    report = refresh(folder, wh, user=OPERATOR)
    assert not report.ok and not report.swapped
    [source] = report.sources
    assert source.status == "incompatible" and source.missing == ["actual"]
    assert source.renames == {"actual": "actual_units"}
    assert "missing column 'actual' (renamed to 'actual_units'?)" in report.summary()
    assert any("kpi_attainment" in e and '"actual"' in e for e in report.dashboard_errors)
    assert wh.current().id == served
    assert wh.query("SELECT DISTINCT week FROM gates").rows == [("2026-W47",)]


def test_changed_type_is_incompatible_but_new_columns_are_fine(supply):
    folder, wh = supply
    table = pacsv.read_csv(folder / "data" / "gates.csv")
    import pyarrow as pa

    widened = table.append_column("comment", pa.array(["ok"] * table.num_rows))
    pacsv.write_csv(widened, folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=OPERATOR).ok  # a new column is fine

    broken = widened.set_column(widened.column_names.index("target"), "target", pa.array(["to be set"] * widened.num_rows))
    pacsv.write_csv(broken, folder / "data" / "gates.csv")
    sources = workspace.load(folder)[0].data["sources"]
    del sources["sources"][0]["columns"]["target"]  # unpinned, so the text arrives as text
    workspace.save(folder, {"sources": sources})
    served = wh.current()
    report = refresh(folder, wh, user=OPERATOR)
    # The steward changed the source's settings, so the new type is theirs to ask for: what decides is whether
    # the dashboard still runs on it, and sum(target) over text does not.
    [source] = report.sources
    assert source.status == "ok" and "target is now VARCHAR (was BIGINT)" in source.message
    assert not report.ok and any(e.startswith("component kpi_attainment no longer fits") for e in report.dashboard_errors), report.dashboard_errors
    assert wh.current().id == served.id  # kept the previous data


def test_csv_with_a_bad_row_fails_clearly_and_keeps_old_data(supply):
    folder, wh = supply
    served = wh.current().id
    with open(folder / "data" / "gates.csv", "a") as handle:
        handle.write("2026-11-23,2026-W48,Brno,Supply,1,2,3,EXTRA\n")
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert source.status == "failed" and "gates" in source.message and "malformed row" in source.message
    assert wh.current().id == served and not report.swapped


def test_pinned_type_that_does_not_fit_fails_the_source(supply):
    folder, wh = supply
    text = (folder / "data" / "gates.csv").read_text().replace("2026-11-16,", "16/11/2026,", 1)
    (folder / "data" / "gates.csv").write_text(text)
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert source.status == "failed" and "day" in source.message


def test_failure_between_loading_and_switching_leaves_everything_as_it_was(supply):
    folder, wh = supply
    served = wh.current()
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")

    def crash():
        raise OSError("power cut")

    report = refresh(folder, wh, user=OPERATOR, _before_switch=crash)
    assert not report.ok and "power cut" in report.write_error
    assert wh.current() == served
    assert [s.id for s in wh.snapshots()] == [served.id]
    assert wh.query("SELECT DISTINCT week FROM gates").rows == [("2026-W47",)]
    assert refresh(folder, wh, user=OPERATOR).ok  # and the next refresh works


def test_refresh_never_constructs_a_model_client(supply, monkeypatch):
    import anthropic

    def forbidden(*args, **kwargs):
        raise AssertionError("the refresh path constructed a model client")

    monkeypatch.setattr(anthropic.Anthropic, "__init__", forbidden)
    monkeypatch.setattr(anthropic.AsyncAnthropic, "__init__", forbidden)
    folder, wh = supply
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=OPERATOR).ok


@FRESH_PROCESS
def test_refresh_cli_does_not_even_import_the_model_sdk(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from lib.cli import main\n"
        f"rc = main(['refresh', {str(folder)!r}])\n"
        "print('anthropic imported:', 'anthropic' in sys.modules); sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"DASHMEM_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    )
    assert proc.returncode == 0, proc.stderr
    assert "anthropic imported: False" in proc.stdout
    assert "0 model calls" in proc.stdout


@FRESH_PROCESS
def test_refresh_cli_exit_code_and_json(supply, tmp_path):
    folder, _ = supply
    env = {"DASHMEM_CACHE_DIR": str(tmp_path / "cli-cache"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-m", "lib", "refresh", str(folder), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True
    (folder / "data" / "gates.csv").write_text("day,site\n2026-11-16,Brno\n")
    bad = subprocess.run([sys.executable, "-m", "lib", "refresh", str(folder)], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1
    assert "missing column 'actual'" in bad.stdout and "kept the previous data" in bad.stdout


# ------------------------------------------------------------------ faults from a real HTTP source


class _Handler(http.server.BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        mode = type(self).mode
        if mode == "slow":
            time.sleep(1.0)
        if mode == "500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")
            return
        body = b"{not json" if mode == "garbage" else json.dumps({"items": [{"id": 1, "qty": 3}, {"id": 2, "qty": 4}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:
            pass


@pytest.fixture
def api(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")  # the operator's opt-in for a server on loopback
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    folder = tmp_path / "api-ws"
    workspace.save(folder, workspace.blank("API", "alice", "2026-11-30"))
    sources = {
        "sources": [
            {
                "name": "stock",
                "type": "rest",
                "url": f"http://127.0.0.1:{server.server_port}/stock",
                "records_path": "items",
                "timeout_s": 0.3,
                "retry": {"attempts": 2, "backoff_s": 0},
            }
        ]
    }
    workspace.save(folder, {"sources": sources})
    _Handler.mode = "ok"
    wh = Warehouse(tmp_path / "api-cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    yield folder, wh
    server.shutdown()


@pytest.mark.parametrize("mode,needle", [("slow", "timed out"), ("500", "HTTP 500"), ("garbage", "not valid JSON")])
def test_http_faults_keep_previous_data(api, mode, needle):
    folder, wh = api
    served = wh.current().id
    _Handler.mode = mode
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert source.status == "failed" and "'stock'" in source.message and needle in source.message
    assert wh.current().id == served and wh.query("SELECT sum(qty) FROM stock").rows == [(7,)]


def test_likely_rename_prefers_similar_names_of_compatible_type():
    assert likely_rename("actual", "BIGINT", {"actual_units": "BIGINT", "notes": "VARCHAR"}) == "actual_units"
    assert likely_rename("Country Name", "VARCHAR", {"country_name": "VARCHAR"}) == "country_name"
    assert likely_rename("revenue", "DOUBLE", {"site": "VARCHAR"}) is None


def test_after_regenerating_the_new_shape_is_accepted(supply):
    """Regenerate saves a profile of the new data and a dashboard for it; the next refresh then switches."""
    from lib.data import profile
    from lib.data.refresh import fetch_candidate

    folder, wh = supply
    table = pacsv.read_csv(folder / "data" / "next_week" / "gates.csv")
    pacsv.write_csv(table.rename_columns([c if c != "actual" else "actual_units" for c in table.column_names]), folder / "data" / "gates.csv")
    assert not refresh(folder, wh, user=OPERATOR).swapped
    candidate, entries = fetch_candidate(folder)
    assert [e.status for e in entries] == ["ok"] and "actual_units" in candidate["gates"].column_names
    ws, _ = workspace.load(folder)
    dashboard = ws.data["dashboard"]
    text = workspace.render("dashboard", dashboard).replace("actual)", "actual_units)").replace("sum(actual) AS actual", "sum(actual_units) AS actual")
    import yaml

    workspace.save(folder, {"profile": profile.build(candidate, ws.data["sources"]["sources"]), "dashboard": yaml.safe_load(text)})
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok, report.summary()
    assert wh.query("SELECT DISTINCT week FROM gates").rows == [("2026-W48",)]


def test_unchanged_data_makes_no_new_snapshot(supply):
    folder, wh = supply
    served = wh.current().id
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok and report.unchanged and not report.swapped
    assert wh.current().id == served and len(wh.snapshots()) == 1
    assert "has not changed" in report.summary()
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=OPERATOR).swapped


def test_compatibility_of_a_viewers_own_file(supply):
    """What the Dashboard page checks before showing a viewer's CSV for their session only."""
    from lib.data.refresh import compatibility

    folder, wh = supply
    recorded = wh.current().columns("gates")
    same_shape = pacsv.read_csv(folder / "data" / "next_week" / "gates.csv", convert_options=pacsv.ConvertOptions(column_types={"day": "date32"}))
    assert compatibility(recorded, same_shape, "gates") == []
    renamed = same_shape.rename_columns([c if c != "target" else "target_units" for c in same_shape.column_names])
    assert compatibility(recorded, renamed, "gates") == ["missing column 'target' (renamed to 'target_units'?)"]


def test_a_removed_source_takes_its_table_with_it(supply):
    folder, wh = supply
    sources = workspace.load(folder)[0].data["sources"]
    copy = dict(sources["sources"][0], name="gates_copy")
    workspace.save(folder, {"sources": {"sources": sources["sources"] + [copy]}})
    assert refresh(folder, wh, user=OPERATOR).ok and "gates_copy" in wh.current().tables
    workspace.save(folder, {"sources": sources})
    assert refresh(folder, wh, user=OPERATOR).swapped
    assert list(wh.current().tables) == ["gates"]


def test_removing_the_last_source_empties_the_warehouse(supply):
    folder, wh = supply
    workspace.save(folder, {"sources": {"sources": []}})
    (folder / "dashboard.yaml").unlink()
    report = refresh(folder, wh, user=OPERATOR)
    assert report.swapped and wh.current().tables == {}


def test_csv_values_with_quoted_newlines_and_files_without_quotes(tmp_path):
    from lib.data.connectors.base import FetchContext, fetch

    (tmp_path / "notes.csv").write_text('id,note\n1,"two\nlines"\n2,plain\n')
    (tmp_path / "plain.csv").write_text("id,v\n1,2.5\n2,3.5\n")
    notes = fetch({"name": "notes", "type": "csv", "path": "notes.csv"}, FetchContext(workspace_path=tmp_path))
    assert notes.column("note").to_pylist() == ["two\nlines", "plain"]
    plain = fetch({"name": "plain", "type": "csv", "path": "plain.csv"}, FetchContext(workspace_path=tmp_path))
    assert plain.column("v").to_pylist() == [2.5, 3.5]


def test_the_served_types_are_the_first_guess_and_the_new_file_decides_when_they_do_not_fit(tmp_path):
    import datetime as dt

    import pyarrow as pa

    from lib.data.connectors.base import FetchContext, fetch

    source = {"name": "t", "type": "csv", "path": "t.csv"}
    (tmp_path / "t.csv").write_text("code,qty,day\n007,1,11/30/2026\nA12,2,12/01/2026\n")
    first = fetch(source, FetchContext(workspace_path=tmp_path))
    assert first.schema.field("day").type == pa.date32() and first.column("day")[0].as_py() == dt.date(2026, 11, 30)
    assert first.schema.field("day").metadata == {b"dashmem.date_format": b"%m/%d/%Y"}

    # This week every code happens to look like a number: it stays text, as served (no leading zeros lost).
    (tmp_path / "t.csv").write_text("code,qty,day\n007,3,12/07/2026\n012,4,12/08/2026\n")
    again = fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema}))
    assert again.schema == first.schema and again.column("code").to_pylist() == ["007", "012"]
    assert again.column("day").to_pylist() == [dt.date(2026, 12, 7), dt.date(2026, 12, 8)]
    assert fetch(source, FetchContext(workspace_path=tmp_path)).schema.field("code").type == pa.int64()  # guessed afresh

    # A value that does not fit the served type, and dates in another format: the new file decides.
    (tmp_path / "t.csv").write_text("code,qty,day\nA1,2.5,07-12-2026\n")
    changed = fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema}))
    assert changed.schema.field("qty").type == pa.float64() and changed.column("qty").to_pylist() == [2.5]
    assert changed.column("day").to_pylist() == [dt.date(2026, 12, 7)]
    assert changed.schema.field("day").metadata == {b"dashmem.date_format": b"%d-%m-%Y"}


def test_date_formats_travel_with_the_snapshot_to_the_next_refresh(tmp_path, monkeypatch, dataset):
    """Another process (a cron refresh) reads the served schema from disk, formats included."""
    from lib.data import snapshots as warehouse

    csv = tmp_path / "orders.csv"
    lines = dataset("global_superstore_sample1000.csv").read_bytes().splitlines(keepends=True)
    csv.write_bytes(b"".join(lines[:500]))
    folder = tmp_path / "orders"
    workspace.save(folder, workspace.blank("orders", "test", "2026-11-30"))
    workspace.save(folder, {"sources": {"sources": [{"name": "orders", "type": "csv", "path": str(csv)}]}})
    wh = Warehouse(tmp_path / "cache")
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(tmp_path))
    assert refresh(folder, wh, user=OPERATOR).ok
    warehouse._OPENED.clear()  # as in a fresh process: the schema comes from the snapshot file
    served = wh.tables()["orders"].schema
    assert served.field("Order Date").metadata == {b"dashmem.date_format": b"%d-%m-%Y"}
    csv.write_bytes(b"".join(lines))
    report = refresh(folder, wh, user=OPERATOR)
    assert report.swapped, report.summary()
    current = wh.current()
    assert current is not None and list(current.columns("orders")) == served.names
    assert current.columns("orders")["Order Date"] == "DATE" and current.tables["orders"]["rows"] == 1000


def test_a_semicolon_file_keeps_its_delimiter_from_the_served_header(tmp_path):
    """The served columns settle the delimiter without sniffing; a file that changed delimiter is sniffed again."""
    from lib.data.connectors.base import FetchContext, SourceError, fetch

    source = {"name": "t", "type": "csv", "path": "t.csv"}
    (tmp_path / "t.csv").write_text("site;amount, EUR, net;note\nBrno;1;a\nLinz;2;b\nWien;3;c\n")
    first = fetch(source, FetchContext(workspace_path=tmp_path))
    assert first.column_names == ["site", "amount, EUR, net", "note"]
    # One row: the header alone splits into three fields by ',' as well as by ';', so sniffing guesses ','.
    (tmp_path / "t.csv").write_text("site;amount, EUR, net;note\nBrno;1;a\n")
    with pytest.raises(SourceError, match="malformed row"):
        fetch(source, FetchContext(workspace_path=tmp_path))
    again = fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema}))
    assert again.column_names == first.column_names and again.column("site").to_pylist() == ["Brno"]
    (tmp_path / "t.csv").write_text("site|amount, EUR, net|note\nBrno|1|a\nLinz|2|b\nWien|3|c\n")
    assert fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema})).column_names == first.column_names


def test_a_refresh_reads_dates_as_a_first_load_would(tmp_path):
    """A time in a date column, or a two-digit year, is not squeezed into the served date type."""
    import datetime as dt

    import pyarrow as pa

    from lib.data.connectors.base import FetchContext, fetch

    source = {"name": "t", "type": "csv", "path": "t.csv"}
    (tmp_path / "t.csv").write_text("ordered,shipped\n11/30/2026,11/30/2026 10:00:00\n12/01/2026,12/01/2026 11:00:00\n")
    first = fetch(source, FetchContext(workspace_path=tmp_path))
    assert first.schema.field("ordered").type == pa.date32() and first.schema.field("shipped").type == pa.timestamp("s")
    for changed in (
        "11/30/2026,11/30/2026 10:00:00\n12/01/2026 13:45:00,12/01/2026 14:00:00\n",  # a time appears
        "11/30/2026,11/30/2026 10:00:00\n12/01/26,12/01/2026 14:00:00\n",
    ):  # a two-digit year
        (tmp_path / "t.csv").write_text("ordered,shipped\n" + changed)
        fresh = fetch(source, FetchContext(workspace_path=tmp_path))
        refreshed = fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema}))
        assert refreshed.equals(fresh) and refreshed.schema.field("ordered").type == pa.string()
    assert refreshed.column("shipped")[1].as_py() == dt.datetime(2026, 12, 1, 14, 0)


def test_a_file_with_a_repeated_column_name_refreshes(tmp_path):
    from lib.data.connectors.base import FetchContext, fetch

    source = {"name": "t", "type": "csv", "path": "t.csv"}
    (tmp_path / "t.csv").write_text("d,d,a\n11/30/2026,1,x\n12/01/2026,2,y\n")
    first = fetch(source, FetchContext(workspace_path=tmp_path))
    (tmp_path / "t.csv").write_text("d,d,a\n12/07/2026,3,x\n")
    again = fetch(source, FetchContext(workspace_path=tmp_path, served={"t": first.schema}))
    assert again.schema == first.schema and again.column(1).to_pylist() == [3]


def test_a_viewers_own_csv_is_read_and_checked_and_never_stored(supply):
    from lib.data.refresh import read_own_file

    folder, wh = supply
    recorded = wh.current().columns("gates")
    own = (folder / "data" / "next_week" / "gates.csv").read_bytes()
    table, problems = read_own_file(own, "own.csv", "gates", recorded)
    assert problems == [] and table is not None and table.num_rows == own.count(b"\n") - 1
    renamed = own.replace(b"target", b"target_units", 1)
    assert read_own_file(renamed, "own.csv", "gates", recorded) == (None, ["missing column 'target' (renamed to 'target_units'?)"])
    assert read_own_file(b"a,b\n1,2,3\n4\n", "own.csv", "gates", recorded)[1][0].startswith("source 'gates': cannot parse")


def test_a_viewers_own_xlsx_and_parquet_files_stand_in_for_the_data(supply, tmp_path):
    import io

    import openpyxl
    import pyarrow.parquet as pq

    from lib.data.refresh import read_own_file

    folder, wh = supply
    recorded = wh.current().columns("gates")
    rows = pacsv.read_csv(folder / "data" / "next_week" / "gates.csv")
    book = openpyxl.Workbook()
    assert book.active is not None
    book.active.append(rows.column_names)
    for row in rows.to_pylist():
        book.active.append(list(row.values()))
    xlsx = io.BytesIO()
    book.save(xlsx)
    table, problems = read_own_file(xlsx.getvalue(), "My gates.XLSX", "gates", recorded)
    assert problems == [] and table is not None and table.num_rows == rows.num_rows
    parquet = io.BytesIO()
    pq.write_table(rows, parquet)
    table, problems = read_own_file(parquet.getvalue(), "gates.parquet", "gates", recorded)
    assert problems == [] and table is not None and table.num_rows == rows.num_rows
    # A damaged workbook is named by the viewer's file name, never the temporary copy's path.
    table, problems = read_own_file(xlsx.getvalue()[:500], "My gates.xlsx", "gates", recorded)
    assert table is None and problems[0].startswith("source 'gates': My gates.xlsx is not a readable .xlsx workbook")
    assert "/tmp" not in problems[0]
    assert read_own_file(b"x", "gates.xls", "gates", recorded) == (
        None,
        ["'gates.xls' is not a file dashmem reads; it reads .csv, .tsv, .txt, .xlsx, .parquet"],
    )


def test_an_upload_is_kept_by_its_content(tmp_path):
    from lib.data.connectors.base import FetchContext, fetch
    from lib.data.connectors.csv_source import store_upload

    ref = store_upload(tmp_path / "uploads", "../My sales.csv", b"a,b\n1,2\n")
    assert ref.startswith("upload:") and ref.endswith("-My_sales.csv") and "/" not in ref
    assert store_upload(tmp_path / "uploads", "My sales.csv", b"a,b\n1,2\n") == ref  # same content, same file
    assert store_upload(tmp_path / "uploads", "My sales.csv", b"a,b\n3,4\n") != ref  # never replaces it
    table = fetch({"name": "s", "type": "csv", "path": ref}, FetchContext(workspace_path=tmp_path, uploads_dir=tmp_path / "uploads"))
    assert table.column("a").to_pylist() == [1]


def test_roles_are_checked_in_lib_for_refresh_and_serving_earlier_data(supply):
    """A page that forgot its check still cannot refresh or pin for someone without the right."""
    from lib.roles.access import PermissionDenied, User

    folder, wh = supply
    meta = workspace.load(folder)[0].get("workspace")
    meta["access"]["viewers"] = ["vera"]  # not everyone any more
    workspace.save(folder, {"workspace": meta})
    served = wh.current()
    stranger, viewer, steward = User("mallory"), User("vera"), User("sam")
    with pytest.raises(PermissionDenied, match="mallory .* may not refresh"):
        refresh(folder, wh, user=stranger)
    assert wh.current() == served

    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    assert refresh(folder, wh, user=viewer).swapped  # viewers may refresh
    with pytest.raises(PermissionDenied, match="vera \\(viewer\\) may not pin_data"):
        wh.switch_to(served.id, user=viewer, meta=meta)
    assert wh.current().id != served.id
    wh.switch_to(served.id, user=steward, meta=meta)
    assert wh.current().id == served.id
    # The command line's principal is a distinct object: a user who signs in as "operator" is nobody special.
    with pytest.raises(PermissionDenied):
        wh.switch_to(served.id, user=User("operator"), meta=meta)


def test_an_unchanged_refresh_still_records_when_it_checked_for_every_process(supply):
    folder, wh = supply
    first = wh.last_checked()
    assert first is not None
    time.sleep(1.1)  # the record has one-second resolution
    report = refresh(folder, wh, user=OPERATOR)
    assert report.unchanged and report.ok and report.served == report.previous
    later = wh.last_checked()
    assert later > first and report.checked_at == later.isoformat()
    seen = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from lib.data.snapshots import Warehouse; print(Warehouse(sys.argv[1]).last_checked().isoformat())",
            str(wh.folder),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert seen.stdout.strip() == later.isoformat()


def test_two_refreshes_at_once_report_which_snapshot_is_served(supply):
    """Another process's refresh finishes while ours is writing: our report names the one actually served."""
    folder, wh = supply
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")
    other = [
        sys.executable,
        "-c",
        "import sys, pyarrow as pa; from lib.data.snapshots import Warehouse; print(Warehouse(sys.argv[1]).write_snapshot({'gates': pa.table({'x': [1]})}).id)",
        str(wh.folder),
    ]
    written_by_other = []

    def other_process_switches_first():
        written_by_other.append(subprocess.run(other, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip())

    report = refresh(folder, wh, user=OPERATOR, _before_switch=other_process_switches_first)
    assert report.swapped and report.snapshot != written_by_other[0]
    assert report.served == wh.current().id == written_by_other[0]
    assert f"its snapshot {written_by_other[0]} is the one served" in report.summary()


def test_a_full_disk_is_one_clear_line_and_keeps_the_data(supply, monkeypatch):
    import errno

    folder, wh = supply
    served = wh.current().id
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(type(wh), "write_snapshot", full)
    report = refresh(folder, wh, user=OPERATOR)
    assert not report.ok and not report.swapped
    assert report.headline() == f"Could not store the new data in {wh.folder.name} (No space left on device); the previous data is still served"
    assert wh.current().id == served


@FRESH_PROCESS
def test_a_full_disk_in_the_cli_is_a_message_not_a_traceback(tmp_path):
    """The CLI process writes into a cache folder it cannot write: one line, exit 1."""
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    cache = tmp_path / "cache"
    cache.mkdir()
    script = (
        "import errno, sys, lib.data.snapshots as w\n"
        "def full(*a, **k): raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "w.Warehouse.write_snapshot = full\n"
        "from lib.cli import main\n"
        "sys.exit(main(['refresh', sys.argv[1]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"DASHMEM_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "could not store the data (No space left on device)" in proc.stdout


def test_a_latin1_file_says_how_it_was_read_in_the_refresh_report(tmp_path):
    folder = tmp_path / "towns"
    subprocess.run(
        [sys.executable, "-m", "lib", "new", str(folder)], cwd=ROOT, check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    )
    (folder / "data").mkdir()
    (folder / "data" / "towns.csv").write_bytes("town,people\nKöln,1084000\nZürich,421000\n".encode("latin-1"))
    workspace.save(folder, {"sources": {"sources": [{"name": "towns", "type": "csv", "path": "data/towns.csv"}]}})
    wh = Warehouse(tmp_path / "cache")
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok, report.summary()
    [source] = report.sources
    assert "encoding" in source.message.lower() and "latin-1" in source.message
    assert wh.query("SELECT town FROM towns ORDER BY town").rows == [("Köln",), ("Zürich",)]


# ------------------------------------------------------------------ placeholders for missing values in files


def _prices_workspace(tmp_path, **settings):
    folder = tmp_path / "prices"
    subprocess.run(
        [sys.executable, "-m", "lib", "new", str(folder)], cwd=ROOT, check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    )
    (folder / "data").mkdir()
    (folder / "data" / "prices.csv").write_text("item,price,sold\napple,1.5,2026-01-05\npear,2.25,2026-01-06\nplum,0.75,2026-01-07\n")
    workspace.save(folder, {"sources": {"sources": [{"name": "prices", "type": "csv", "path": "data/prices.csv", **settings}]}})
    return folder


def _cli_refresh(folder, cache) -> subprocess.CompletedProcess:
    env = {"DASHMEM_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "lib", "refresh", str(folder)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


@FRESH_PROCESS
def test_a_placeholder_that_turns_numbers_to_text_names_the_null_values_fix_across_processes(tmp_path):
    folder, cache = _prices_workspace(tmp_path), tmp_path / "cache"
    assert _cli_refresh(folder, cache).returncode == 0
    # Next week's export writes '-' for prices not yet known, and 'tbd' for one sale date
    # ('n/a' there would be read as missing: numbers and dates know Arrow's own placeholders).
    (folder / "data" / "prices.csv").write_text("item,price,sold\napple,-,2026-01-12\npear,2.5,tbd\nplum,-,n/a\nfig,3,2026-01-15\nkiwi,-,2026-01-16\n")
    blocked = _cli_refresh(folder, cache)
    assert blocked.returncode == 1 and "Traceback" not in blocked.stdout + blocked.stderr
    assert "column price became text only because of the value '-' (3 rows), the rest are numbers" in blocked.stdout
    assert "add null_values: ['-'] to the source" in blocked.stdout
    assert "column sold became text only because of the values 'n/a' (1 row), 'tbd' (1 row), the rest are dates" in blocked.stdout
    assert "kept the previous data" in blocked.stdout
    # Following the hint: the steward adds the setting, and a fresh process loads the file with the old types.
    source = {"name": "prices", "type": "csv", "path": "data/prices.csv", "null_values": ["-", "n/a", "tbd"]}
    workspace.save(folder, {"sources": {"sources": [source]}})
    fixed = _cli_refresh(folder, cache)
    assert fixed.returncode == 0, fixed.stdout
    wh = Warehouse.for_workspace(folder, cache)  # the workspace's cache folder, as the CLI named it
    assert wh.query("SELECT item, price, sold FROM prices ORDER BY item").rows[:2] == [
        ("apple", None, dt.date(2026, 1, 12)),
        ("fig", 3.0, dt.date(2026, 1, 15)),
    ]


def test_text_that_is_really_text_gets_no_null_values_hint(tmp_path):
    folder = _prices_workspace(tmp_path)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    (folder / "data" / "prices.csv").write_text("item,price,sold\napple,cheap,2026-01-12\npear,dear,2026-01-13\n")
    report = refresh(folder, wh, user=OPERATOR)
    [source] = report.sources
    assert source.status == "incompatible" and source.changed[0]["column"] == "price"
    assert "null_values" not in source.message and "hint" not in source.changed[0]


def test_a_pinned_column_holding_a_placeholder_names_the_column_value_and_fix(tmp_path):
    folder = _prices_workspace(tmp_path, columns={"price": "DOUBLE"}, null_values=["n/a"])
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    (folder / "data" / "prices.csv").write_text("item,price,sold\napple,?,2026-01-12\npear,2,2026-01-13\n")
    [source] = refresh(folder, wh, user=OPERATOR).sources
    assert source.status == "failed"
    assert "column 'price' is typed double, but holds '?'; if '?' means a missing value, add null_values: ['n/a', '?'] to the source" in source.message


def test_a_viewers_own_file_is_told_the_null_values_fix_too():
    from lib.data.refresh import read_own_file

    table, problems = read_own_file(b"item,price\napple,-\npear,2\n", "own.csv", "prices", {"item": "VARCHAR", "price": "DOUBLE"})
    assert table is None
    assert problems == [
        "column 'price' is VARCHAR, was DOUBLE (column price became text only because of the value '-' (1 row), the rest are numbers; if it means a missing value, add null_values: ['-'] to the source)"
    ]


@FRESH_PROCESS
def test_an_excel_source_refreshes_across_processes_and_names_its_placeholders(tmp_path):
    import openpyxl

    def save_sheet(rows):
        book = openpyxl.Workbook()
        assert book.active is not None
        book.active.title = "Prices"
        for row in rows:
            book.active.append(row)
        book.save(folder / "data" / "prices.xlsx")

    folder, cache = _prices_workspace(tmp_path), tmp_path / "cache"
    save_sheet([["item", "price"], ["apple", 1.5], ["pear", 2]])
    source = {"name": "prices", "type": "excel", "path": "data/prices.xlsx", "sheet": "Prices"}
    workspace.save(folder, {"sources": {"sources": [source]}})
    first = _cli_refresh(folder, cache)
    assert first.returncode == 0 and "prices               ok" in first.stdout, first.stdout
    save_sheet([["item", "price"], ["apple", "-"], ["pear", 2.5], ["fig", "-"]])
    blocked = _cli_refresh(folder, cache)
    assert blocked.returncode == 1
    assert "column price became text only because of the value '-' (2 rows), the rest are numbers" in blocked.stdout
    workspace.save(folder, {"sources": {"sources": [{**source, "null_values": ["-"]}]}})
    assert _cli_refresh(folder, cache).returncode == 0
    assert Warehouse.for_workspace(folder, cache).query("SELECT item, price FROM prices ORDER BY item").rows == [("apple", None), ("fig", None), ("pear", 2.5)]


# A viewer's own file, read in their session: refused from its metadata past the upload caps.
# The peak is this process's own (VmHWM): getrusage's ru_maxrss keeps, across exec, the pytest process's size at the fork.
OWN_FILE_READ = """
import json, re, sys, time
from pathlib import Path
from lib.data.refresh import read_own_file
content = Path(sys.argv[1]).read_bytes()
started = time.perf_counter()
table, problems = read_own_file(content, "constant.parquet", "gates", {"week": "BIGINT", "actual": "DOUBLE"})
seconds = time.perf_counter() - started
peak_kb = int(re.search(r"VmHWM:\\s*(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"problems": problems, "seconds": seconds, "peak_mb": peak_kb >> 10}))
"""


def test_a_viewers_own_parquet_of_40_million_constant_rows_is_refused_before_it_is_read(tmp_path):
    """A 1 MB zstd file of constant columns was a 40-million-row table, 2 GB in the viewer's session."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    constant = pa.table({"week": pa.array(np.full(10_000_000, 48, dtype=np.int64)), "actual": pa.array(np.full(10_000_000, 1191.0))})
    path = tmp_path / "constant.parquet"
    with pq.ParquetWriter(path, constant.schema, compression="zstd") as writer:
        for _ in range(4):
            writer.write_table(constant)
    assert path.stat().st_size < 1 << 20
    run = subprocess.run([sys.executable, "-c", OWN_FILE_READ, str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["problems"] == ["source 'gates': constant.parquet has 40,000,000 rows; uploads are limited to 2,000,000 rows (DASHMEM_UPLOAD_MAX_ROWS)"]
    # Read, its 40 million rows would be 640 MB of Arrow alone; refused by the footer, the process stays at its imports' size.
    assert got["seconds"] < 5 and got["peak_mb"] < 400, got


def test_one_session_keeps_its_own_files_within_the_byte_cap(monkeypatch):
    from lib.data.refresh import OwnFiles

    monkeypatch.setenv("DASHMEM_UPLOAD_MAX_BYTES", "1MB")
    recorded = {"n": "BIGINT"}

    def numbers(count: int, start: int = 0) -> bytes:
        return ("n\n" + "".join(f"{i}\n" for i in range(start, start + count))).encode()

    own = OwnFiles()
    assert own.offer("ws", "orders", numbers(80_000), "orders.csv", recorded) == ([], None)  # 640 kB as a table
    assert own.offer("ws", "orders", numbers(80_000, 1), "orders.csv", recorded) == ([], None)  # replaces its table's file
    assert list(own.held("ws")) == ["orders"] and own.held("ws")["orders"][1].column("n")[0].as_py() == 1
    problems, made_room = own.offer("other", "returns", numbers(80_000), "returns.csv", recorded)
    assert problems == [] and made_room is not None and "orders (ws)" in made_room and "DASHMEM_UPLOAD_MAX_BYTES" in made_room
    assert own.held("ws") == {} and list(own.held("other")) == ["returns"] and own.nbytes <= 1 << 20
    small = numbers(1_000)
    assert own.offer("other", "customers", small, "customers.csv", recorded) == ([], None)  # room enough beside it
    assert sorted(own.held("other")) == ["customers", "returns"]
    # A file too big for the session on its own is refused, and what the session holds stays.
    problems, _ = own.offer("other", "orders", numbers(200_000), "orders.csv", recorded)
    assert problems and "uploads are limited to 1 MB (DASHMEM_UPLOAD_MAX_BYTES)" in problems[0]
    assert sorted(own.held("other")) == ["customers", "returns"]
    # A file that does not fit is remembered as refused, with its reason, until another file comes.
    assert own.offer("other", "returns", b"x\n1\n", "returns.csv", recorded)[0] == ["missing column 'n'"]
    assert own.offer("other", "returns", b"x\n1\n", "returns.csv", recorded)[0] == ["missing column 'n'"]
    own.drop("other", "returns")
    assert list(own.held("other")) == ["customers"]


def test_an_xlsx_with_dates_as_text_stands_in_like_its_csv_and_a_refused_file_shows_no_earlier_one(tmp_path):
    """Issue #31, 13: the viewer's .xlsx whose day column is text fits where its CSV does; a file that does not fit
    leaves the table on the shared data, so its error never sits beside an earlier file's "Showing your file"."""
    import io

    import openpyxl

    from lib.data.refresh import OwnFiles

    recorded = {"day": "DATE", "site": "VARCHAR", "orders": "BIGINT"}
    rows = [["day", "site", "orders"], ["2026-11-16", "Brno", 12], ["2026-11-17", "Porto", 7]]
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in rows:
        sheet.append(row)
    xlsx = io.BytesIO()
    book.save(xlsx)
    csv = "".join(",".join(map(str, row)) + "\n" for row in rows).encode()

    own = OwnFiles()
    assert own.offer("ws", "orders", csv, "orders.csv", recorded) == ([], None)
    assert own.offer("ws", "orders", xlsx.getvalue(), "orders.xlsx", recorded) == ([], None)
    [(_, shown)] = own.held("ws").values()
    assert shown.column("day").to_pylist() == [dt.date(2026, 11, 16), dt.date(2026, 11, 17)]

    problems, _ = own.offer("ws", "orders", b"site,orders\nBrno,1\n", "fewer.csv", recorded)
    assert problems == ["missing column 'day'"]
    assert own.held("ws") == {}  # the shared data again, not the earlier file beside the error
    assert own.offer("ws", "orders", b"site,orders\nBrno,1\n", "fewer.csv", recorded)[0] == problems  # remembered, at every rerun
    assert own.held("ws") == {}


def _cars_workspace(tmp_path, source_extra: dict) -> tuple:
    folder = tmp_path / "cars-ws"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "cars.csv").write_text(
        "name,mpg,cylinders\n" + "".join(f"car {i},{'-' if i % 7 == 0 else f'{20 + i % 9}.5'},{4 + i % 3 * 2}\n" for i in range(60))
    )
    files = workspace.blank("Cars", "olivia", "2026-12-02")
    files["sources"] = {"sources": [{"name": "cars", "type": "csv", "path": "data/cars.csv", **source_extra}]}
    files["dashboard"] = {
        "title": "Cars",
        "components": [{"id": "n", "type": "kpi", "title": "Cars", "query": "SELECT count(*) AS value FROM cars"}],
    }
    workspace.save(folder, files)
    return folder, {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}


def _cli(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lib", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _served_type(tmp_path, folder, column: str) -> str:
    """The type the CLI's refresh stored (this process reads the same cache folder: the tests set it)."""
    served = Warehouse.for_workspace(folder).current()
    assert served is not None
    return served.columns("cars")[column]


@pytest.mark.parametrize("change", [{"null_values": ["-"]}, {"null_values": ["-"], "columns": {"mpg": "DOUBLE"}}, {"columns": {"cylinders": "VARCHAR"}}])
def test_a_change_to_a_sources_settings_takes_effect_at_the_next_refresh_across_processes(tmp_path, monkeypatch, change):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    folder, env = _cars_workspace(tmp_path, {})
    assert _cli(env, "refresh", str(folder)).returncode == 0
    assert _served_type(tmp_path, folder, "mpg") == "VARCHAR" and _served_type(tmp_path, folder, "cylinders") == "BIGINT"

    ws, _ = workspace.load(folder)
    sources = ws.get("sources")
    sources["sources"][0].update(change)
    workspace.save(folder, {"sources": sources})
    done = _cli(env, "refresh", str(folder))
    assert done.returncode == 0 and "switched to snapshot" in done.stdout, done.stdout + done.stderr
    expected = {"mpg": "DOUBLE" if "null_values" in change else "VARCHAR", "cylinders": "VARCHAR" if "cylinders" in str(change) else "BIGINT"}
    assert {c: _served_type(tmp_path, folder, c) for c in expected} == expected
    again = _cli(env, "refresh", str(folder))  # and it stays accepted: the next refresh is not a type change
    assert again.returncode == 0 and "kept the previous data" not in again.stdout, again.stdout
    full = _cli(env, "refresh", "--full", str(folder))
    assert full.returncode == 0 and "kept the previous data" not in full.stdout, full.stdout


def test_a_type_change_with_the_same_settings_still_keeps_the_previous_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    folder, env = _cars_workspace(tmp_path, {"null_values": ["-"]})
    assert _cli(env, "refresh", str(folder)).returncode == 0
    assert _served_type(tmp_path, folder, "mpg") == "DOUBLE"
    csv_path = folder / "data" / "cars.csv"
    csv_path.write_text(csv_path.read_text().replace("car 3,23.5", "car 3,unknown"))  # the upstream file broke a number
    done = _cli(env, "refresh", str(folder))
    assert "kept the previous data" in done.stdout and "changed type 'mpg'" in done.stdout, done.stdout
    assert _served_type(tmp_path, folder, "mpg") == "DOUBLE"
