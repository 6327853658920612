"""One shape for every problem the product reports.

Schema errors, YAML syntax errors, dashboard checks and refresh problems are all
`Diagnostic`s: an id a machine can match on, a level, a message a person can
act on, and a location (file, line, field). The CLI prints them as
`file:line: field: message`, `--json` emits `to_dict()`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from .errors import DashmemError

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    id: str
    level: str
    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None
    allowed: str | None = None

    @property
    def location(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or ""

    def format(self) -> str:
        parts = [p for p in (self.location, self.field) if p]
        head = ": ".join(parts)
        text = f"{self.level}: {self.message}"
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        return f"{head}: {text}" if head else text

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.level == ERROR for d in diagnostics)


def format_path(path: Iterable[Any]) -> str:
    """("rules", 2, "text") -> "rules[2].text"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class ValidationFailed(DashmemError, ValueError):
    """Raised by writers when content does not validate; nothing was written."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = [d for d in diagnostics if d.level == ERROR]
        lines = "\n".join(d.format() for d in self.diagnostics[:20])
        super().__init__(f"{len(self.diagnostics)} validation error(s), nothing was written:\n{lines}")
