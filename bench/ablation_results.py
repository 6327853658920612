"""The ablation study's results: what each session and refresh measured, and the tables that show it.

The same three tables are printed (bench.common.print_table) and written as
Markdown; the CSV holds one row per Phase 2 session, the raw material for any
other analysis. When the model was scripted, the first lines and every
caption say so.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ablation_conditions import CONDITIONS, REFERENCE, Phase1
from .ablation_task import BACKGROUND_RULE, PHASE2_MESSAGE, THRESHOLD_RULE, Completion, FormattingSpec
from .common import print_table
from .mcnemar import discordant, mcnemar_exact

SCRIPTED_LABEL = "scripted model (bench/scripted_analyst.py)"
SCRIPTED_NOTICE = (
    "SCRIPTED MODEL, NOT CLAUDE: no API key was used, so every session below was played by a "
    "deterministic scripted stand-in (bench/scripted_analyst.py). The numbers show the mechanism "
    "(what each condition puts in the prompt and what the checks make of the result), not how "
    "Claude behaves."
)


@dataclass
class Cell:
    """One Phase 2 session: a dataset, a run, a condition."""

    dataset: str
    run: int
    condition: str
    dashboard: dict[str, Any] | None  # the session's draft, whether or not it passes
    completion: Completion | None  # None when the session wrote no dashboard
    usage: dict[str, int]
    seconds: float
    stopped_reason: str
    error: str | None
    prompt: dict[str, Any] | None  # the first request the model was sent

    @property
    def completed(self) -> bool:
        return self.completion is not None and self.completion.completed


@dataclass
class RefreshMeasure:
    switched: bool
    seconds: float
    model_calls: int  # as lib.data.refresh reports them
    clients_made: int  # model clients constructed during the refresh, counted from outside
    client_calls: int  # model calls made during the refresh, counted from outside


@dataclass
class DatasetResult:
    dataset: str
    rows: int
    columns: int
    perturbed: list[str]
    spec: FormattingSpec
    phase1: list[Phase1]
    refresh: RefreshMeasure


@dataclass
class Study:
    model: str
    scripted: bool
    runs: int
    datasets: list[DatasetResult] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)


# --------------------------------------------------------------------------- tables


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def outcomes(study: Study, condition: str) -> list[bool]:
    """Completion per (dataset, run), in one fixed order, so two conditions' lists pair up."""
    cells = sorted((c for c in study.cells if c.condition == condition), key=lambda c: (c.dataset, c.run))
    return [c.completed for c in cells]


def condition_rows(study: Study) -> tuple[list[str], list[list[str]]]:
    headers = [
        "condition",
        "prompt carries",
        "cells",
        "completed",
        "rate",
        "input tok",
        "output tok",
        "cache read",
        "cache write",
        "calls",
        "wall s",
        "b/c vs selective",
        "McNemar p",
    ]
    reference = outcomes(study, REFERENCE)
    rows = []
    for condition in CONDITIONS:
        cells = [c for c in study.cells if c.condition == condition.name]
        done = outcomes(study, condition.name)
        if condition.name == REFERENCE:
            versus, p = "-", "-"
        else:
            b, c = discordant(reference, done)
            versus, p = f"{b}/{c}", f"{mcnemar_exact(b, c):.4f}"
        rows.append(
            [
                condition.name,
                condition.carries,
                str(len(cells)),
                str(sum(done)),
                f"{sum(done) / len(done):.0%}" if done else "-",
                f"{_mean(c.usage['input_tokens'] for c in cells):,.0f}",
                f"{_mean(c.usage['output_tokens'] for c in cells):,.0f}",
                f"{_mean(c.usage['cache_read_input_tokens'] for c in cells):,.0f}",
                f"{_mean(c.usage['cache_creation_input_tokens'] for c in cells):,.0f}",
                f"{_mean(c.usage['calls'] for c in cells):.1f}",
                f"{_mean(c.seconds for c in cells):.2f}",
                versus,
                p,
            ]
        )
    return headers, rows


def dataset_rows(study: Study) -> tuple[list[str], list[list[str]]]:
    headers = ["condition"] + [d.dataset for d in study.datasets]
    rows = []
    for condition in CONDITIONS:
        row = [condition.name]
        for d in study.datasets:
            cells = [c for c in study.cells if c.condition == condition.name and c.dataset == d.dataset]
            row.append(f"{sum(c.completed for c in cells)}/{len(cells)}")
        rows.append(row)
    return headers, rows


