"""`python -m lib <command>`: the workspace tools for people and for CI.

PATH is a workspace folder (or, for `validate`, any folder holding
workspaces). The commands work on a plain checkout of a config repo as well as
on the app's own config repo. Exit status is 0 on success, 1 when validation
or the operation failed, 2 on usage errors.

Each command imports what it uses when it runs: cron and CI start a fresh
process per command, and a cold `refresh` should pay for the CSV parser and
DuckDB, not for git, the renderer or jsonschema's metaschema.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..core import settings
from ..core.diagnostics import ERROR, has_errors
from ..core.errors import DashmemError

if TYPE_CHECKING:
    from ..memory.workspace import Workspace

PROG = settings.COMMAND  # `python -m lib` in this checkout, `dashmem` installed


def _print_json(payload) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))


def cmd_settings(args) -> int:
    """The table of DASHMEM_* settings, printed, or written between the markers of a README."""
    if not args.readme:
        print(settings.markdown_table(), end="")
        return 0
    path = Path(args.readme)
    text = path.read_text(encoding="utf-8")
    updated = settings.with_table(text)
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    print(f"{'wrote' if updated != text else 'unchanged:'} {path}", file=sys.stderr)
    return 0


def cmd_validate(args) -> int:
    from ..artifacts import checks
    from ..memory import workspace

    root = Path(args.path)
    if not root.exists():
        return _fail(args, f"{root}: no such file or folder")
    found = workspace.find_workspaces(root)
    if not found:
        return _fail(args, f"{root}: no workspace found (a workspace is a folder with {workspace.FILES['workspace']})")
    # DASHMEM_VALIDATE_STRICT is how a config repo's CI asks for --strict (a repository variable, lib/repo/ci_workflow.py).
    strict = args.strict or settings.get("DASHMEM_VALIDATE_STRICT")
    results = {str(p): checks.validate_workspace(p, strict=strict) for p in found}
    errors = sum(1 for ds in results.values() for d in ds if d.level == ERROR)
    if args.json:
        _print_json(
            {
                "ok": errors == 0,
                "errors": errors,
                "workspaces": [{"path": p, "ok": not has_errors(ds), "diagnostics": [d.to_dict() for d in ds]} for p, ds in results.items()],
            }
        )
    else:
        for p, ds in results.items():
            print(f"{'FAIL' if has_errors(ds) else 'ok  '} {p}")
            for d in ds:
                print(f"  {d.format()}")
        print(f"{len(results)} workspace(s), {errors} error(s)")
    return 1 if errors else 0


class _Refused(DashmemError):
    """A command cannot go on; what is wrong has been printed or is in the message."""


def _start_query_workers(count: int | None = None) -> None:
    """For a command that will run queries: start its query workers now (`count`, or one per core as a render runs them),
    beside its imports and loading, rather than when its first query comes."""
    from ..data import query_worker

    query_worker.start_early(count or os.cpu_count() or 1)


def _valid_workspace(path: Path) -> Workspace:
    """The workspace at PATH, or print its errors and refuse."""
    from ..memory import workspace

    ws, diagnostics = workspace.load(path)
    if has_errors(diagnostics):
        for d in diagnostics:
            print(d.format(), file=sys.stderr)
        raise _Refused("the workspace does not validate; fix it first")
    return ws


def _warehouse_with_data(path: Path, *, required: bool = True):
    """The workspace's warehouse, loading the data first when it has none."""
    from ..data.refresh import refresh
    from ..data.snapshots import Warehouse
    from ..roles.access import OPERATOR

    wh = Warehouse.for_workspace(path)
    if wh.current() is None:
        report = refresh(path, wh, user=OPERATOR)
        if not report.swapped:
            print(report.summary(), file=sys.stderr)
            if required:
                raise _Refused("could not load the data")
    return wh


def cmd_check(args) -> int:
    from ..artifacts import checks
    from ..memory import workspace

    path = Path(args.path)
    ws = _valid_workspace(path)
    if not ws.get("dashboard") and not ws.get("report"):
        return _fail(args, f"{path} has no {workspace.FILES['dashboard']} or {workspace.FILES['report']} to check")
    _start_query_workers()
    # The same verdict as `validate`, Review and publish: the data the sources give now, not the cache.
    return _report_checks(args, checks.validate_workspace(path))


def _report_checks(args, found: list) -> int:
    errors = [d for d in found if d.level == ERROR]
    if args.json:
        _print_json({"ok": not errors, "errors": len(errors), "diagnostics": [d.to_dict() for d in found]})
    else:
        for d in found:
            print(d.format())
        print(f"{len(errors)} error(s), {len(found) - len(errors)} warning(s)" if found else "all checks passed")
    return 1 if errors else 0


