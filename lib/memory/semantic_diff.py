"""What a change to a workspace means, before the YAML lines that make it.

`changes(old, new)` takes two parsed versions of one workspace (memory kind -> data, as
`Workspace.data` holds them; a kind that is absent is an empty file) and returns `Change`
records: a task rule reworded, a component that now runs other SQL, a viewer added. Each memory
kind's module (lib/memory/kinds/) has the small function that builds its own, so each can be read
and tested alone; Review and `python -m lib diff --semantic` show their `describe()` above the
per-file diff, grouped by `CATEGORIES`.

Pure: no git, no files, no Streamlit. The profile is summarised by shape only (tables and
columns added, removed or retyped): its figures change on every refresh and say nothing a
reviewer decides on. Secret fields hold references (`env:NAME`), which are shown; anything
else in a secret field is never repeated.
"""

from __future__ import annotations

from typing import Any

from .changes import ATTENTION, FILE, INFO, Category, Change, unreadable
from .kinds import KINDS

# The groups in the order a reviewer reads them (each Category's rank): a file left out of the summary,
# then who may do what, the figures' shape last.
CATEGORIES: tuple[Category, ...] = tuple(sorted((FILE, *(kind.review for kind in KINDS.values())), key=lambda c: c.rank))

__all__ = ["ATTENTION", "CATEGORIES", "INFO", "Category", "Change", "changes", "format_text", "unreadable"]


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every meaningful change from OLD to NEW (memory kind -> parsed data), access first."""
    out: list[Change] = []
    for name, kind in KINDS.items():
        out += kind.diff(old.get(name), new.get(name))
    order = [c.name for c in CATEGORIES]
    return sorted(out, key=lambda c: order.index(c.category))  # stable: within a category, the diff's order


def format_text(found: list[Change]) -> str:
    """The changes grouped by category, for the command line; attention items marked with `!`."""
    if not found:
        return "no changes in meaning"
    lines: list[str] = []
    for category in CATEGORIES:
        group = [c for c in found if c.category == category.name]
        if group:
            lines.append(f"{category.title}:")
            lines += [f"  {'!' if c.severity == ATTENTION else '-'} {c.describe()}" for c in group]
    return "\n".join(lines)
