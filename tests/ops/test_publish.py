"""Publishing (lib/ops/publish.py, through ConfigRepo): conflicts, far-apart edits, invalid drafts, concurrent publishes.

Against a real git repository with a bare remote (the `config_repo` fixture).
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import shutil
import subprocess
import sys
import threading

import git
import pytest

from lib.core.diagnostics import ValidationFailed, has_errors
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.ops import publish
from lib.repo.configrepo import ConfigRepo
from lib.repo.drafts import PublishConflict
from lib.repo.history import MAIN, read_file
from lib.roles.access import OPERATOR
from tests.configrepo_helpers import (
    GDP,
    OLIVIA,
    SAM,
    SCW,
    WORKSPACES,
    assert_main_clean,
    edit_rule,
    files_on_disk,
    rule_text,
    sha,
)

from ..conftest import ROOT

# --------------------------------------------------------------------------- 4. conflicting publishes


def _assert_conflict_kept_both(repo, slug, exc, main_before, first_text, second_text):
    assert f"{slug}/task.yaml" in str(exc.value)
    assert exc.value.files == [f"{slug}/task.yaml"]
    assert sha(repo) == main_before
    assert_main_clean(repo)
    # both versions are kept: the first on main, the second on sam's draft
    main_raw, sam_raw = read_file(repo.repo, MAIN, f"{slug}/task.yaml"), read_file(repo.repo, f"draft/sam/{slug}", f"{slug}/task.yaml")
    assert main_raw is not None and sam_raw is not None
    main_task, sam_task = main_raw.decode(), sam_raw.decode()
    assert first_text in main_task and second_text not in main_task
    assert second_text in sam_task and first_text not in sam_task
    # and on disk: the published checkout and sam's worktree
    assert first_text in (repo.path / slug / "task.yaml").read_text()
    assert second_text in (repo.draft(SAM, slug).workspace_path / "task.yaml").read_text()


def test_owner_publishing_stewards_conflicting_draft_raises_and_keeps_both(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, SCW, 0, "Olivia: gates use the corporate palette.")
    edit_rule(repo, SAM, SCW, 0, "Sam: gates are coloured by site.")
    publish.publish(repo, OLIVIA, SCW, "Olivia's palette")
    main_before = sha(repo)

    with pytest.raises(PublishConflict) as exc:
        publish.publish_branch(repo, OLIVIA, SCW, repo.branch_name(SAM, SCW))

    _assert_conflict_kept_both(repo, SCW, exc, main_before, "Olivia: gates use the corporate palette.", "Sam: gates are coloured by site.")


def test_steward_publishing_conflicting_draft_in_gdp_raises_and_keeps_both(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, GDP, 1, "Olivia: drop aggregates from rankings.")
    edit_rule(repo, SAM, GDP, 1, "Sam: show aggregates in a separate table.")
    publish.publish(repo, OLIVIA, GDP)
    main_before = sha(repo)

    with pytest.raises(PublishConflict) as exc:
        publish.publish(repo, SAM, GDP)

    _assert_conflict_kept_both(repo, GDP, exc, main_before, "Olivia: drop aggregates from rankings.", "Sam: show aggregates in a separate table.")


# --------------------------------------------------------------------------- 5. non-overlapping publishes


def test_edits_to_far_apart_rules_both_publish(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, SCW, 0, "Olivia edited the first rule.")
    edit_rule(repo, SAM, SCW, 5, "Sam edited the last rule.")

    first = publish.publish(repo, OLIVIA, SCW)
    second = publish.publish_branch(repo, OLIVIA, SCW, repo.branch_name(SAM, SCW))

    assert first != second and sha(repo) == second
    assert repo.repo.commit(second).parents[0].hexsha == first
    assert rule_text(repo, MAIN, SCW, 0) == "Olivia edited the first rule."
    assert rule_text(repo, MAIN, SCW, 5) == "Sam edited the last rule."
    assert not has_errors(workspace.validate(repo.path / SCW))
    assert_main_clean(repo)


def test_edits_to_different_files_both_publish(config_repo):
    repo = config_repo
    edit_rule(repo, OLIVIA, GDP, 0, "Olivia's format rule.")
    d = repo.draft(SAM, GDP)
    meta = copy.deepcopy(workspace.load(d.workspace_path)[0].data["workspace"])
    meta["description"] = "Sam's clearer description."
    assert repo.save(SAM, GDP, {"workspace": meta}, "Describe better")

    publish.publish(repo, OLIVIA, GDP)
    publish.publish(repo, SAM, GDP)  # stewards may publish gdp-explorer

    assert rule_text(repo, MAIN, GDP, 0) == "Olivia's format rule."
    assert repo.meta(GDP)["description"] == "Sam's clearer description."
    assert (repo.path / GDP / "task.yaml").read_bytes() == read_file(repo.repo, MAIN, f"{GDP}/task.yaml")
    assert_main_clean(repo)


# --------------------------------------------------------------------------- 13. invalid draft


@pytest.mark.parametrize(
    "broken",
    [
        "rules: [\n  - id: oops\n",  # not YAML
        "goal: fine\nrules:\n  - id: no-text\n    author: olivia\n    created: '2026-12-01'\n",  # rule without text
    ],
    ids=["malformed-yaml", "missing-text"],
)
def test_publishing_invalid_draft_is_refused_and_main_unchanged(config_repo, broken):
    repo = config_repo
    d = repo.draft(OLIVIA, SCW)
    (d.workspace_path / "task.yaml").write_text(broken, encoding="utf-8")
    wt = git.Repo(d.path)
    wt.git.add("--all")
    wt.git.commit(
        "-q", "-m", "Broken by hand", env={"GIT_AUTHOR_NAME": "olivia", "GIT_AUTHOR_EMAIL": "o@x", "GIT_COMMITTER_NAME": "olivia", "GIT_COMMITTER_EMAIL": "o@x"}
    )
    main_before = sha(repo)
    main_files = files_on_disk(repo.path / SCW)

    with pytest.raises(ValidationFailed):
        publish.publish(repo, OLIVIA, SCW)

    assert sha(repo) == main_before
    assert files_on_disk(repo.path / SCW) == main_files
    assert_main_clean(repo)
    assert read_file(repo.repo, d.branch, f"{SCW}/task.yaml") == broken.encode()


def _title_with_a_figure_from_the_data(repo: ConfigRepo) -> tuple[dict, str]:
    """The draft's dashboard with the total of `actual` (what the volume card shows) written into its title."""
    import csv

    with open(WORKSPACES / SCW / "data" / "gates.csv", newline="") as handle:
        figure = f"{sum(int(row['actual']) for row in csv.DictReader(handle)):,}"
    dashboard = copy.deepcopy(workspace.load(repo.draft(OLIVIA, SCW).workspace_path)[0].data["dashboard"])
    card = next(c for c in dashboard["components"] if c["id"] == "kpi_volume")
    card["title"] = f"Units through the gates ({figure} this week)"
    return dashboard, figure


