"""Proposals: drafts their stewards asked an owner to review, seen by every process of the config repo.

A steward who may not publish proposes their draft; without a remote to push it to, that mark is all an
owner gets, so it must outlive the session and reach every app process: one small file per proposed draft in
the repo's git folder (`dashmem-proposed/<user>/<slug>`, written whole with an atomic rename), read without a
git process, as the sidebar counts them on every page run. Publishing or rejecting the draft removes it; a
mark whose draft branch is gone (renamed by a reject elsewhere) is not counted.

`cr` is `lib.repo.configrepo.ConfigRepo`, seen from below (`branches.ConfigRepo`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from ..core.fsutil import atomic_write
from .branches import ConfigRepo, parse_draft

FOLDER = "dashmem-proposed"  # in the git folder, beside dashmem's locks


def _file(cr: ConfigRepo, branch: str) -> Path | None:
    parsed = parse_draft(branch)
    return cr._git_dir / FOLDER / parsed[0] / parsed[1] if parsed else None


def mark(cr: ConfigRepo, branch: str, head: str, by: str) -> None:
    """Mark the draft `branch` (at commit `head`) as proposed by `by` for an owner's review."""
    where = _file(cr, branch)
    if where is None:
        raise ValueError(f"{branch!r} is not a draft branch")
    where.parent.mkdir(parents=True, exist_ok=True)
    at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    atomic_write(where, json.dumps({"branch": branch, "head": head, "by": by, "at": at}) + "\n")


def clear(cr: ConfigRepo, branch: str) -> None:
    """The draft was published or rejected: it no longer waits."""
    where = _file(cr, branch)
    if where is not None:
        where.unlink(missing_ok=True)


def proposed(cr: ConfigRepo, branch: str) -> dict | None:
    """When and at which commit `branch` was proposed ({"branch", "head", "by", "at"}), or None."""
    where = _file(cr, branch)
    if where is None:
        return None
    try:
        found = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, or not ours: a mark is written whole, so a torn one is not
        return None
    return found if isinstance(found, dict) and cr.has_branch(branch) else None


def waiting(cr: ConfigRepo, slug: str | None = None) -> list[str]:
    """The proposed draft branches (of workspace `slug`, if given) that still exist, sorted."""
    root = cr._git_dir / FOLDER
    try:
        users = os.listdir(root)
    except FileNotFoundError:
        return []
    found = []
    for user in users:
        try:
            slugs = os.listdir(root / user)
        except (NotADirectoryError, FileNotFoundError):
            continue
        for of in slugs:
            branch = f"draft/{user}/{of}"
            if (slug is None or of == slug) and not of.startswith(".") and cr.has_branch(branch):
                found.append(branch)
    return sorted(found)