def cmd_autodraft(args) -> int:
    from ..artifacts import autodraft, checks
    from ..memory import workspace

    path = Path(args.path)
    ws = _valid_workspace(path)
    kinds = autodraft.DRAFTABLE if args.draft == "both" else (args.draft,)
    mode = autodraft.ADD if args.add else autodraft.NEW
    for kind in kinds:
        if ws.get(kind) and mode == autodraft.NEW and not args.force:
            return _fail(args, f"{path / workspace.FILES[kind]} exists; use --force to replace it (git keeps the old one), or --add to add to it")
    wh = _warehouse_with_data(path)
    drafted = autodraft.draft_into(ws.data, wh.tables(), kinds, names=args.table or None, mode=mode, workspace_path=path)
    changed = workspace.save(path, drafted.files)
    # stderr, so that `--json` leaves stdout to the check results
    for change in drafted.changes.values():
        print(f"{workspace.FILES[change.file]}: " + " ".join(change.summary()) + (f" {change.warning()}" if change.warning() else ""), file=sys.stderr)
    print(f"wrote {', '.join(changed) or 'nothing (unchanged)'} in {path}", file=sys.stderr)
    return _report_checks(args, checks.validate_workspace(path))


def cmd_compose(args) -> int:
    from ..chat.compose import compose_workspace, summary, to_json

    if not args.message.strip():
        return _fail(args, "give the message to compose with --message TEXT (it is empty)")
    composed = compose_workspace(args.path, args.message, args.mode)
    print(to_json(composed))
    print(summary(composed), file=sys.stderr)
    for d in composed.diagnostics:
        print(d.format(), file=sys.stderr)
    return 0


def cmd_export(args) -> int:
    from ..artifacts.dashboard_export import export_workspace
    from ..memory import workspace
    from ..roles.access import OPERATOR

    path = Path(args.path)
    if not args.html and not args.png and not args.pdf and not args.picture:
        return _fail(
            args, "say what to write: --html FILE, --pdf FILE (a report), --png FOLDER (a dashboard's charts) and/or --picture FILE (the dashboard as one PNG)"
        )
    has = {kind for kind in ("dashboard", "report") if (path / workspace.FILES[kind]).is_file()}
    # --pdf and --param exist only for reports; --html writes the dashboard unless --report says otherwise or there is no dashboard.
    report = bool(args.report or args.pdf or args.param or ("report" in has and "dashboard" not in has))
    if report:
        if args.png or args.picture:
            return _fail(
                args, "--png and --picture write a dashboard's charts or picture; export the report with --html and/or --pdf, and the dashboard in another run"
            )
        return _export_report(args, path)
    _start_query_workers()  # beside the imports and the loading: a render runs one query per core (docs/benchmarks.md)
    html, png = Path(args.html) if args.html else None, Path(args.png) if args.png else None
    picture = Path(args.picture) if args.picture else None
    written = export_workspace(path, html, png, user=OPERATOR, viewer=_as_user(args), picture_out=picture)
    # an ExportError is a DashmemError: main() prints it as one line
    for cid, error in written["errors"]:
        print(f"warning: component {cid!r}: {error}", file=sys.stderr)
    if written["html"]:
        print(f"wrote {written['html']} (data {written['data_version']}, opens offline)")
    if written["picture"]:
        print(f"wrote {written['picture']} (the dashboard as one PNG picture; data {written['data_version']})")
    for png in written["pngs"]:
        print(f"wrote {png}")
    return 1 if written["errors"] else 0


def _export_report(args, path: Path) -> int:
    """`export --pdf/--html` of the workspace's report.yaml, over its newest snapshot, with `--param ID=VALUE` choices."""
    from ..artifacts.explain import ExplainError, parse_filters
    from ..artifacts.render import filter_states
    from ..artifacts.report_export import ReportExportError, export_report
    from ..data.engine import Engine
    from ..roles.access import OPERATOR

    viewer = _as_user(args)
    ws = _valid_workspace(path)
    report = ws.get("report")
    if not report:
        return _fail(args, f"{path} has no report.yaml to export")
    wh = _warehouse_with_data(path)
    snapshot = wh.current()
    try:
        tables, version = wh.tables(snapshot), snapshot.id if snapshot else "none"
        engine = Engine.for_workspace(ws.data, tables, version, workspace_path=path, user=viewer)  # the parameters' choices are the viewer's
        chosen = parse_filters(report, filter_states({"filters": report.get("parameters") or []}, tables, version, engine), args.param or [])
    except ExplainError as exc:  # its words are a dashboard's; a report's parameters are filters by another name
        return _fail(args, str(exc).replace("filter", "parameter").replace("this dashboard", "this report"))
    try:
        written = export_report(path, Path(args.html) if args.html else None, Path(args.pdf) if args.pdf else None, wh, chosen, user=OPERATOR, viewer=viewer)
    except ReportExportError as exc:
        return _fail(args, str(exc))
    for cid, error in written["errors"]:
        print(f"warning: {cid!r}: {error}", file=sys.stderr)
    for key, what in (("pdf", "PDF"), ("html", "HTML, opens offline")):
        if written[key]:
            print(f"wrote {written[key]} (report {what}; data {written['data_version']})")
    return 1 if written["errors"] else 0


