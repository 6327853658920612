"""A steward's draft and its data: adding a source loads and profiles it in one step, and the profile is updated.

Adding a source used to save it and stop: its table was not in the draft's data and the profile did not
describe it until the steward went to the Dashboard, showed the draft, refreshed, came back to Sources and
updated the profile. `add_source` does all of it: it saves the source to the draft, loads its data into the
draft's snapshot beside the tables loaded already (the whole draft on its first load), profiles it, looks for
join candidates with the other tables, and saves profile.yaml to the draft, saying each step to `progress`.
A source that cannot be loaded stays saved, and the result says what failed and what to check; profile.yaml
is written only whole, in one commit, once everything it describes was profiled.

`update_profile` (Sources' "Update the profile from the current data") loads every source of the draft as it
is now and profiles them all, through the same profiling and saving steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from ..core.diagnostics import ValidationFailed
from ..core.errors import DashmemError
from ..data import profile, refresh
from ..data.connectors import FILE_TYPES
from ..data.refresh import Progress, SourceReport
from ..data.snapshots import Warehouse
from ..memory import workspace
from ..memory.relationships import split
from ..roles.access import User

if TYPE_CHECKING:
    from ..repo.configrepo import ConfigRepo


@dataclass
class DraftData:
    """What adding a source (or updating the profile) did to the steward's draft."""

    names: list[str]  # the tables it was about: the source added, or every source
    saved: str | None = None  # the commit that saved the source added (None: nothing to save, or updating the profile)
    reports: list[SourceReport] = field(default_factory=list)  # how loading each went
    profile: dict[str, Any] | None = None  # the profile saved to the draft; None when it was not saved
    problem: str = ""  # what failed and what to do, for a person; empty when everything was done

    @property
    def ok(self) -> bool:
        return not self.problem and self.profile is not None

    @property
    def relationships(self) -> list[dict[str, Any]]:
        """The join candidates of the saved profile that name one of the tables `names`."""
        return [r for r in (self.profile or {}).get("relationships") or [] if {split(r["left"])[0], split(r["right"])[0]} & set(self.names)]

    def headline(self) -> str:
        """One sentence (markdown) for the steward: what was done, or what failed and what to do."""
        if self.problem:
            return self.problem
        if len(self.names) != 1 or self.saved is None:
            return "Profile saved to your draft."
        rows = next((r.rows_after for r in self.reports if r.name == self.names[0] and r.rows_after is not None), None)
        found = [f"{r['left']} → {r['right']}" for r in self.relationships]
        joins = f"; {len(found)} join candidate{'s' if len(found) != 1 else ''} ({', '.join(found)})" if found else "; no join candidates with the other tables"
        loaded = f"{rows:,} row{'s' if rows != 1 else ''} loaded and profiled" if rows is not None else "loaded and profiled"
        return f"Added **{self.names[0]}** to your draft: {loaded}{joins}. Its profile is below."


def add_source(cr: ConfigRepo, user: User, slug: str, source: dict[str, Any], *, progress: Progress | None = None) -> DraftData:
    """Save `source` to the user's draft of `slug`, load its data into the draft's snapshot, profile it and
    save the profile (see the module docstring). Raises what refuses the save (ValidationFailed, a name
    taken, the role); a source that cannot be loaded or profiled is saved all the same, and the result's
    `problem` says why, with profile.yaml left as it was."""
    progress = progress or (lambda fraction, message: None)
    path = cr.draft(user, slug).workspace_path
    base = cr.draft_head(user, slug)
    ws, _ = workspace.load(path)
    doc = dict(ws.get("sources") or {"sources": []})
    listed = list(doc.get("sources") or [])
    name = source.get("name") or ""
    if any(s.get("name") == name for s in listed):
        raise DashmemError(f"A source named {name!r} exists already; give the new one another table name.")
    doc["sources"] = [*listed, source]
    sha = cr.save(user, slug, {"sources": doc}, f"Add source {name}", base=base)
    progress(0.1, f"Saved {name} to your draft")
    done = DraftData([name], saved=sha)

    wh = Warehouse.for_workspace(path)

    def steps(fraction: float, message: str) -> None:
        progress(0.1 + 0.45 * fraction, message)

    if wh.current() is None:  # the draft's first load: all of its sources, as the first page showing it would
        report = refresh.refresh(path, wh, user=user, progress=steps)
        done.reports = [r for r in report.sources if r.name == name]
        stored = report.write_error
    else:
        fetched, done.reports = refresh.fetch_candidate(path, [name], progress=steps)
        stored = ""
        if fetched:
            try:
                refresh.add_to_served(wh, doc["sources"], fetched)
            except OSError as exc:
                stored = f"could not store the data ({exc.strerror or exc})"
    failed = next((r for r in done.reports if r.status != "ok"), None)
    if failed is not None or stored or not done.reports:
        why = failed.message.removeprefix(f"source {name!r}: ") if failed is not None else stored or "nothing was loaded"
        done.problem = (
            f"Added **{name}** to your draft, but could not load its data: {why}. Check {_what_to_check(source)}, "
            "then click Update the profile from the current data."
        )
        progress(1.0, "Could not load the data")
        return done
    current = wh.current()
    tables = wh.tables(current) if current else {}
    # The tables the profile does not describe yet are profiled with it, so candidates with them are found too.
    described = {t["name"] for t in (ws.get("profile") or {}).get("tables") or []}
    names = [name, *sorted(n for n in tables if n != name and n not in described)]
    return _profile_and_save(cr, user, slug, path, tables, names, done, progress, f"Profile {name}", f"Added **{name}** to your draft and loaded its data")