def test_publishing_a_draft_whose_dashboard_checks_fail_is_refused_naming_the_check(config_repo):
    """Publish runs the full checks, on the data, on the merged workspace, not only the schemas: a figure
    from the data typed into a title would go stale at the next refresh (check.literal_values)."""
    repo = config_repo
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "A figure in a title")  # saving checks the schemas only
    main_before = sha(repo)

    with pytest.raises(ValidationFailed) as info:
        publish.publish(repo, OLIVIA, SCW)

    assert [d.id for d in info.value.diagnostics] == ["check.literal_values"]
    assert figure in str(info.value) and f"{SCW}/dashboard.yaml:" in str(info.value)
    assert "dashmem-scratch" not in str(info.value)  # files named as in the repo, not the temporary copy
    assert sha(repo) == main_before
    assert figure not in (repo.path / SCW / "dashboard.yaml").read_text()
    assert_main_clean(repo)


def test_a_report_change_goes_draft_review_publish_history_with_no_special_case(config_repo):
    """A steward's report edit: Review shows what it means and the same checks publish runs; a figure typed
    into prose is refused at publish, the placeholder that replaces it publishes, and history tells it."""
    from lib.artifacts import checks
    from lib.memory import semantic_diff

    repo = config_repo
    _, figure = _title_with_a_figure_from_the_data(repo)
    draft = repo.draft(SAM, SCW)
    report = copy.deepcopy(workspace.load(draft.workspace_path)[0].data["report"])
    report["queries"]["volume"] = "SELECT sum(actual) AS units FROM gates"
    report["sections"].insert(3, {"type": "prose", "markdown": f"All sites together moved {figure} units."})
    assert repo.save(SAM, SCW, {"report": report}, "Report: the week's volume in words") is not None

    # Review: the meaning of the change, then the verdict publish will reach.
    meaning = [c.describe() for c in repo.draft_changes(SCW, draft.branch)]
    assert meaning == [
        "report query volume added: 'SELECT sum(actual) AS units FROM gates'",
        f"report section prose 'All sites together moved {figure} units.' added at sections[3]",
    ]
    [diff] = repo.draft_diff(SCW, draft.branch)
    assert diff.path == "report.yaml" and diff.status == "modified"
    found = checks.validate_workspace(draft.workspace_path)
    assert [(d.id, (d.file or "").rsplit("/", 1)[-1], d.field) for d in found] == [("check.literal_values", "report.yaml", "sections[3].markdown")]
    main_before = sha(repo)
    with pytest.raises(ValidationFailed) as info:
        publish.publish_branch(repo, OLIVIA, SCW, draft.branch)
    assert [d.id for d in info.value.diagnostics] == ["check.literal_values"] and f"{SCW}/report.yaml:" in str(info.value)
    assert sha(repo) == main_before and figure not in (repo.path / SCW / "report.yaml").read_text()

    report["sections"][3]["markdown"] = "All sites together moved {{volume.units|,.0f}} units."
    repo.save(SAM, SCW, {"report": report}, "Report: the volume from a query")
    assert checks.validate_workspace(draft.workspace_path) == []
    published = publish.publish_branch(repo, OLIVIA, SCW, draft.branch)

    assert "{{volume.units|,.0f}}" in (repo.path / SCW / "report.yaml").read_text()
    assert_main_clean(repo)
    top = repo.history(SCW)[0]
    assert top.sha == published
    told = semantic_diff.format_text(repo.changes(SCW, main_before, published))
    assert "Report:" in told and "report section prose 'All sites together moved {{volume.units|,.0f}} units.' added at sections[3]" in told


