"""Row-level access (issue #34): the query engine holds a user to their rows on snapshot and live sources.

One module-scoped warehouse: 30 gate rows at three sites (Brno 10, Porto 12, Lyon 8), served once as
snapshot Arrow tables and once as a live table in the local PostgreSQL. For each backend and each SQL
shape a query could use to step around a filter (alias, subquery, CTE, self-join, UNION, a table
function, a forged parameter), a viewer filtered to Brno gets exactly Brno's count and sum, a viewer
without the attribute gets none, and a steward gets every row.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
import yaml

from lib.artifacts import explore
from lib.artifacts.changes import compare_tables, previous_of
from lib.artifacts.drilldown import drilldown
from lib.artifacts.render import filter_states
from lib.artifacts.report import render_report
from lib.artifacts.time_travel import open_as_of
from lib.chat.agent import run_session
from lib.chat.model import message, text_block
from lib.chat.toolbox import Toolbox
from lib.data import profile as profile_text
from lib.data.engine import Engine, QueryCache, scope_for
from lib.data.refresh import refresh
from lib.data.row_profile import scoped_profile
from lib.data.sandbox import QueryError
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.memory.changes import ATTENTION
from lib.memory.kinds.workspace import access_changes
from lib.roles import access, auth
from lib.roles.access import PermissionDenied, User

from ..conftest import ROOT, WORKSPACES
from ..helpers import current_id
from ..helpers.databases import PG_URL, server_engine
from ..helpers.model import MODEL, FakeAPI

SITES = ["Brno"] * 10 + ["Porto"] * 12 + ["Lyon"] * 8
ROWS = [{"id": i, "site": site, "amount": i + 1} for i, site in enumerate(SITES)]
BRNO = (10, sum(r["amount"] for r in ROWS if r["site"] == "Brno"))
ALL = (30, sum(r["amount"] for r in ROWS))
NONE = (0, None)

META = {
    "name": "Gates",
    "access": {"owners": ["olivia"], "stewards": ["sam"], "viewers": ["*"]},
    "row_filters": [{"table": "gates", "column": "site", "attribute": "site"}],
}
VERA = User("vera", attributes=(("site", ("Brno",)),))
NOBODY = User("nico")
SAM = User("sam", attributes=(("site", ("Porto",)),))  # a steward bypasses the filter whatever their attribute
WHO = {"brno viewer": (VERA, BRNO), "viewer without the attribute": (NOBODY, NONE), "steward": (SAM, ALL)}

SHAPES = {
    "plain": "SELECT count(*) AS n, sum(amount) AS total FROM gates",
    "alias": "SELECT count(*) AS n, sum(g.amount) AS total FROM gates AS g",
    "subquery": "SELECT count(*) AS n, sum(amount) AS total FROM (SELECT * FROM gates) AS s",
    "cte": "WITH x AS (SELECT * FROM gates) SELECT count(*) AS n, sum(amount) AS total FROM x",
    "self join": "SELECT count(*) AS n, sum(a.amount) AS total FROM gates a JOIN gates b ON a.id = b.id",
    "union": "SELECT count(*) AS n, sum(amount) AS total FROM (SELECT id, amount FROM gates UNION ALL SELECT id, amount FROM gates WHERE site <> 'Brno' AND site <> site) AS u",
    "where other site": "SELECT count(*) AS n, sum(amount) AS total FROM gates WHERE site IN ('Brno', 'Porto', 'Lyon') OR 1 = 1",
    "forged filter event": "SELECT count(*) AS n, sum(amount) AS total FROM gates WHERE $site IS NULL OR site = $site",
}


@pytest.fixture(scope="module")
def snapshot():
    files = {"workspace": META, "sources": {"sources": []}}
    tables = {"gates": pa.Table.from_pylist(ROWS), "other": pa.table({"k": [1, 2]})}
    return files, tables


@pytest.fixture(scope="module")
def postgres():
    engine = server_engine("postgresql")
    name = f"dm_rls_{uuid.uuid4().hex[:10]}"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {name} (id BIGINT, site TEXT, amount BIGINT)")
        connection.execute(sa.text(f"INSERT INTO {name} VALUES (:id, :site, :amount)"), ROWS)
    source = {"name": "gates", "type": "sql", "url": PG_URL, "table": name, "mode": "live", "cache_ttl_s": 300}
    yield {"workspace": META, "sources": {"sources": [source]}}, {}
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    engine.dispose()


@pytest.fixture(scope="module", params=["snapshot", "postgres"])
def backend(request):
    return request.getfixturevalue(request.param)


def _answer(engine: Engine, sql: str, params=None) -> tuple[int, int | None]:
    row = engine.run(sql, params or ({"site": "Porto"} if "$site" in sql else {})).table.to_pylist()[0]
    return int(row["n"]), (int(row["total"]) if row["total"] is not None else None)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("who", WHO)
def test_each_user_sees_their_rows_whatever_the_query_shape(backend, who, shape):
    files, tables = backend
    user, expected = WHO[who]
    engine = Engine.for_workspace(files, tables, "v1", user=user, cache=QueryCache())
    if shape == "forged filter event" and expected != NONE:
        # The forged value picks Porto among the rows the user may see: Brno's viewer gets none, the steward Porto's.
        expected = (0, None) if user is VERA else (12, sum(r["amount"] for r in ROWS if r["site"] == "Porto"))
    assert _answer(engine, SHAPES[shape]) == expected


def test_a_table_function_cannot_reach_the_unfiltered_table(snapshot, postgres):
    vera = Engine.for_workspace(snapshot[0], snapshot[1], "v1", user=VERA, cache=QueryCache())
    assert _answer(vera, "SELECT count(*) AS n, sum(amount) AS total FROM query_table('gates')") == BRNO
    live = Engine.for_workspace(postgres[0], {}, "v1", user=VERA)
    with pytest.raises(QueryError):
        live.run("SELECT count(*) AS n FROM query_table('gates')")


def test_a_table_without_a_rule_is_unfiltered(snapshot):
    engine = Engine.for_workspace(snapshot[0], snapshot[1], "v1", user=NOBODY, cache=QueryCache())
    assert engine.run("SELECT count(*) AS n FROM other").table.column("n").to_pylist() == [2]


def test_one_users_cached_result_is_never_served_to_another(backend):
    files, tables = backend
    cache = QueryCache()
    base = Engine.for_workspace(files, tables, "v1", cache=cache)
    sql = SHAPES["plain"]
    assert _answer(base.as_user(VERA), sql) == BRNO
    assert _answer(base.as_user(SAM), sql) == ALL
    assert _answer(base.as_user(NOBODY), sql) == NONE
    assert _answer(base.as_user(VERA), sql) == BRNO
    assert _answer(base, sql) == ALL  # no user: the operator's, unfiltered, as before


def test_a_viewer_without_the_attribute_is_told_why(snapshot):
    engine = Engine.for_workspace(snapshot[0], snapshot[1], "v1", user=NOBODY)
    (note,) = engine.row_notes()
    assert "nico sees no rows of gates" in note and "'site'" in note
    assert Engine.for_workspace(snapshot[0], snapshot[1], "v1", user=VERA).row_notes() == []


def test_the_bypass_roles_are_the_workspaces_choice(snapshot):
    files = {**snapshot[0], "workspace": {**META, "row_filter_bypass": ["owner"]}}
    steward = Engine.for_workspace(files, snapshot[1], "v1", user=SAM, cache=QueryCache())
    assert _answer(steward, SHAPES["plain"]) == (12, sum(r["amount"] for r in ROWS if r["site"] == "Porto"))
    owner = Engine.for_workspace(files, snapshot[1], "v1", user=User("olivia"), cache=QueryCache())
    assert _answer(owner, SHAPES["plain"]) == ALL


def test_a_rule_naming_a_missing_column_shows_nothing_and_says_so(snapshot):
    files = {**snapshot[0], "workspace": {**META, "row_filters": [{"table": "gates", "column": "region", "attribute": "site"}]}}
    engine = Engine.for_workspace(files, snapshot[1], "v1", user=VERA, cache=QueryCache())
    with pytest.raises(QueryError, match="names column 'region'"):
        engine.run(SHAPES["plain"])


def test_only_owners_change_row_filters():
    before = META
    after = {**META, "row_filters": []}
    with pytest.raises(PermissionDenied):
        access.require_governance_unchanged_or_owner(User("sam"), before, after)
    access.require_governance_unchanged_or_owner(User("olivia"), before, after)


def test_attributes_come_from_the_users_file_and_its_groups(tmp_path: Path):
    path = tmp_path / "users.yaml"
    hashed = "$2b$12$fMinyTljZYelX2Mc6E.GHe9Qw3hBUs3RY.hEGpkJWgOP8afk/wtjK"
    path.write_text(
        yaml.safe_dump(
            {
                "usernames": {
                    "vera": {"password": hashed, "roles": ["viewer", "porto-team"], "attributes": {"site": ["Brno"]}},
                    "nico": {"password": hashed, "roles": ["viewer"]},
                },
                "groups": {"porto-team": {"attributes": {"site": "Porto", "unit": ["ops"]}}},
            }
        )
    )
    credentials = auth.load_credentials(path)
    assert dict(auth.user_for("vera", credentials).attributes) == {"site": ("Brno", "Porto"), "unit": ("ops",)}
    assert auth.user_for("nico", credentials).attributes == ()
    path.write_text(yaml.safe_dump({"usernames": {"vera": {"password": hashed, "attributes": "Brno"}}}))
    with pytest.raises(auth.AuthConfigError, match="attributes"):
        auth.load_credentials(path)


def test_review_shows_a_change_of_row_filters_as_an_access_change():
    changes = access_changes({**META, "row_filters": []}, {**META, "row_filter_bypass": ["owner"]})
    assert [(c.category, c.id, c.severity) for c in changes] == [("access", "gates", ATTENTION), ("access", "row_filter_bypass", ATTENTION)]


# --------------------------------------------------------------------------- the CLI's --as USER


def test_the_cli_query_and_rows_run_as_a_user(tmp_path: Path):
    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    meta = yaml.safe_load((folder / "workspace.yaml").read_text())
    meta["row_filters"] = [{"table": "gates", "column": "site", "attribute": "site"}]
    (folder / "workspace.yaml").write_text(yaml.safe_dump(meta))
    hashed = "$2b$12$fMinyTljZYelX2Mc6E.GHe9Qw3hBUs3RY.hEGpkJWgOP8afk/wtjK"
    users = tmp_path / "users.yaml"
    users.write_text(
        yaml.safe_dump(
            {
                "usernames": {
                    "vera": {"password": hashed, "roles": ["viewer"], "attributes": {"site": ["Brno"]}},
                    "nico": {"password": hashed, "roles": ["viewer"]},
                }
            }
        )
    )
    with open(folder / "data" / "gates.csv") as fh:
        rows = list(csv.DictReader(fh))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"), "DASHMEM_USERS": str(users)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "lib", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)

    assert cli("refresh", folder).returncode == 0
    sql = "SELECT count(*) AS n FROM gates"
    counts = {}
    for who in ("vera", "nico", None):
        done = cli("query", folder, sql, "--json", *(["--as", who] if who else []))
        assert done.returncode == 0, done.stderr
        counts[who] = json.loads(done.stdout)["rows"][0]["n"]
    assert counts == {"vera": sum(r["site"] == "Brno" for r in rows), "nico": 0, None: len(rows)}
    assert "nico sees no rows of gates" in cli("query", folder, sql, "--as", "nico").stderr
    unknown = cli("query", folder, sql, "--as", "zed")
    assert unknown.returncode != 0 and "no such user" in unknown.stderr and "Traceback" not in unknown.stderr
    # export --as: the dashboard's and the report's files hold that user's figures (the Brno units KPI), the operator's all
    brno_units, all_units = (f"{sum(int(r['actual']) for r in rows if keep(r)):,}" for keep in (lambda r: r["site"] == "Brno", lambda r: True))
    for kind, who, shown, hidden in (("dashboard", "vera", brno_units, "Porto"), ("dashboard", None, all_units, None), ("report", "vera", brno_units, "Porto")):
        out = tmp_path / f"{kind}-{who}.html"
        done = cli("export", folder, "--html", out, *(["--report"] if kind == "report" else []), *(["--as", who] if who else []))
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        assert shown in html, (kind, who)
        assert hidden is None or hidden not in html, (kind, who)
        assert "Porto" in html or who  # the operator's holds every site
    refused = cli("export", folder, "--html", tmp_path / "x.html", "--as", "zed")
    assert refused.returncode != 0 and "no such user" in refused.stderr and not (tmp_path / "x.html").exists()


# --------------------------------------------------------------------------- the dashboard as a viewer opens it


def _filtered_demo(tmp_path: Path):
    """The demo supply-chain workspace with gates filtered by the site attribute, loaded: (folder, ws, warehouse, its rows)."""
    folder = tmp_path / "ws"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    ws, _ = workspace.load(folder)
    ws.data["workspace"]["row_filters"] = [{"table": "gates", "column": "site", "attribute": "site"}]
    workspace.save(folder, ws.data)
    wh = Warehouse.for_workspace(folder)
    assert refresh(folder, wh, user=access.OPERATOR).ok
    with open(folder / "data" / "gates.csv") as fh:
        rows = list(csv.DictReader(fh))
    return folder, ws, wh, rows


def test_the_dashboard_its_filter_options_and_rows_are_a_viewers_own(tmp_path: Path):
    folder, ws, wh, rows = _filtered_demo(tmp_path)
    volume = {
        "vera": sum(int(r["actual"]) for r in rows if r["site"] == "Brno"),
        "olivia": sum(int(r["actual"]) for r in rows),
    }
    dashboard = ws.data["dashboard"]
    for user, sites in ((User("vera", attributes=(("site", ("Brno",)),)), ["Brno"]), (User("olivia"), sorted({r["site"] for r in rows}))):
        as_of = open_as_of(wh, None, user=user, meta=ws.data["workspace"])
        engine = as_of.engine(ws.data, folder) or Engine.for_workspace(ws.data, workspace_path=folder)
        (site,) = [s for s in filter_states(dashboard, as_of.tables, as_of.version, engine) if s.id == "site"]
        assert sorted(site.options) == sites
        rendered = as_of.render(ws.data, workspace_path=folder)
        (kpi,) = [c for c in rendered.components if c.id == "kpi_volume"]
        assert kpi.value == volume[user.name]
        behind = drilldown(ws.data, as_of.tables, as_of.version, "kpi_volume", {}, workspace_path=folder, engine=engine)
        assert behind.matching == sum(1 for r in rows if user.name == "olivia" or r["site"] == "Brno")


def test_the_models_run_sql_in_query_mode_reads_only_the_viewers_rows(snapshot):
    files, tables = snapshot
    for user, (n, _) in ((VERA, BRNO), (NOBODY, NONE), (SAM, ALL)):
        box = Toolbox(files, tables, "v1", "query", user.name, asker=user)
        answer = box.execute("run_sql", {"sql": "SELECT count(*) AS n FROM (SELECT site FROM gates UNION ALL SELECT site FROM gates g)"})
        assert not answer.is_error and f"\n{2 * n}" in answer.content, answer.content


def test_the_report_and_explore_are_a_viewers_own(tmp_path: Path):
    """The Report page renders through the viewer's engine and Explore runs as the viewer: Brno's figures only."""
    folder, ws, wh, rows = _filtered_demo(tmp_path)
    snapshot = wh.current()
    assert snapshot is not None
    tables = wh.tables(snapshot)
    vera, olivia = User("vera", attributes=(("site", ("Brno",)),)), User("olivia")
    for user, keep in ((vera, lambda r: r["site"] == "Brno"), (olivia, lambda r: True), (NOBODY, lambda r: False)):
        units = sum(int(r["actual"]) for r in rows if keep(r))
        viewer = Engine.for_workspace(ws.data, tables, snapshot.id, workspace_path=folder, user=user)
        rendered = render_report(ws.data, tables, snapshot.id, {}, workspace_path=folder, engine=viewer)
        (kpi,) = [c for s in rendered.sections for c in s.components if c.id == "kpi_units"]
        assert (kpi.value or 0) == units, user.name
        question = explore.Question(table="gates", measure="actual", aggregation="sum")
        _, result = explore.run(question, ws.data, tables, snapshot.id, workspace_path=folder, user=user)
        assert (result.table.column(0).to_pylist()[0] or 0) == units, user.name
        sites = explore.distinct_values(ws.data, tables, snapshot.id, "gates", "site", workspace_path=folder, user=user)
        assert sites == sorted({r["site"] for r in rows if keep(r)}), user.name


# --------------------------------------------------------------------------- the profile the model is sent (item 4)


def _profile_sent(api: FakeAPI) -> str:
    """The data profile block of the first request the model got."""
    (first,) = [b for b in api.bodies[0]["messages"][0]["content"] if b["type"] == "text"][:1]
    return first["text"]


def test_a_filtered_viewers_chat_sends_the_model_the_profile_of_their_rows_only(tmp_path: Path):
    folder, ws, wh, rows = _filtered_demo(tmp_path)
    files = dict(ws.data)
    sites = sorted({r["site"] for r in rows})
    assert len(sites) > 1 and all(s in profile_text.text(files["profile"]) for s in sites)  # the stored profile has them all
    brno = [r for r in rows if r["site"] == "Brno"]
    for user, seen, rows_line in (
        (User("vera", attributes=(("site", ("Brno",)),)), ["Brno"], f"table gates ({len(brno)} rows)"),
        (User("nico"), [], "table gates (0 rows)"),
        (User("olivia"), sites, f"table gates ({len(rows)} rows)"),
    ):
        api = FakeAPI([message(text_block("Brno is behind."), usage={"input_tokens": 900, "output_tokens": 5}, model=MODEL)])
        outcome = run_session(files, wh.tables(), current_id(wh), "query", "Which site is weakest?", api.client(), user=user, slug="s", model=MODEL)
        assert outcome.error is None
        sent = _profile_sent(api)
        assert rows_line in sent, sent
        for site in sites:
            assert (site in sent) == (site in seen), (user.name, site, sent)
    assert ws.data["profile"] == workspace.load(folder)[0].data["profile"]  # what is stored is not changed


def test_a_filtered_live_tables_profile_keeps_its_shape_and_no_value(postgres):
    files, _ = postgres
    stored = profile_text.build({"gates": pa.Table.from_pylist(ROWS)})  # every site's values, as profiled in the database
    assert "Porto" in profile_text.text(stored)
    for user in (VERA, NOBODY):
        shown = scoped_profile(stored, scope_for(user, files), {}, files)
        assert shown is not None
        text = profile_text.text(shown)
        assert "table gates (row count not shown" in text and "site VARCHAR" in text and "amount BIGINT" in text
        assert not any(site in text for site in ("Brno", "Porto", "Lyon")) and "30" not in text, text
    assert scoped_profile(stored, scope_for(SAM, files), {}, files) is stored  # a steward's is the whole one


def test_the_changes_panel_compares_a_viewers_rows_then_and_now(tmp_path: Path):
    """The earlier load's values are the viewer's rows too: only Porto's figures changed, so Brno's viewer sees no move."""
    folder, ws, wh, rows = _filtered_demo(tmp_path)
    gates = folder / "data" / "gates.csv"
    with open(gates, newline="") as fh:
        header = next(csv.reader(fh))
    changed = [{**r, "actual": str(int(r["actual"]) + 1000) if r["site"] == "Porto" else r["actual"]} for r in rows]
    with open(gates, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(changed)
    assert refresh(folder, wh, user=access.OPERATOR).ok
    for user, site_rows in ((User("vera", attributes=(("site", ("Brno",)),)), "Brno"), (User("olivia"), None)):
        as_of = open_as_of(wh, None, user=user, meta=ws.data["workspace"])
        previous = previous_of(wh, as_of.snapshot)
        assert previous is not None
        found = compare_tables(
            ws.data, as_of.snapshot, as_of.tables, previous, wh.tables(previous), {}, workspace_path=folder, engine=as_of.engine(ws.data, folder)
        )
        (kpi,) = [c.kpi for c in found.components if c.component == "kpi_volume"]
        assert kpi is not None
        mine = [(r, c) for r, c in zip(rows, changed) if site_rows is None or r["site"] == site_rows]
        assert (kpi.before, kpi.after) == (sum(int(r["actual"]) for r, _ in mine), sum(int(c["actual"]) for _, c in mine)), user.name
