"""The task of the ablation study: a formatting specification per dataset, the two messages, and completion.

The specification is what the study tests memory with. No task prompt
implies it, so a session can honour it only if something carried it from
the first session to the second: a background colour for the whole dashboard
and a threshold colour on a measure taken from the data's profile. Each item
is also a checkable task rule (`background_color`, `threshold_color` in
schemas/task.schema.json), so lib.artifacts.checks verifies it like any other rule.

Completion of a session is decided by lib.artifacts.checks alone: every check passes on
the dashboard over the session's data, and neither specification rule is
named by any check result (an error, or the warning that the rule applies to
no component). The two are reported apart, so a valid dashboard that ignores
the specification is told from one that does not work. The dashboard is
judged as a reader would see it in its condition: where the condition keeps
output.yaml, its theme supplies the background as it does at render time;
elsewhere the dashboard must set the background itself. The rules are checked in every condition, including those
whose prompt never showed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from lib.artifacts import autodraft, checks
from lib.core.diagnostics import ERROR, Diagnostic
from lib.memory import workspace

PHASE2_MESSAGE = "Regenerate the dashboard with this updated data."
# Opens the Phase 1 message only: conversation, not knowledge, so selective memory drops it and a replayed
# transcript keeps it. Tests look for it to tell the two apart.
TRANSCRIPT_MARKER = "This is our first look at"

# Colours no data file, base prompt or tool description contains, so their presence in a prompt means the
# specification (or a dashboard that applied it) reached the model.
BACKGROUND = "#fdf6e3"
THRESHOLD_COLOR = "#1a9850"
BACKGROUND_RULE = "background-colour"
THRESHOLD_RULE = "threshold-colour"
RULE_AUTHOR = "bench"
RULE_DATE = "2026-11-30"

# output.yaml for judging a session whose condition keeps none: the data-injection contract and no theme, so
# nothing but the dashboard itself can supply the background.
BARE_OUTPUT = {"data_injection": {"mode": "queries_at_render"}}


@dataclass(frozen=True)
class FormattingSpec:
    """One dataset's specification: a background colour and one threshold colour rule."""

    dataset: str
    threshold_field: str
    threshold_value: int | float
    background: str = BACKGROUND
    threshold_op: str = ">="
    threshold_color: str = THRESHOLD_COLOR
    request: str | None = None  # Phase 1's task in the person's words (a task file's); None: the study's own
    phase2_message: str = PHASE2_MESSAGE

    @property
    def sentences(self) -> tuple[str, str]:
        """The specification as the person says it; also the rules' text, the summary's and the instructions file's."""
        return (
            f"Use the background colour {self.background} for the whole dashboard.",
            f"Show {self.threshold_field} at or above {self.threshold_value:,} in {self.threshold_color} wherever it appears (KPI cards and table columns).",
        )

    @property
    def colour_codes(self) -> dict[str, str]:
        """rule id -> the colour that rule requires."""
        return {BACKGROUND_RULE: self.background, THRESHOLD_RULE: self.threshold_color}

    def rules(self) -> list[dict[str, Any]]:
        """task.yaml rules with their machine checks."""
        background, threshold = self.sentences
        meta = {"tags": ["format", "colour"], "author": RULE_AUTHOR, "created": RULE_DATE}
        return [
            {"id": BACKGROUND_RULE, "text": background, **meta, "check": {"kind": "background_color", "color": self.background}},
            {
                "id": THRESHOLD_RULE,
                "text": threshold,
                **meta,
                "check": {
                    "kind": "threshold_color",
                    "field": self.threshold_field,
                    "op": self.threshold_op,
                    "value": self.threshold_value,
                    "color": self.threshold_color,
                },
            },
        ]


def spec_for(dataset: str, profile: Mapping[str, Any]) -> FormattingSpec:
    """The threshold goes on the measure a dashboard of this data leads with (lib.artifacts.autodraft's first pick), at its
    median rounded to two significant digits; a table without measures gets it on its record count, at half the
    rows."""
    table = autodraft.main_table(profile)
    if table is None:
        raise ValueError(f"{dataset}: no profiled table to take a threshold from")
    measures = autodraft.pick_measures(table)
    if measures:
        lead = measures[0]
        middle = (lead.get("quantiles") or {}).get("p50", lead.get("mean"))
        if middle is None:
            raise ValueError(f"{dataset}: {lead['name']} has neither a median nor a mean to take a threshold from")
        return FormattingSpec(dataset, lead["name"], _two_significant(middle))
    return FormattingSpec(dataset, "records", _two_significant(table["rows"] / 2))


def _two_significant(value: float) -> int | float:
    rounded = float(f"{value:.2g}")
    return int(rounded) if rounded.is_integer() else rounded


def phase1_message(spec: FormattingSpec) -> str:
    """The full prompt of Phase 1: the task (the study's, or a task file's `request`), then the specification."""
    request = spec.request or (
        "Build a dashboard of its main figures: the key totals, a trend where there is a date, breakdowns by the main categories and a detail table."
    )
    return f"{TRANSCRIPT_MARKER} {spec.dataset}. {request} " + " ".join(spec.sentences)


@dataclass(frozen=True)
class Completion:
    checks_pass: bool  # no check reports an error, apart from the specification rules' own
    honoured: dict[str, bool]  # specification rule id -> checked, and no check result names it
    diagnostics: tuple[Diagnostic, ...]

    @property
    def completed(self) -> bool:
        return self.checks_pass and all(self.honoured.values())


def completion(
    dashboard: Mapping[str, Any], spec: FormattingSpec, tables: Mapping[str, Any], version: str, output: Mapping[str, Any] | None = None
) -> Completion:
    """Run every lib.artifacts.checks check on `dashboard` over `tables`, with the specification as checkable task rules.

    `output` is the output.yaml the session's condition kept, if any. The dashboard is judged as it renders
    there: a theme in output.yaml colours the background of a dashboard that sets none (lib.memory.kinds.output.theme_for),
    and the checks fall back to it in the same way; without output.yaml the dashboard must carry the background.
    """
    ws = workspace.Workspace(
        path=Path("evaluation"), data={"task": {"rules": spec.rules()}, "output": dict(output or BARE_OUTPUT), "dashboard": dict(dashboard)}
    )
    diagnostics = checks.run(ws, tables, version)

    def names_rule(d: Diagnostic, rule: str) -> bool:
        return f"'{rule}'" in d.message

    # A spec that fails its schema is not checked further, so its rules count as not honoured rather than as unnamed.
    rules_checked = not any(d.id == "check.schema" and d.level == ERROR for d in diagnostics)
    honoured = {rule: rules_checked and not any(names_rule(d, rule) for d in diagnostics) for rule in spec.colour_codes}
    # Kept apart from the rules, so a valid dashboard that ignores the specification shows as exactly that.
    other_errors = [d for d in diagnostics if d.level == ERROR and not any(names_rule(d, r) for r in spec.colour_codes)]
    return Completion(not other_errors, honoured, tuple(diagnostics))