def cmd_new(args) -> int:
    from ..memory import workspace

    target = Path(args.path)
    if ".." in target.parts:
        return _fail(args, f"{args.path}: give the new workspace's folder without '..'; nothing was written")
    try:
        workspace.check_slug(target.name)
    except workspace.InvalidName as exc:
        return _fail(args, str(exc))
    if target.exists():
        return _fail(args, f"{target} already exists; nothing was written")
    if args.template:
        template = Path(args.template)
        if not workspace.is_workspace(template):
            from ..core.settings import templates_dir

            template = templates_dir() / args.template
        if not workspace.is_workspace(template):
            return _fail(args, f"no template workspace {args.template!r}")
        workspace.copy_template(template, target, name=args.name)
    else:
        name = args.name or target.name.replace("-", " ").capitalize()
        workspace.save(target, workspace.blank(name, args.owner, dt.date.today().isoformat()))
    problems = workspace.validate(target)
    for d in problems:
        print(d.format())
    print(f"created {target}")
    return 1 if has_errors(problems) else 0


def cmd_history(args) -> int:
    from ..repo import history

    repo, folder = history.find_repo(Path(args.path))
    ref = args.ref or repo.active_branch.name
    history.resolve(repo, ref)  # an unknown branch or commit is a plain message, not git's traceback
    versions = history.history(repo, folder, ref, args.limit)
    if args.json:
        _print_json([{**v.__dict__, "short": v.short} for v in versions])
        return 0
    for v in versions:
        print(f"{v.short}  {v.date[:19]}  {v.author:<16} {v.message}")
    return 0


def cmd_diff(args) -> int:
    from ..repo import history

    repo, folder = history.find_repo(Path(args.path))
    diffs = history.diff(repo, folder, args.a, args.b)
    if args.file:
        diffs = [d for d in diffs if d.path == args.file]
    if args.semantic:
        return _print_semantic(history.semantic_diff(repo, folder, args.a, args.b), diffs, args)
    if args.json:
        _print_json([d.__dict__ for d in diffs])
        return 0
    for d in diffs:
        sys.stdout.write(d.patch if d.patch.endswith("\n") or not d.patch else d.patch + "\n")
    if not diffs:
        print("no differences")
    return 0


def _print_semantic(changes: list, diffs: list, args) -> int:
    """The meaning of the changes first, then the per-file diff as the detail (`--file` narrows both)."""
    from ..memory import semantic_diff
    from ..memory.kinds import KINDS

    if args.file:
        kind = next((k for k in KINDS.values() if k.file == args.file), None)
        category = kind.review.name if kind else None
        changes = [c for c in changes if c.category == category or (c.category == "file" and c.id == args.file)]
    if args.json:
        _print_json({"changes": [c.to_dict() for c in changes], "files": [d.__dict__ for d in diffs]})
        return 0
    print(semantic_diff.format_text(changes))
    if diffs:
        print()
    for d in diffs:
        sys.stdout.write(d.patch if d.patch.endswith("\n") or not d.patch else d.patch + "\n")
    return 0


def cmd_revert(args) -> int:
    import git

    from ..repo import history

    repo, folder = history.find_repo(Path(args.path))
    author = git.Actor.committer(repo.config_reader()) if not args.author else git.Actor(args.author, f"{args.author}@users.dashmem.invalid")
    if not author.name:
        author = git.Actor("dashmem-cli", "dashmem-cli@localhost")
    sha = history.restore(repo, folder, args.version, author)
    print(f"reverted {folder} to {args.version} as {sha[:10]}" if sha else f"{folder} already equals {args.version}; nothing to commit")
    return 0


def cmd_publish(args) -> int:
    from ..ops import publish
    from ..repo import configrepo, history
    from ..repo.history import work_tree
    from ..roles.access import User

    repo, folder = history.find_repo(Path(args.path))
    cr = configrepo.ConfigRepo(work_tree(repo))
    user = User(args.as_user)
    branch = args.branch or cr.branch_name(user, Path(folder).name)
    said: list[str] = []  # the last step says which sources' data the publish loaded for everyone
    sha = publish.publish_branch(cr, user, Path(folder).name, branch, progress=lambda fraction, message: said.append(message))
    print(f"published {branch} to {history.MAIN} as {sha[:10]}")
    if said and said[-1] != publish.PUBLISHED:
        print(said[-1])
    return 0


