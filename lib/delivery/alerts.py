"""Alerts on a KPI's figure: workspace.yaml's `alerts: [{component: kpi_attainment, when: '< 0.9', to: [...]}]`.

The KPI's query runs as it does on the Dashboard (its filters at their defaults), for each value of the
filter `per` names when it is given (the figure at each site), and through the engine of the recipient's
rows, so a viewer held to Brno is alerted on Brno's figure only. No model is involved.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..artifacts.components.kpi import NAME as KPI
from ..artifacts.components.kpi import value_column
from ..artifacts.render import filter_params, filter_states
from ..core.errors import DashmemError
from ..core.formats import format_value
from ..data.engine import Engine
from ..memory.spec import params_for

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
PER_TYPES = ("select", "multiselect")  # the filters an alert's `per:` may name: each value is a figure of its own
WORDS = {"<": "below", "<=": "at or below", ">": "above", ">=": "at or above", "==": "equal to", "!=": "other than"}


class AlertError(DashmemError, ValueError):
    """An alert that cannot be evaluated: its component is not a KPI, its filter is not the dashboard's, its query fails."""


@dataclass(frozen=True)
class Condition:
    op: str
    threshold: float
    percent: bool  # written with %: shown so

    @classmethod
    def parse(cls, when: str) -> Condition:
        match = re.fullmatch(r"(<=|>=|==|!=|<|>) ?(-?[0-9]+(?:\.[0-9]+)?)(%?)", when.strip())
        if match is None:
            raise AlertError(f"alert condition {when!r}: write an operator (<, <=, >, >=, ==, !=) and a number, e.g. '< 0.9' or '< 90%'")
        op, number, percent = match.groups()
        return cls(op, float(number) / (100 if percent else 1), bool(percent))

    def holds(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and OPERATORS[self.op](float(value), self.threshold)

    def words(self, fmt: str | None) -> str:
        shown = f"{self.threshold * 100:g}%" if self.percent else format_value(self.threshold, fmt)
        return f"{WORDS[self.op]} {shown}"


@dataclass(frozen=True)
class Figure:
    subject: str  # "" for the KPI as a whole, else "site = Brno"
    value: Any
    shown: str  # as the KPI shows it


def key(alert: Mapping[str, Any]) -> str:
    """The alert's identity in the delivery record: its content, so an edited alert starts afresh."""
    text = json.dumps({k: alert.get(k) for k in ("component", "when", "per")}, sort_keys=True)
    return "alert:" + hashlib.sha256(text.encode()).hexdigest()[:12]


def kpi_of(files: Mapping[str, Any], component: str) -> Mapping[str, Any]:
    for spec in (files.get("dashboard") or {}).get("components") or []:
        if spec.get("id") == component:
            if spec.get("type") != KPI:
                raise AlertError(f"alert on {component!r}: it is a {spec.get('type')}, and alerts watch KPIs")
            return spec
    raise AlertError(f"alert on {component!r}: dashboard.yaml has no component with that id")


def figures(alert: Mapping[str, Any], files: Mapping[str, Any], engine: Engine) -> list[Figure]:
    """The KPI's figure, or one per value of the filter `per`, as the engine's user sees them."""
    spec = kpi_of(files, alert["component"])
    dashboard = files.get("dashboard") or {}
    timeout_s = float(((files.get("output") or {}).get("data_injection") or {}).get("query_timeout_s", 10))
    states = filter_states(dashboard, engine.tables, engine.version, engine, timeout_s)
    choices: list[tuple[str, dict[str, Any]]] = [("", {})]
    per = alert.get("per")
    if per:
        state = next((s for s in states if s.id == per), None)
        if state is None or state.type not in PER_TYPES:
            raise AlertError(f"alert on {alert['component']!r}: per {per!r} is not a select or multiselect filter of the dashboard")
        if state.error:
            raise AlertError(f"alert on {alert['component']!r}: the values of filter {per!r} could not be read: {state.error}")
        label = state.label or per
        choices = [(f"{label} = {format_value(v)}", {per: [v] if state.type == "multiselect" else v}) for v in state.options]
    out = []
    for subject, chosen in choices:
        bound = params_for(spec["query"], filter_params(states, chosen))
        try:
            result = engine.run(spec["query"], bound, max_rows=2, timeout_s=timeout_s)
        except DashmemError as exc:
            raise AlertError(f"alert on {alert['component']!r}{' (' + subject + ')' if subject else ''}: its query fails: {exc}") from None
        column = value_column(spec, result.columns)
        rows = result.table.to_pylist()
        value = rows[0].get(column) if rows and column else None
        out.append(Figure(subject, value, format_value(value, spec.get("format"))))
    return out
