"""`python -m lib <command>`: the workspace tools for people and for CI.

PATH is a workspace folder (or, for `validate`, any folder holding
workspaces). The commands work on a plain checkout of a config repo as well as
on the app's own config repo. Exit status is 0 on success, 1 when validation
or the operation failed, 2 on usage errors.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Sequence

from . import workspace
from .diagnostics import ERROR, has_errors


def _print_json(payload) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))


def cmd_validate(args) -> int:
    root = Path(args.path)
    if not root.exists():
        return _fail(args, f"{root}: no such file or folder")
    found = workspace.find_workspaces(root)
    if not found:
        return _fail(args, f"{root}: no workspace found (a workspace is a folder with {workspace.FILES['workspace']})")
    results = {str(p): workspace.validate(p) for p in found}
    errors = sum(1 for ds in results.values() for d in ds if d.level == ERROR)
    if args.json:
        _print_json({
            "ok": errors == 0,
            "errors": errors,
            "workspaces": [{"path": p, "ok": not has_errors(ds), "diagnostics": [d.to_dict() for d in ds]} for p, ds in results.items()],
        })
    else:
        for p, ds in results.items():
            print(f"{'FAIL' if has_errors(ds) else 'ok  '} {p}")
            for d in ds:
                print(f"  {d.format()}")
        print(f"{len(results)} workspace(s), {errors} error(s)")
    return 1 if errors else 0


def cmd_new(args) -> int:
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
            from .settings import templates_dir

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
    from . import configrepo

    repo, folder = configrepo.find_repo(Path(args.path))
    ref = args.ref or repo.active_branch.name
    versions = configrepo.history(repo, folder, ref, args.limit)
    if args.json:
        _print_json([{**v.__dict__, "short": v.short} for v in versions])
        return 0
    for v in versions:
        print(f"{v.short}  {v.date[:19]}  {v.author:<16} {v.message}")
    return 0


def cmd_diff(args) -> int:
    from . import configrepo

    repo, folder = configrepo.find_repo(Path(args.path))
    diffs = configrepo.diff(repo, folder, args.a, args.b)
    if args.file:
        diffs = [d for d in diffs if d.path == args.file]
    if args.json:
        _print_json([d.__dict__ for d in diffs])
        return 0
    for d in diffs:
        sys.stdout.write(d.patch if d.patch.endswith("\n") or not d.patch else d.patch + "\n")
    if not diffs:
        print("no differences")
    return 0


def cmd_revert(args) -> int:
    import git

    from . import configrepo

    repo, folder = configrepo.find_repo(Path(args.path))
    author = git.Actor.committer(repo.config_reader()) if not args.author else git.Actor(args.author, f"{args.author}@users.dashmem.invalid")
    if not author.name:
        author = git.Actor("dashmem-cli", "dashmem-cli@localhost")
    sha = configrepo.restore(repo, folder, args.version, author)
    print(f"reverted {folder} to {args.version} as {sha[:10]}" if sha else f"{folder} already equals {args.version}; nothing to commit")
    return 0


def cmd_publish(args) -> int:
    from . import configrepo
    from .access import User

    repo, folder = configrepo.find_repo(Path(args.path))
    cr = configrepo.ConfigRepo(repo.working_tree_dir)
    user = User(args.as_user)
    branch = args.branch or cr.branch_name(user, Path(folder).name)
    sha = cr.publish_branch(user, Path(folder).name, branch)
    print(f"published {branch} to {configrepo.MAIN} as {sha[:10]}")
    return 0


def _fail(args, message: str) -> int:
    if getattr(args, "json", False):
        _print_json({"ok": False, "error": message})
    else:
        print(f"error: {message}", file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lib", description="Workspace memory tools: validate, create, review and publish workspaces.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate a workspace, or every workspace below a folder")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="machine-readable output for CI")
    p.set_defaults(func=cmd_validate)

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .access import PermissionDenied
    from .configrepo import ConfigRepoError
    from .diagnostics import ValidationFailed
    from .workspace import InvalidName

    try:
        return args.func(args)
    except (ConfigRepoError, PermissionDenied, ValidationFailed, InvalidName, FileExistsError) as exc:
        return _fail(args, str(exc))