def cmd_access(args) -> int:
    """Who holds each role, and with --add/--remove ROLE:NAME a change to it: on USER's draft with --as (an owner's,
    published like any change), else in PATH's workspace.yaml as the operator, who holds the files already."""
    from ..memory import workspace
    from ..roles import access

    add = [access.Grant.parse(text) for text in args.add or []]
    remove = [access.Grant.parse(text) for text in args.remove or []]
    path = Path(args.path)
    commit, done, where = None, [], str(path / workspace.FILES["workspace"])
    if args.as_user:
        from ..repo import configrepo, history

        repo, folder = history.find_repo(path)
        try:
            user = access.User(args.as_user)
        except ValueError as exc:  # a name no sign-in could have: said as it is
            return _fail(args, f"--as: {exc}")
        cr, slug = configrepo.ConfigRepo(history.work_tree(repo)), Path(folder).name
        if add or remove:
            commit, done = cr.change_access(user, slug, add, remove)
        lists, where = cr.access_lists(user, slug), f"{user.name}'s draft of {slug}" if cr.has_draft(user, slug) else f"{slug} as published"
    else:
        meta = dict(_valid_workspace(path).get("workspace") or {})
        meta["access"], done = access.changed_access(meta.get("access"), add, remove)
        if done:
            workspace.save(path, {"workspace": meta})
        lists = {key: list(meta["access"].get(key) or []) for key in access.ROLE_LISTS.values()}
    if args.json:
        _print_json({"ok": True, "access": lists, "changed": done, "commit": commit, "where": where})
        return 0
    for line in done:
        print(line)
    if done:
        print(f"saved to {where}" + (f" as {commit[:10]}; publish it with `{PROG} publish {args.path} --as {args.as_user}`" if commit else ""))
    elif add or remove:
        print(f"nothing to change in {where}")
    for role, key in access.ROLE_LISTS.items():
        print(f"{role + 's:':<10} {', '.join(lists[key]) or '(nobody)'}")
    return 0


def cmd_sync(args) -> int:
    """Pull the app's config repo from the remote several app servers share (DASHMEM_CONFIG_REMOTE)."""
    from ..repo import configrepo, history, replica

    path, remote = settings.config_repo_path(), settings.get("DASHMEM_CONFIG_REMOTE")
    if not (path / ".git").exists():
        cloning = bool(remote) and replica.remote_main(replica.check_url(remote)) is not None
        cr = configrepo.ConfigRepo.open_or_create(path, settings.templates_dir(), remote)
        done = [f"cloned {path} from {remote}" if cloning else f"created {path} from the templates" + (f" and pushed it to {remote}" if remote else "")]
    else:
        cr = configrepo.ConfigRepo(path)
        done = replica.attach(cr, replica.check_url(remote)) if remote else cr.pull()
    if args.json:
        _print_json({"ok": True, "repo": str(path), "main": cr.repo.commit(history.MAIN).hexsha, "changed": done})
        return 0
    for line in done:
        print(line)
    print(f"{path}: {history.MAIN} at {cr.repo.commit(history.MAIN).hexsha[:10]}{'' if done else ', up to date'}")
    return 0


def cmd_source_add(args) -> int:
    import yaml

    from ..memory import workspace

    ws_path = Path(args.path)
    ws = _valid_workspace(ws_path)
    source: dict = {"name": args.name, "type": args.type}
    if args.path_option:
        source["path"] = args.path_option
    if args.url:
        source["url"] = args.url
    for item in args.set or []:
        key, _, value = item.partition("=")
        source[key] = yaml.safe_load(value) if value else ""
    if args.yaml:
        source.update(yaml.safe_load(args.yaml) or {})
    sources = ws.get("sources") or {"sources": []}
    if any(s["name"] == args.name for s in sources["sources"]):
        return _fail(args, f"a source named {args.name!r} already exists")
    sources["sources"].append(source)
    workspace.save(ws_path, {"sources": sources})
    print(f"added source {args.name!r} ({args.type}) to {ws_path / workspace.FILES['sources']}")
    return 0


def cmd_refresh(args) -> int:
    from ..data.refresh import refresh
    from ..data.snapshots import Warehouse
    from ..roles.access import OPERATOR

    if args.all:
        return _refresh_all(args)
    if args.due:
        return _fail(args, "--due applies to --all (a scheduled run over the config repo); give --all CONFIG_REPO")
    if not args.path:
        return _fail(args, "give the workspace folder to refresh, or --all CONFIG_REPO for every published workspace")
    wh = Warehouse.for_workspace(Path(args.path))
    report = refresh(Path(args.path), wh, user=OPERATOR, full=args.full)
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.summary())
    return 0 if report.ok else 1