def update_profile(cr: ConfigRepo, user: User, slug: str, *, progress: Progress | None = None) -> DraftData:
    """Load every source of the user's draft of `slug` as it is now (the new shape, where it no longer fits
    the recorded one: describing it is what a new profile is for), profile them all and save profile.yaml
    to the draft. Nothing is saved when a source cannot be loaded: `problem` names each."""
    progress = progress or (lambda fraction, message: None)
    path = cr.draft(user, slug).workspace_path
    tables, reports = refresh.fetch_candidate(path, progress=lambda fraction, message: progress(0.5 * fraction, message))
    done = DraftData(sorted(tables), reports=reports)
    failed = [r for r in reports if r.status == "failed"]
    if failed:
        done.problem = "\n\n".join(r.message for r in failed)
        progress(1.0, "Could not load the data")
        return done
    return _profile_and_save(cr, user, slug, path, tables, done.names, done, progress, "Update the data profile", "Loaded the data")


def _profile_and_save(
    cr: ConfigRepo,
    user: User,
    slug: str,
    path: Path,
    tables: Mapping[str, pa.Table],
    names: list[str],
    done: DraftData,
    progress: Progress,
    message: str,
    lead: str,
) -> DraftData:
    """Profile the tables `names`, keep the other tables' entries of the draft's profile.yaml as they are,
    find the join candidates among all `tables`, and save the profile to the draft in one commit (`message`).
    `lead` begins the sentence saying what failed, if anything does: what was done before it."""
    ws, _ = workspace.load(path)
    sources_doc = ws.get("sources") or {}
    sources = [s for s in sources_doc.get("sources") or [] if isinstance(s, dict) and s.get("name")]
    progress(0.6, f"Profiling {', '.join(names)}…")
    try:
        fresh = profile.profile_tables(tables, names, sources, path)  # a live source is profiled in its database, which may fail
    except DashmemError as exc:
        done.problem = (
            f"{lead}, but could not profile it: {exc.user_message}. Your profile was not changed; "
            "check the source's settings, then click Update the profile from the current data."
        )
        progress(1.0, "Could not profile the data")
        return done
    kept = [t for t in (ws.get("profile") or {}).get("tables") or [] if t["name"] not in names and t["name"] in {s["name"] for s in sources}]
    progress(0.8, "Looking for join candidates…")
    new = profile.assemble(tables, [*kept, *fresh], sources_doc)
    progress(0.9, "Saving the profile to your draft…")
    try:
        cr.save(user, slug, {"profile": new}, message)
    except ValidationFailed as exc:
        done.problem = f"{lead}, but the profile does not validate, so it was not saved: {exc.user_message}"
        progress(1.0, "Could not save the profile")
        return done
    done.profile = new
    progress(1.0, "Profile saved to your draft")
    return done


def _what_to_check(source: Mapping[str, Any]) -> str:
    """What a steward checks when a source of this type could not be loaded."""
    kind = source.get("type")
    if kind in FILE_TYPES:
        return "the file (upload it again, or check its path)"
    if kind == "mcp":
        return "its command, tool and credentials"
    return "its URL, credentials and settings above"