def setup_rows(study: Study) -> tuple[list[str], list[list[str]]]:
    headers = [
        "dataset",
        "rows x cols",
        "measures moved",
        "threshold rule",
        "Phase 1 completed",
        "refresh switched",
        "refresh s",
        "model calls",
        "clients made",
    ]
    rows = []
    for d in study.datasets:
        spec = d.spec
        rows.append(
            [
                d.dataset,
                f"{d.rows:,} x {d.columns}",
                str(len(d.perturbed)),
                f"{spec.threshold_field} {spec.threshold_op} {spec.threshold_value:,}",
                f"{sum(p.completed for p in d.phase1)}/{len(d.phase1)}",
                "yes" if d.refresh.switched else "NO",
                f"{d.refresh.seconds:.3f}",
                str(d.refresh.model_calls + d.refresh.client_calls),
                str(d.refresh.clients_made),
            ]
        )
    return headers, rows


def captions(study: Study) -> dict[str, str]:
    who = "SCRIPTED MODEL, not Claude" if study.scripted else f"model {study.model}"
    return {
        "conditions": (
            f"Phase 2 per condition ({who}), over {len(study.datasets)} dataset(s) x {study.runs} run(s). "
            "Completed: every lib.artifacts.checks check passes over V2 and both specification rules hold, as the "
            "dashboard renders in its condition. Tokens, calls and wall time are means per session; b/c "
            "counts cells only selective_memory completed / only this condition completed; exact "
            "two-sided McNemar p."
        ),
        "datasets": f"Completed Phase 2 cells per dataset ({who}).",
        "setup": (
            "Per dataset: the specification's threshold rule, Phase 1 on V1, and the zero-token refresh from V1 "
            "to V2 (lib.data.refresh; model calls and client constructions counted from outside)."
        ),
    }


def print_study(study: Study) -> None:
    caption = captions(study)
    for key, build in (("conditions", condition_rows), ("datasets", dataset_rows), ("setup", setup_rows)):
        print(f"\n{caption[key]}")
        print_table(*build(study))
    if study.scripted:
        print(f"\n{SCRIPTED_NOTICE}")


# --------------------------------------------------------------------------- files


def write_results(study: Study, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = "ablation-scripted" if study.scripted else f"ablation-{study.model}"
    markdown, table = out / f"{stem}.md", out / f"{stem}.csv"
    markdown.write_text(to_markdown(study), encoding="utf-8")
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "model",
                "dataset",
                "run",
                "condition",
                "completed",
                "checks_pass",
                "background_rule",
                "threshold_rule",
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
                "calls",
                "seconds",
                "stopped_reason",
                "error",
            ]
        )
        for c in study.cells:
            honoured = c.completion.honoured if c.completion else {}
            writer.writerow(
                [
                    study.model,
                    c.dataset,
                    c.run,
                    c.condition,
                    c.completed,
                    c.completion.checks_pass if c.completion else False,
                    honoured.get(BACKGROUND_RULE, False),
                    honoured.get(THRESHOLD_RULE, False),
                    c.usage["input_tokens"],
                    c.usage["output_tokens"],
                    c.usage["cache_read_input_tokens"],
                    c.usage["cache_creation_input_tokens"],
                    c.usage["calls"],
                    f"{c.seconds:.3f}",
                    c.stopped_reason,
                    c.error or "",
                ]
            )
    return markdown, table


def to_markdown(study: Study) -> str:
    caption = captions(study)
    lines = ["# Memory ablation (the paper's Table 2 protocol)", ""]
    if study.scripted:
        lines += [f"**{SCRIPTED_NOTICE}**", ""]
    else:
        lines += [f"Model: `{study.model}` through the Anthropic API; {study.runs} run(s) per cell.", ""]
    messages = sorted({d.spec.phase2_message for d in study.datasets} or {PHASE2_MESSAGE})
    if len(messages) == 1:
        lines += ["Phase 2 message in every condition: " + f'"{messages[0]}"', ""]
    else:
        lines += ["Phase 2 message in every condition: " + "; ".join(f'"{d.spec.phase2_message}" ({d.dataset})' for d in study.datasets), ""]
    for key, build in (("conditions", condition_rows), ("datasets", dataset_rows), ("setup", setup_rows)):
        headers, rows = build(study)
        lines += [f"*{caption[key]}*", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    lines += ["Conditions:", ""]
    lines += [f"- `{c.name}`: {c.carries}" for c in CONDITIONS]
    return "\n".join(lines) + "\n"