def _refresh_all(args) -> int:
    """Every published workspace of the config repo (default: the app's), for cron and systemd timers."""
    from ..ops.schedule import refresh_all

    repo_path = Path(args.path) if args.path else settings.config_repo_path()
    summary = refresh_all(repo_path, due_only=args.due)
    delivered = _deliver_after(repo_path, summary) if args.due else []
    if args.json:
        _print_json({**summary.to_dict(), "deliveries": [asdict(d) for d in delivered]})
    else:
        print(summary.table())
        for line in (line for d in delivered for line in d.lines()):
            print(line)
    for line in summary.pulled:
        print(f"pulled: {line}", file=sys.stderr)
    if summary.note:
        print(f"note: {summary.note}", file=sys.stderr)
    return 0 if summary.ok and all(d.ok for d in delivered) else 1


def _deliver_after(repo_path: Path, summary) -> list:
    """What a scheduled run sends once its refreshes are done: each workspace's due subscriptions and its alerts
    (lib.delivery), or, where its refresh failed, the owners' note that nothing was sent."""
    from ..delivery.run import deliver_all
    from ..repo.configrepo import ConfigRepo

    repo = ConfigRepo(repo_path)
    return deliver_all([(repo.published_path(o.workspace), o.status != "failed", o.message) for o in summary.outcomes])


def cmd_deliver(args) -> int:
    from ..delivery.run import deliver

    path = Path(args.path)
    _valid_workspace(path)
    done = deliver(path, every_one=args.now)
    if args.json:
        _print_json(asdict(done))
    else:
        for line in done.lines() or [f"{path.name}: nothing due"]:
            print(line)
    return 0 if done.ok else 1


def _as_user(args):
    """The user `--as USER` names (from the users file, DASHMEM_USERS), whose row filters then apply; None: the operator."""
    from ..roles import auth

    name = getattr(args, "as_user", None)
    if not name:
        return None
    credentials = auth.load_credentials()
    if name not in credentials["usernames"]:
        raise auth.AuthConfigError(f"--as {name}: no such user in {auth.users_path()}")
    return auth.user_for(name, credentials)


def cmd_query(args) -> int:
    from ..data.engine import Engine
    from ..data.snapshots import Warehouse
    from ..memory import workspace

    wh = Warehouse.for_workspace(Path(args.path))
    snapshot = wh.current()
    if snapshot is None:
        return _fail(args, f"no data loaded for {args.path}; run `{PROG} refresh {args.path}` first")
    _start_query_workers(1)  # one query
    ws, _ = workspace.load(Path(args.path), readonly=True)  # its sources say which tables are live; a spec error elsewhere does not matter here
    # Through the query engine: a live source's table is read in its database (its snapshot table is an empty stand-in).
    engine = Engine.for_workspace(ws.data, wh.tables(snapshot), snapshot.id, workspace_path=Path(args.path), user=_as_user(args))
    for note in engine.row_notes():
        print(f"note: {note}", file=sys.stderr)
    result = engine.run(args.sql, max_rows=args.max_rows)  # a QueryError is a DashmemError: main() prints it as one line
    if args.json:
        _print_json({"columns": result.columns, "rows": result.table.to_pylist(), "truncated": result.truncated})
        return 0
    frame = result.to_pandas()
    print(frame.to_string(index=False, max_rows=args.max_rows))
    print(f"({result.table.num_rows} row(s){', truncated' if result.truncated else ''}, {result.seconds * 1000:.1f} ms)")
    return 0


def cmd_profile(args) -> int:
    from ..chat import model
    from ..data import profile
    from ..memory import workspace

    ws_path = Path(args.path)
    ws = _valid_workspace(ws_path)
    wh = _warehouse_with_data(ws_path)
    content = profile.build_for(wh.tables(), ws.get("sources"), ws_path)
    if args.write:
        changed = workspace.save(ws_path, {"profile": content})
        print(f"{'wrote' if changed else 'unchanged:'} {ws_path / workspace.FILES['profile']}", file=sys.stderr)
    rendered = profile.text(content, budget=args.budget)
    count, method = model.count_tokens(rendered)
    print(rendered, end="")
    print(f"-- {count} tokens ({method})" + (f", budget {args.budget}" if args.budget else ""), file=sys.stderr)
    return 0


def cmd_explain(args) -> int:
    """Where one component's figures come from: its bound SQL, sources, data, task rules and the rows behind it."""
    from ..artifacts.explain import explain, parse_filters
    from ..artifacts.render import filter_states

    path = Path(args.path)
    ws = _valid_workspace(path)
    _start_query_workers(1)
    wh = _warehouse_with_data(path)
    snapshot = wh.current()
    tables = wh.tables(snapshot)
    dashboard = ws.get("dashboard") or {}
    chosen = parse_filters(dashboard, filter_states(dashboard, tables, snapshot.id if snapshot else "none"), args.filter or [])
    explained = explain(ws.data, tables, snapshot, args.component, chosen, workspace_path=path)  # an ExplainError is printed as one line
    if args.json:
        _print_json({"ok": True, **explained.to_dict()})
    else:
        print(explained.text())
    return 0


