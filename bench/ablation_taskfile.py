"""A task file: the ablation's specification and messages for a CSV of the user's own.

    # plant.task.yaml, given as `--datasets plant.task.yaml`
    dataset: plant_output.csv      # the CSV, relative to this file
    request: Build a dashboard of the plant's output per line and week.   # Phase 1's task (optional)
    background: "#fdf6e3"          # the dashboard's background colour (optional)
    threshold:                     # values meeting it shown in a colour (optional; else from the profile)
      field: output_mwh
      op: ">="
      value: 120
      color: "#1a9850"
    phase2: Regenerate the dashboard with this week's output.   # Phase 2's only message (optional)

What it leaves out keeps the study's own (bench/ablation_task.py). Each
problem is reported with the file, its line, the field and what is allowed,
and the study runs only when the file has none.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lib.core.diagnostics import ERROR, Diagnostic
from lib.memory import yamlio

from .ablation_task import FormattingSpec

SUFFIXES = (".yaml", ".yml")
KEYS = ("dataset", "request", "background", "threshold", "phase2")
THRESHOLD_KEYS = ("field", "op", "value", "color")
OPS = (">=", ">", "<=", "<", "==")
COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
RECORDS = "records"  # the threshold on a KPI of the row count, as the study's own specification may put it


@dataclass(frozen=True)
class TaskFile:
    path: Path
    csv: Path
    values: dict[str, Any]  # the fields given, checked

    def applied(self, spec: FormattingSpec) -> FormattingSpec:
        """The study's specification for this dataset with what the file says in place of its own."""
        changes: dict[str, Any] = {}
        if "request" in self.values:
            changes["request"] = self.values["request"]
        if "background" in self.values:
            changes["background"] = self.values["background"]
        if "phase2" in self.values:
            changes["phase2_message"] = self.values["phase2"]
        threshold = self.values.get("threshold") or {}
        for key, name in (("field", "threshold_field"), ("op", "threshold_op"), ("value", "threshold_value"), ("color", "threshold_color")):
            if key in threshold:
                changes[name] = threshold[key]
        return dataclasses.replace(spec, **changes)


class TaskFileError(ValueError):
    def __init__(self, problems: list[Diagnostic]):
        self.problems = problems
        super().__init__("\n".join(d.format() for d in problems))


def is_task_file(name: str) -> bool:
    return Path(name).suffix.lower() in SUFFIXES


def load(path: Path) -> TaskFile:
    """The task file at `path`, checked; TaskFileError lists every problem, each at its line."""
    name = str(path)
    try:
        doc = yamlio.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError([Diagnostic("task-file.unreadable", ERROR, f"cannot read it ({exc.__class__.__name__})", name, None, None)]) from None
    except yamlio.YamlSyntaxError as exc:
        raise TaskFileError([Diagnostic("task-file.yaml", ERROR, str(exc), name, None, None)]) from None
    problems: list[Diagnostic] = []

    def problem(at: tuple, message: str, allowed: str | None = None, *, key: bool = False) -> None:
        problems.append(Diagnostic("task-file.field", ERROR, message, name, doc.line_of(at, key=key), ".".join(map(str, at)) or None, allowed))

    data = doc.data
    if not isinstance(data, dict):
        problem((), "a task file is a mapping of fields", ", ".join(KEYS))
        raise TaskFileError(problems)
    for key in data:
        if key not in KEYS:
            problem((key,), f"unknown field {key!r}", ", ".join(KEYS), key=True)
    values: dict[str, Any] = {}
    for key in ("request", "phase2"):
        if key in data:
            if isinstance(data[key], str) and data[key].strip():
                values[key] = data[key].strip()
            else:
                problem((key,), "must be a sentence", "text")
    if "background" in data:
        if isinstance(data["background"], str) and COLOR.match(data["background"]):
            values["background"] = data["background"]
        else:
            problem(("background",), f"{data['background']!r} is not a colour", "#rrggbb")
    csv_file = None
    if "dataset" not in data:
        problem((), "names no dataset", "dataset: a CSV file, relative to the task file")
    elif not isinstance(data["dataset"], str) or not data["dataset"].lower().endswith(".csv"):
        problem(("dataset",), f"{data['dataset']!r} is not a CSV file's name", "a .csv file, relative to the task file")
    else:
        csv_file = (path.parent / data["dataset"]).resolve()
        if not csv_file.is_file():
            problem(("dataset",), f"there is no file {csv_file}", "a .csv file, relative to the task file")
            csv_file = None
    if "threshold" in data:
        values["threshold"] = _threshold(data["threshold"], csv_file, problem)
    if problems:
        raise TaskFileError(problems)
    assert csv_file is not None
    return TaskFile(path.resolve(), csv_file, values)


def _threshold(given: Any, csv_file: Path | None, problem) -> dict[str, Any]:
    """The threshold's fields that are right; each wrong one is reported through `problem` (and the load then fails)."""
    at = ("threshold",)
    if not isinstance(given, dict):
        problem(at, "must be a mapping", "field, op, value, color")
        return {}
    out: dict[str, Any] = {}
    for key in given:
        if key not in THRESHOLD_KEYS:
            problem((*at, key), f"unknown field {key!r}", ", ".join(THRESHOLD_KEYS), key=True)
    field = given.get("field")
    if field is not None:
        columns = _columns(csv_file) if csv_file is not None else None
        if not isinstance(field, str) or not field:
            problem((*at, "field"), "must name a column", "a column of the CSV")
        elif csv_file is not None and columns is not None and field != RECORDS and field not in columns:
            problem((*at, "field"), f"{field!r} is not a column of {csv_file.name}", ", ".join([*columns, RECORDS]))
        else:
            out["field"] = field
    if "op" in given:
        if given["op"] in OPS:
            out["op"] = given["op"]
        else:
            problem((*at, "op"), f"{given['op']!r} is not a comparison", " ".join(OPS))
    if "value" in given:
        value = given["value"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out["value"] = value
        else:
            problem((*at, "value"), f"{value!r} is not a number", "a number")
    if "color" in given:
        if isinstance(given["color"], str) and COLOR.match(given["color"]):
            out["color"] = given["color"]
        else:
            problem((*at, "color"), f"{given['color']!r} is not a colour", "#rrggbb")
    if "field" not in given and ("op" in given or "value" in given):
        problem(at, "a threshold with its own comparison names its field too", "field")
    return out


def _columns(csv_file: Path) -> list[str] | None:
    """The CSV's header, or None where it cannot be read (the load reports that)."""
    try:
        with csv_file.open(newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