def test_publish_checks_the_data_of_an_uploaded_source_of_the_workspace(config_repo, tmp_path, monkeypatch):
    """The merged workspace is checked in a folder named after it, so its uploads (kept per workspace
    name, outside git) are found: the data checks run on them, and find the figure in the title."""
    from lib.core import settings
    from lib.data.connectors.csv_source import store_upload

    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    upload = store_upload(settings.uploads_dir(SCW), "gates.csv", (WORKSPACES / SCW / "data" / "gates.csv").read_bytes())
    d = repo.draft(OLIVIA, SCW)
    sources = copy.deepcopy(workspace.load(d.workspace_path)[0].data["sources"])
    sources["sources"][0]["path"] = upload
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"sources": sources, "dashboard": dashboard}, "Read the uploaded file; a figure in a title")
    (d.workspace_path / "data" / "gates.csv").unlink()  # only the upload has the data now
    repo.save(OLIVIA, SCW, {}, "drop the committed copy")

    with pytest.raises(ValidationFailed) as info:
        publish.publish(repo, OLIVIA, SCW)
    assert [d.id for d in info.value.diagnostics] == ["check.literal_values"]

    dashboard["components"][1]["title"] = "Units through the gates"
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "no figure")
    publish.publish(repo, OLIVIA, SCW)
    published = read_file(repo.repo, MAIN, f"{SCW}/sources.yaml")
    assert published is not None and published.decode().count(upload) == 1
    assert_main_clean(repo)


def test_a_workspace_whose_policy_does_not_require_validity_publishes_with_failing_checks(config_repo):
    repo = config_repo
    d = repo.draft(OLIVIA, SCW)
    meta = copy.deepcopy(workspace.load(d.workspace_path)[0].data["workspace"])
    meta["policy"]["require_valid_to_publish"] = False
    repo.save(OLIVIA, SCW, {"workspace": meta}, "validity is advisory here")
    publish.publish(repo, OLIVIA, SCW)
    dashboard, figure = _title_with_a_figure_from_the_data(repo)
    repo.save(OLIVIA, SCW, {"dashboard": dashboard}, "A figure in a title")

    publish.publish(repo, OLIVIA, SCW)

    assert figure in (repo.path / SCW / "dashboard.yaml").read_text()
    assert_main_clean(repo)


# --------------------------------------------------------------------------- the data a published version needs

ORDERS_CSV = "day,site,orders\n2026-11-16,Brno,12\n2026-11-16,Porto,7\n2026-11-17,Brno,9\n"
# A viewer's render of the published workspace, in a process of its own: the data it is served, as the app and the CLI read it.
VIEWERS_RENDER = """
import json, sys
from pathlib import Path
from lib.artifacts.render import render
from lib.data.snapshots import Warehouse
from lib.memory import workspace
path = Path(sys.argv[1])
ws, _ = workspace.load(path)
wh = Warehouse.for_workspace(path)
snapshot = wh.current()
shown = render(ws.data, wh.tables(snapshot), snapshot.id, workspace_path=path)
rows = {c.id: c.result.table.num_rows if c.result is not None else None for c in shown.components}
print(json.dumps({"errors": shown.errors, "values": {c.id: c.value for c in shown.components}, "rows": rows}))
"""


