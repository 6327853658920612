"""The memory kinds, one module each, in the order files are shown, loaded and composed.

Each module (task.py, sources.py, ...) holds everything about its kind: the file and its schema,
the semantic checks, the semantic diff and the Review group its changes go in, and what the model
sees of it. The code that does one thing to every kind (lib/memory/workspace.py loading,
lib/memory/semantic_diff.py for Review, lib/chat/compose.py for the prompt) reads `KINDS`.
Adding a kind or a field touches that kind's module and its schema (docs/contributing.md).
"""

from __future__ import annotations

from . import dashboard, output, profile, report, sources, task, workspace
from .base import Check, Diff, Kind

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        workspace.KIND,
        task.KIND,
        sources.KIND,
        output.KIND,
        profile.KIND,
        dashboard.KIND,
        report.KIND,
    )
}

__all__ = ["KINDS", "Check", "Diff", "Kind"]