def cmd_rows(args) -> int:
    """The rows behind one component, or behind the marks `--select` picks on a chart with `select` (Show rows)."""
    from ..artifacts.drilldown import DrilldownError, component, drilldown
    from ..artifacts.explain import parse_filters
    from ..artifacts.render import filter_states
    from ..data.engine import Engine
    from ..memory import spec as specs

    path = Path(args.path)
    ws = _valid_workspace(path)
    _start_query_workers(1)
    wh = _warehouse_with_data(path)
    snapshot = wh.current()
    tables = wh.tables(snapshot)
    version = snapshot.id if snapshot else "none"
    dashboard = ws.get("dashboard") or {}
    # As the operator (every row) unless --as USER: then that user's row filters, filter options included.
    engine = Engine.for_workspace(ws.data, tables, version, workspace_path=path, user=_as_user(args))
    for note in engine.row_notes():
        print(f"note: {note}", file=sys.stderr)
    states = filter_states(dashboard, tables, version, engine)
    comp = component(dashboard, args.component)  # an unknown id is named as such, not as a --select without a field
    # A selected mark is its field's value set on the filter the chart's `select` drives, as a click sets it on the page.
    driven = {name.lower(): fid for _, name, fid in specs.selections(comp)}
    pairs = list(args.filter or [])
    for pair in args.select or []:
        name, eq, value = pair.partition("=")
        if not eq or name.strip().lower() not in driven:
            known = ", ".join(name for _, name, _ in specs.selections(comp)) or "none: it has no select"
            raise DrilldownError(f"--select {pair!r}: write FIELD=VALUE with a field the component's marks select ({known})")
        pairs.append(f"{driven[name.strip().lower()]}={value}")
    chosen = parse_filters(dashboard, states, pairs)
    d = drilldown(ws.data, tables, version, args.component, chosen, workspace_path=path, cap=args.max_rows, engine=engine)
    if args.json:
        _print_json(
            {
                "ok": True,
                "component": d.component,
                "marks": d.marks,
                "sql": d.sql,
                "params": d.params,
                "readable": d.readable,
                "columns": d.columns,
                "rows": d.rows,
                "matching": d.matching,
                "capped": d.capped,
            }
        )
        return 0
    what = "; ".join(f"{name} = {', '.join(str(v) for v in values)}" for name, values in d.marks.items())
    print(
        f"rows behind {args.component!r}"
        + (f", the selected {what}" if what else "")
        + f": {d.matching:,} match"
        + (f", the first {len(d.rows):,} shown" if d.capped else "")
    )
    print("sql: " + d.sql)
    if d.params:
        print("parameters: " + ", ".join(f"${k} = {v!r}" for k, v in d.params.items()))
    print("\t".join(d.columns))
    for row in d.rows:
        print("\t".join("" if row[c] is None else str(row[c]) for c in d.columns))
    return 0


def cmd_changes(args) -> int:
    """What changed between the data shown and the load kept before it: KPIs then and now, the biggest moves per component."""
    from ..artifacts.changes import compare
    from ..artifacts.explain import parse_filters
    from ..artifacts.render import filter_states

    path = Path(args.path)
    ws = _valid_workspace(path)
    _start_query_workers()
    wh = _warehouse_with_data(path)
    snapshot = wh.current()
    if args.snapshot:
        snapshot = next((s for s in wh.snapshots() if s.id == args.snapshot), None)
        if snapshot is None:
            return _fail(args, f"no kept snapshot {args.snapshot!r}; kept: {', '.join(s.id for s in wh.snapshots()) or 'none'}")
    tables = wh.tables(snapshot)
    dashboard = ws.get("dashboard") or {}
    chosen = parse_filters(dashboard, filter_states(dashboard, tables, snapshot.id if snapshot else "none"), args.filter or [])
    found = compare(ws.data, wh, snapshot, chosen, workspace_path=path, top=args.top)  # a QueryError is printed as one line
    if args.json:
        _print_json({"ok": True, **found.to_dict()})
    else:
        print(found.text())
    return 0