def viewers_render(repo: ConfigRepo, slug: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", VIEWERS_RENDER, str(repo.published_path(slug))], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def serve_published(repo: ConfigRepo, slug: str) -> Warehouse:
    """The published workspace's data loaded, as after its first view or a Refresh."""
    wh = Warehouse.for_workspace(repo.published_path(slug))
    assert refresh(repo.published_path(slug), wh, user=OPERATOR).ok
    return wh


def add_orders_source(repo: ConfigRepo, user, slug: str, *, with_file: bool = True) -> None:
    """The user's draft adds a CSV source `orders` and two components on it, laid out below the others."""
    d = repo.draft(user, slug)
    if with_file:
        (d.workspace_path / "data" / "orders.csv").write_text(ORDERS_CSV, encoding="utf-8")
    files = workspace.load(d.workspace_path)[0].data
    sources, dashboard = copy.deepcopy(files["sources"]), copy.deepcopy(files["dashboard"])
    sources["sources"].append({"name": "orders", "type": "csv", "path": "data/orders.csv", "description": "Orders per day and site."})
    dashboard["components"] += [
        {"id": "kpi_orders", "type": "kpi", "title": "Orders", "query": "SELECT sum(orders) AS value FROM orders", "format": ",d"},
        {
            "id": "orders_by_site",
            "type": "chart",
            "title": "Orders by site",
            "query": "SELECT site, sum(orders) AS orders FROM orders GROUP BY site ORDER BY site",
            "mark": "bar",
            "encoding": {"x": {"field": "site", "type": "nominal"}, "y": {"field": "orders", "type": "quantitative"}},
        },
    ]
    dashboard["layout"].append(["kpi_orders", "orders_by_site"])
    assert repo.save(user, slug, {"sources": sources, "dashboard": dashboard}, "Add orders and two components on it")


def test_publishing_a_draft_that_adds_a_source_loads_its_data_so_every_viewer_sees_it(config_repo, tmp_path, monkeypatch):
    """sam adds a CSV source and components on it; olivia publishes; a viewer's render in another process shows
    the new components with their data and no error, and the tables already served were not fetched again."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    wh = serve_published(repo, SCW)
    served_before = wh.current()
    assert served_before is not None
    add_orders_source(repo, SAM, SCW)
    steps: list[str] = []

    publish.publish_branch(repo, OLIVIA, SCW, repo.branch_name(SAM, SCW), progress=lambda fraction, message: steps.append(message))

    seen = viewers_render(repo, SCW)
    assert seen["errors"] == []
    orders = [int(line.split(",")[2]) for line in ORDERS_CSV.splitlines()[1:]]
    assert seen["values"]["kpi_orders"] == sum(orders)
    assert seen["rows"]["orders_by_site"] == len({line.split(",")[1] for line in ORDERS_CSV.splitlines()[1:]})
    assert seen["values"]["kpi_volume"] is not None  # the components already there still render
    # The progress named the source loaded, and the last step says it is served to everyone.
    assert any("orders" in m and m.startswith("Loading") for m in steps) and "orders" in steps[-1] and "everyone" in steps[-1]
    served = wh.current()
    assert served is not None and set(served.tables) == {"gates", "orders"} and served.id != served_before.id
    assert served.tables["gates"]["rows"] == served_before.tables["gates"]["rows"]
    assert_main_clean(repo)


def test_a_source_that_cannot_be_loaded_refuses_the_publish_with_the_reason_and_changes_nothing(config_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    wh = serve_published(repo, SCW)
    served_before = wh.current()
    add_orders_source(repo, SAM, SCW, with_file=False)  # its file was never added to the draft
    main_before, published_files = sha(repo), files_on_disk(repo.path / SCW)

    with pytest.raises(ValidationFailed) as refused:
        publish.publish_branch(repo, OLIVIA, SCW, repo.branch_name(SAM, SCW))

    [why] = [d for d in refused.value.diagnostics if d.id == publish.NOT_LOADED]
    assert "'orders'" in why.message and "data/orders.csv" in why.message and "nothing was published" in why.message
    assert why.file == f"{SCW}/sources.yaml" and why.line  # located where the source is declared
    assert "dashmem-scratch" not in str(refused.value)
    assert sha(repo) == main_before and files_on_disk(repo.path / SCW) == published_files
    served = wh.current()
    assert served is not None and served_before is not None and served.id == served_before.id
    assert viewers_render(repo, SCW)["errors"] == []
    assert_main_clean(repo)


@pytest.mark.parametrize("how", ["path", "file"])
def test_publishing_a_changed_source_serves_the_data_it_now_reads(config_repo, tmp_path, monkeypatch, how):
    """A source that reads another file (`path`), or whose committed file the draft replaces (`file`), is loaded at publish."""
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    wh = serve_published(repo, SCW)
    d = repo.draft(OLIVIA, SCW)
    next_week = WORKSPACES / SCW / "data" / "next_week" / "gates.csv"
    if how == "path":
        sources = copy.deepcopy(workspace.load(d.workspace_path)[0].data["sources"])
        sources["sources"][0]["path"] = "data/next_week/gates.csv"
        repo.save(OLIVIA, SCW, {"sources": sources}, "Read next week's file")
    else:
        shutil.copyfile(next_week, d.workspace_path / "data" / "gates.csv")
        repo.save(OLIVIA, SCW, {}, "Next week's file")

    publish.publish(repo, OLIVIA, SCW)

    first_day = min(line.split(",")[0] for line in next_week.read_text(encoding="utf-8").splitlines()[1:])
    assert str(wh.query("SELECT min(day) FROM gates").rows[0][0]) == first_day
    assert viewers_render(repo, SCW)["errors"] == []


def test_a_publish_that_changes_no_source_loads_nothing(config_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    repo = config_repo
    wh = serve_published(repo, SCW)
    before = [s.id for s in wh.snapshots()]
    edit_rule(repo, OLIVIA, SCW, 0, "Olivia: gates use the corporate palette.")

    publish.publish(repo, OLIVIA, SCW)

    assert [s.id for s in wh.snapshots()] == before


# --------------------------------------------------------------------------- 14. concurrent publishes


def _prepare_two_drafts(repo):
    edit_rule(repo, OLIVIA, GDP, 0, "Concurrent change to gdp.")
    edit_rule(repo, OLIVIA, SCW, 0, "Concurrent change to supply chain.")


def _assert_both_published(repo, start, results):
    assert sorted(results) == sorted([(GDP, "ok"), (SCW, "ok")]), results
    assert rule_text(repo, MAIN, GDP, 0) == "Concurrent change to gdp."
    assert rule_text(repo, MAIN, SCW, 0) == "Concurrent change to supply chain."
    # two publish merges, one after the other, on main's first-parent line
    chain = list(repo.repo.iter_commits(MAIN, first_parent=True))
    assert len(chain) == 3 and chain[-1].hexsha == start
    assert all(len(c.parents) == 2 for c in chain[:2])
    assert_main_clean(repo)
    assert "Concurrent change to gdp." in (repo.path / GDP / "task.yaml").read_text()
    assert "Concurrent change to supply chain." in (repo.path / SCW / "task.yaml").read_text()


def _publish_in_process(path, slug, barrier, results):
    repo = ConfigRepo(path)
    barrier.wait(timeout=30)
    try:
        publish.publish(repo, OLIVIA, slug)
        results.put((slug, "ok"))
    except Exception as exc:  # reported to the parent
        results.put((slug, repr(exc)))


def test_two_processes_publishing_at_once_are_serialised(config_repo):
    repo = config_repo
    _prepare_two_drafts(repo)
    start = sha(repo)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_publish_in_process, args=(repo.path, slug, barrier, results)) for slug in (GDP, SCW)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _assert_both_published(repo, start, [results.get(timeout=5) for _ in procs])


def test_two_threads_sharing_one_config_repo_publish_at_once(config_repo):
    """The app keeps one ConfigRepo for all sessions (st.cache_resource), so two
    users publishing at once are two threads on the same object; a third
    thread keeps reading, like a viewer browsing the history meanwhile."""
    repo = config_repo
    _prepare_two_drafts(repo)
    start = sha(repo)
    barrier, results, stop, read_errors = threading.Barrier(3), [], threading.Event(), []

    def publish_one(slug):
        barrier.wait(timeout=30)
        try:
            publish.publish(repo, OLIVIA, slug)
            results.append((slug, "ok"))
        except Exception as exc:
            results.append((slug, repr(exc)))

    def browse():
        barrier.wait(timeout=30)
        while not stop.is_set():
            try:
                assert repo.meta(GDP)["name"] == "GDP explorer"
                assert repo.history(SCW)
            except Exception as exc:
                read_errors.append(repr(exc))
                return

    threads = [threading.Thread(target=publish_one, args=(slug,), daemon=True) for slug in (GDP, SCW)]
    reader = threading.Thread(target=browse, daemon=True)
    for t in threads + [reader]:
        t.start()
    for t in threads:
        t.join(timeout=20)
    stop.set()
    reader.join(timeout=20)
    assert not any(t.is_alive() for t in threads + [reader]), "a publish or read hung"
    assert read_errors == []
    _assert_both_published(repo, start, results)