def _reader_gone() -> int:
    """The reader of our output went away (`... | head`): stop quietly, as Unix tools do, with their status (128 + SIGPIPE)."""
    # Python would flush stdout again at exit and print a second BrokenPipeError: point it at /dev/null first.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _fail(args, message: str) -> int:
    if getattr(args, "json", False):
        _print_json({"ok": False, "error": message})
    else:
        print(f"error: {message}", file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    from ..memory import schemas  # the connector types for `source add`: read from the schema, without jsonschema

    parser = argparse.ArgumentParser(prog=PROG, description="Workspace memory tools: validate, create, review and publish workspaces.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate a workspace, or every workspace below a folder")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="machine-readable output for CI")
    p.add_argument(
        "--strict", action="store_true", help="fail when the data checks could not run (check.data_not_run is then an error); also DASHMEM_VALIDATE_STRICT=true"
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("check", help="run the dashboard and report checks (loads the data first if needed)")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("autodraft", help="write a first dashboard (or report) from the data profile, without a model")
    p.add_argument("path")
    p.add_argument("--draft", choices=["dashboard", "report", "both"], default="dashboard", help="what to draft: dashboard.yaml (default), report.yaml or both")
    p.add_argument("--table", action="append", metavar="NAME", help="draft from this table (repeat for several; default: the main table)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--add", action="store_true", help="add to the existing dashboard.yaml (report.yaml), keeping all it has")
    how.add_argument("--force", action="store_true", help="replace an existing dashboard.yaml (report.yaml) it drafts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_autodraft)

    p = sub.add_parser("compose", help="print exactly what a chat session sends the model (no API key needed)")
    p.add_argument("path")
    p.add_argument("--message", required=True)
    p.add_argument("--mode", choices=["edit", "query"], default="edit")
    p.set_defaults(func=cmd_compose)

    p = sub.add_parser(
        "export",
        help="write the dashboard as a standalone offline HTML file, chart PNGs and/or one PNG picture, or the report (report.yaml) as PDF and/or HTML",
        description="Exports read the newest snapshot (refresh loads data; it renders nothing). --pdf and --param export the report; "
        "--html exports the dashboard, or the report with --report or when the workspace has no dashboard.",
    )
    p.add_argument("path")
    p.add_argument("--html", metavar="FILE", help="the HTML file to write")
    p.add_argument("--png", metavar="FOLDER", help="a folder for one PNG per chart of the dashboard")
    p.add_argument("--picture", metavar="FILE", help="the whole dashboard as one PNG picture (drawn by headless Chromium)")
    p.add_argument("--pdf", metavar="FILE", help="the report as a PDF (A4, printed by headless Chromium)")
    p.add_argument("--report", action="store_true", help="export report.yaml, not dashboard.yaml (implied by --pdf and --param)")
    p.add_argument(
        "--as", dest="as_user", metavar="USER", help="export what this user of the users file sees: their row filters apply (default: the operator, every row)"
    )
    p.add_argument(
        "--param", action="append", metavar="ID=VALUE", help="a report parameter's value; repeat for several values of a multiselect; LOW..HIGH for a range"
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("new", help="create a workspace that validates")
    p.add_argument("path", help="folder of the new workspace; its name is the workspace's slug")
    p.add_argument("--template", help="template workspace (a name in the templates folder, or a path)")
    p.add_argument("--name", help="display name")
    p.add_argument("--owner", default="owner", help="user name of the first owner")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("history", help="versions of a workspace, newest first")
    p.add_argument("path")
    p.add_argument("--ref", help="branch or commit (default: the checked-out branch)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("diff", help="per-file diff of a workspace between two versions")
    p.add_argument("path")
    p.add_argument("a", help="older version (commit, branch or tag)")
    p.add_argument("b", nargs="?", default="HEAD", help="newer version (default HEAD)")
    p.add_argument("--file", help="only this file, e.g. task.yaml")
    p.add_argument("--semantic", action="store_true", help="what the changes mean (rules reworded, access granted, ...) before the per-file diff")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("revert", help="restore a workspace to a version as a new commit")
    p.add_argument("path")
    p.add_argument("version")
    p.add_argument("--author", help="user name recorded as the author (default: git config)")
    p.set_defaults(func=cmd_revert)

    p = sub.add_parser("publish", help="merge a draft branch into main (refuses on conflicts)")
    p.add_argument("path")
    p.add_argument("--as", dest="as_user", required=True, help="your user name; checked against the workspace's access list")
    p.add_argument("--branch", help="branch to publish (default: your own draft)")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("access", help="who may own, steward and view a workspace; --add/--remove ROLE:NAME changes it (owners only)")
    p.add_argument("path")
    p.add_argument("--add", action="append", metavar="ROLE:NAME", help="give NAME (a user, group:NAME or *) the role owner, steward or viewer; repeatable")
    p.add_argument("--remove", action="append", metavar="ROLE:NAME", help="take NAME out of that role's list; repeatable; the last owner stays")
    p.add_argument("--as", dest="as_user", help="your user name: change (or list) your draft in the config repo, checked against its access lists")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_access)

    p = sub.add_parser("sync", help="pull the app's config repo from the remote app servers share (DASHMEM_CONFIG_REMOTE)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_sync)

    p = sub.add_parser("source", help="manage a workspace's sources")
    source_sub = p.add_subparsers(dest="source_command", required=True)
    p = source_sub.add_parser("add", help="add a source (validated; secrets only as env:NAME or secrets:KEY)")
    p.add_argument("path")
    p.add_argument("name", help="table name for the source (lower-case snake_case)")
    p.add_argument("--type", required=True, choices=schemas.enum("sources", "source", "type"))
    p.add_argument("--path", dest="path_option", help="CSV file (relative to the workspace folder)")
    p.add_argument("--url", help="SQLAlchemy URL (sql), endpoint (rest) or server URL (mcp)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="any other setting, value parsed as YAML; repeatable")
    p.add_argument("--yaml", help="settings as a YAML mapping, e.g. '{query: SELECT * FROM t, password: env:DB_PW}'")
    p.set_defaults(func=cmd_source_add)

    p = sub.add_parser(
        "refresh",
        help="reload every source; exits 1 if any failed or no longer fits",
        description="Refresh one workspace (PATH), or with --all every published workspace of a config repo, one at a "
        "time; a second --all on the same repo while one runs exits at once.",
    )
    p.add_argument("path", nargs="?", help="the workspace folder; with --all, the config repo (default: the app's, DASHMEM_CONFIG_REPO)")
    p.add_argument("--all", action="store_true", help="every published workspace of the config repo PATH; exits 1 if any failed")
    p.add_argument("--due", action="store_true", help="with --all: only workspaces whose `refresh: {every: ...}` schedule is due")
    p.add_argument("--full", action="store_true", help="load incremental sources whole, not only the rows past their cursor")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_refresh)

    p = sub.add_parser(
        "deliver",
        help="send a workspace's due subscriptions and its alerts that changed, over the data it has (no refresh)",
        description="Subscriptions and alerts are workspace.yaml's; the mail server is DASHMEM_SMTP_HOST's. A scheduled "
        "`refresh --all --due` does this for every workspace after it refreshes.",
    )
    p.add_argument("path", help="the workspace folder")
    p.add_argument("--now", action="store_true", help="send every subscription now, due or not (each still once per run)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_deliver)

    p = sub.add_parser("query", help="run one read-only SELECT in the sandbox")
    p.add_argument("path")
    p.add_argument("sql")
    p.add_argument("--max-rows", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--as", dest="as_user", metavar="USER", help="run as this user of the users file: their row filters apply (default: the operator, every row)"
    )
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("explain", help="where a component's figures come from: bound SQL, sources, data, rules, rows behind it")
    p.add_argument("path")
    p.add_argument("component", help="the component's id in dashboard.yaml")
    p.add_argument("--filter", action="append", metavar="ID=VALUE", help="a filter choice; repeat for several values of a multiselect; LOW..HIGH for a range")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("rows", help="the rows behind a component, or behind chosen marks of a chart (Show rows), with the SQL that read them")
    p.add_argument("path")
    p.add_argument("component", help="the component's id in dashboard.yaml")
    p.add_argument("--filter", action="append", metavar="ID=VALUE", help="a filter choice, as for explain")
    p.add_argument("--select", action="append", metavar="FIELD=VALUE", help="a mark of a chart with select, by its field's value; repeat for several")
    p.add_argument("--max-rows", type=int, default=200, help="rows printed at most (default 200, at most 5000); the count says how many match")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--as", dest="as_user", metavar="USER", help="run as this user of the users file: their row filters apply (default: the operator, every row)"
    )
    p.set_defaults(func=cmd_rows)

    p = sub.add_parser("changes", help="what changed since the previous load: each KPI then and now, the biggest moves per chart and table")
    p.add_argument("path")
    p.add_argument("--filter", action="append", metavar="ID=VALUE", help="a filter choice, as for explain")
    p.add_argument("--snapshot", metavar="ID", help="compare this kept snapshot with the one before it (default: the data served)")
    p.add_argument("--top", type=int, default=5, help="moves listed per component (default 5)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_changes)

    p = sub.add_parser("profile", help="print the model-facing data profile and its token count")
    p.add_argument("path")
    p.add_argument("--budget", type=int, help="token budget; detail is dropped to fit")
    p.add_argument("--write", action="store_true", help="also write profile.yaml")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("settings", help="print the table of DASHMEM_* settings, or write it into a README")
    p.add_argument("--readme", metavar="FILE", help="replace the settings table between its markers in FILE")
    p.set_defaults(func=cmd_settings)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:  # Ctrl-C: files are written atomically, so what was half-done is simply not there
        _fail(args, f"{args.command} interrupted")
        return 130
    except (DashmemError, FileExistsError) as exc:  # messages written for a person: printed as they are
        return _fail(args, str(exc))
    except Exception as exc:  # never a traceback for a person or a CI log; DASHMEM_DEBUG=1 shows it
        if settings.get("DASHMEM_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return _fail(args, f"{args.command} failed: {type(exc).__name__}{': ' + first if first else ''} (run again with DASHMEM_DEBUG=1 to see the details)")
