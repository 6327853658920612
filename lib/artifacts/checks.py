"""The validation criteria every dashboard, and every report, must pass, as small composable checks.

Each check takes a `CheckContext` and returns `Diagnostic`s with an id, a
level, a message that names the component and field, and a location
(dashboard.yaml or report.yaml, and its line). `run` applies them all to one
artifact; checks that need data are skipped, with a warning saying so, when
no data is loaded. A report (report.yaml) passes the same checks, reading its
components where its sections hold them, and one more:

    schema             the spec validates against schemas/dashboard.schema.json
    inline_data        data only through queries: no inline values, no query that reads no table
    queries            every query runs in the sandbox
    references         every table and column exists, with a usable type ("did you mean")
    literal_values     no number in titles, labels or text that equals a value in the data
    output_constraints output.yaml's theme and layout rules, and checkable task rules
    renders            the dashboard renders without error
    placeholders       (reports) every placeholder in prose names a query and a column of it, and shows a value
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import duckdb
import pyarrow as pa

from ..core import settings
from ..core.diagnostics import ERROR, WARNING, Diagnostic, format_path, has_errors
from ..data import coltypes
from ..data.engine import Engine, QueryCache
from ..data.refresh import fetch_candidate
from ..data.sandbox import QueryError
from ..memory import rule_review, schemas
from ..memory.kinds import KINDS
from ..memory.spec import PARAM_RE, PLACEHOLDER_RE, POINT_FILTERS, components, prose_id, queries, selections, unset_params
from ..memory.workspace import Workspace, shown_file
from ..memory.workspace import load as load_workspace
from ..memory.workspace import render as render_yaml
from ..memory.yamlio import Document, parse
from .components import kind_of
from .components.chart import NAME as CHART
from .components.table import NAME as TABLE
from .render import render
from .report import render_report

FILE = "dashboard.yaml"
ARTIFACTS = ("dashboard", "report")  # the workspace files the checks apply to
log = logging.getLogger(__name__)


@dataclass
class CheckContext:
    ws: Workspace
    tables: Mapping[str, pa.Table] | None
    version: str = ""
    file: str = FILE
    kind: str = "dashboard"  # or "report"
    _doc: Document | None = None
    _rendered: Any = None
    _bound: dict[str, Any] = field(default_factory=dict)

    @property
    def dashboard(self) -> dict[str, Any]:
        """The artifact checked: the dashboard, or the report."""
        return self.ws.get(self.kind) or {}

    @property
    def what(self) -> str:
        return "the " + self.kind

    def components(self) -> list[tuple[tuple, dict[str, Any]]]:
        """(path, spec) of each component, where the dashboard lists it or the report's sections hold it."""
        return [(path, dict(c)) for path, c in components(self.dashboard)]

    @property
    def doc(self) -> Document:
        """Line numbers: the file as loaded, or the canonical text of an in-memory spec."""
        if self._doc is None:
            self._doc = self.ws.docs.get(self.kind) or parse(render_yaml(self.kind, self.dashboard))
        return self._doc

    def diag(self, check: str, message: str, path: tuple = (), level: str = ERROR, allowed: str | None = None) -> Diagnostic:
        return Diagnostic(f"check.{check}", level, message, self.file, self.doc.line_of(path), format_path(path) or None, allowed)

    def data_tables(self) -> Mapping[str, pa.Table]:
        """The tables, for the checks that need data (run() calls them only when it was given some)."""
        if self.tables is None:
            raise RuntimeError("a data check ran without the data")
        return self.tables

    def rendered(self):
        if self._rendered is None:
            draw = render_report if self.kind == "report" else render
            self._rendered = draw(self.ws.data, self.data_tables(), self.version or "check", cache=QueryCache(), workspace_path=self.ws.path)
        return self._rendered

    def bound(self, sql: str) -> list[tuple[str, str]] | QueryError:
        """Output (column, type) pairs of a query bound to the data, or the error; memoised."""
        if sql not in self._bound:
            try:
                engine = Engine.for_workspace(self.ws.data, self.data_tables(), self.version or "check", workspace_path=self.ws.path)
                self._bound[sql] = engine.bind(sql, unset_params(sql))
            except QueryError as exc:
                self._bound[sql] = exc
        return self._bound[sql]


# --------------------------------------------------------------------------- static checks


def check_schema(ctx: CheckContext) -> list[Diagnostic]:
    diags = schemas.validate_document(ctx.kind, ctx.doc, ctx.file)
    if not diags:
        diags = [d for check in KINDS[ctx.kind].checks for d in check(ctx.doc, ctx.file)]
    return [Diagnostic("check.schema", d.level, d.message, d.file, d.line, d.field, d.allowed) for d in diags]


INLINE_KEYS = {"data", "values", "url", "datasets"}


def check_inline_data(ctx: CheckContext) -> list[Diagnostic]:
    out = []
    # Where Vega-Lite would take data: a component itself and its encoding. Not the
    # `columns` or `queries` maps, whose keys are column and query names.
    for at, comp in ctx.components():
        for place, node in kind_of(comp).data_places(comp):
            path = at + place
            for key in INLINE_KEYS & set(node):
                out.append(
                    ctx.diag(
                        "inline_data",
                        f"component '{comp.get('id', '?')}' carries inline data in '{key}'; data must come from its query at render time",
                        path + (key,),
                    )
                )
    for path, where, sql in queries(ctx.dashboard):
        if re.search(r"\bVALUES\s*\(", sql, re.IGNORECASE):
            out.append(ctx.diag("inline_data", f"{where}: the query lists literal VALUES; read the data from a table instead", path))
            continue
        try:
            tables = duckdb.get_table_names(sql)
        except duckdb.Error:
            continue  # not parseable: the queries check reports it
        if not tables:
            out.append(
                ctx.diag("inline_data", f"{where}: the query reads no table, so its numbers are hardcoded; select them from the workspace's tables", path)
            )
    return out


def check_selections(ctx: CheckContext) -> list[Diagnostic]:
    """A chart's `select` names a filter of the dashboard that takes one clicked value, and some other query uses it."""
    out = []
    filters = {f.get("id"): f for f in ctx.dashboard.get("filters") or []}
    components = ctx.dashboard.get("components") or []
    for i, comp in enumerate(components):
        cid = comp.get("id", "?")
        for place, _, fid in selections(comp):
            path = ("components", i) + place + ("filter",)
            filt = filters.get(fid)
            if filt is None:
                known = ", ".join(str(f) for f in filters)
                out.append(
                    ctx.diag(
                        "selections",
                        f"component '{cid}': select drives filter '{fid}', which is not a filter of this dashboard{_did_you_mean(fid, map(str, filters))}",
                        path,
                        allowed=known or "none: add the filter under filters first",
                    )
                )
            elif filt.get("type") not in POINT_FILTERS:
                out.append(
                    ctx.diag(
                        "selections",
                        f"component '{cid}': select drives filter '{fid}', a {filt.get('type')} filter, which cannot take the value of one clicked mark",
                        path,
                        allowed=" or ".join(POINT_FILTERS),
                    )
                )
            elif not any(fid in PARAM_RE.findall(sql) for p, _, sql in queries(ctx.dashboard) if p[:2] != ("components", i)):
                out.append(
                    ctx.diag(
                        "selections",
                        f"component '{cid}': select drives filter '{fid}', but no other component's query uses ${fid}, so a click changes nothing",
                        path,
                        WARNING,
                    )
                )
    return out


def _component_id(ctx: CheckContext, path: tuple) -> str:
    return next((c.get("id", "?") for at, c in ctx.components() if path[: len(at)] == at), "?")


def check_output_constraints(ctx: CheckContext) -> list[Diagnostic]:
    out = []
    dashboard = ctx.dashboard
    output = ctx.ws.get("output") or {}
    required_theme = output.get("theme") or {}
    for key in ("background", "text"):
        mine = (dashboard.get("theme") or {}).get(key)
        if mine and required_theme.get(key) and mine.lower() != required_theme[key].lower():
            out.append(
                ctx.diag(
                    "output_constraints", f"theme {key} {mine} differs from output.yaml's {required_theme[key]}", ("theme", key), allowed=required_theme[key]
                )
            )
    layout_rules = output.get("layout") or {}
    components = [c for _, c in ctx.components()]
    if layout_rules.get("max_components") and len(components) > layout_rules["max_components"]:
        out.append(
            ctx.diag(
                "output_constraints",
                f"{len(components)} components; output.yaml allows at most {layout_rules['max_components']}",
                ("components",) if ctx.kind == "dashboard" else ("sections",),
                allowed=f"at most {layout_rules['max_components']}",
            )
        )
    if ctx.kind == "report":
        out.extend(_report_layout(ctx, layout_rules))
    for r, row in enumerate(dashboard.get("layout") or []):
        if layout_rules.get("max_per_row") and len(row) > layout_rules["max_per_row"]:
            out.append(
                ctx.diag(
                    "output_constraints",
                    f"layout row {r + 1} has {len(row)} components; output.yaml allows {layout_rules['max_per_row']} per row",
                    ("layout", r),
                    allowed=f"at most {layout_rules['max_per_row']}",
                )
            )
    if layout_rules.get("kpis_first", False) and dashboard.get("layout"):
        kinds = {c.get("id"): c.get("type") for c in components}
        first = [cell if isinstance(cell, str) else cell.get("id") for cell in dashboard["layout"][0]]
        if any(k == "kpi" for k in kinds.values()) and not all(kinds.get(cid) == "kpi" for cid in first):
            out.append(ctx.diag("output_constraints", "output.yaml asks for KPI cards in the first row", ("layout", 0), WARNING))
    for rule in (ctx.ws.get("task") or {}).get("rules") or []:
        if rule.get("check"):
            out.extend(_task_rule(ctx, rule))
    return out


def _report_layout(ctx: CheckContext, layout_rules: Mapping[str, Any]) -> list[Diagnostic]:
    """output.yaml's layout rules read for a document: a KPI row is a row; "KPIs first" means no chart or table before the first KPI row."""
    out = []
    sections = ctx.dashboard.get("sections") or []
    for i, section in enumerate(sections):
        cards = (section.get("components") or []) if section.get("type") == "kpis" else []
        if layout_rules.get("max_per_row") and len(cards) > layout_rules["max_per_row"]:
            out.append(
                ctx.diag(
                    "output_constraints",
                    f"the KPI row in sections[{i}] has {len(cards)} cards; output.yaml allows {layout_rules['max_per_row']} per row",
                    ("sections", i, "components"),
                    allowed=f"at most {layout_rules['max_per_row']}",
                )
            )
    kinds = [section.get("type") for section in sections]
    if layout_rules.get("kpis_first", False) and "kpis" in kinds:
        first_figure = next(i for i, kind in enumerate(kinds) if kind in ("kpis", CHART, TABLE))
        if kinds[first_figure] != "kpis":
            out.append(
                ctx.diag(
                    "output_constraints",
                    "output.yaml asks for KPI cards first: put a KPI row before the first chart or table",
                    ("sections", first_figure),
                    WARNING,
                )
            )
    return out


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1, abs(a), abs(b))
    return str(a).lower() == str(b).lower()


# What each kind of rule check needs besides its colour; the schema leaves them optional.
RULE_CHECK_NEEDS = {"background_color": (), "category_color": ("field", "value"), "threshold_color": ("field", "op", "value")}


def _task_rule(ctx: CheckContext, rule: dict[str, Any]) -> list[Diagnostic]:
    check, rid = rule["check"], rule["id"]
    kind, color = check["kind"], check["color"].lower()
    missing = [key for key in RULE_CHECK_NEEDS.get(kind, ()) if check.get(key) in (None, "")]
    if missing:
        return [
            Diagnostic(
                "check.output_constraints",
                WARNING,
                f"task rule '{rid}' cannot be verified: its {kind} check has no {' or '.join(missing)}",
                shown_file_of(ctx, "task"),
                None,
                f"rules[{rid}].check",
                ", ".join(missing),
            )
        ]
    theme = (ctx.dashboard.get("theme") or {}).get("background") or ((ctx.ws.get("output") or {}).get("theme") or {}).get("background")
    if kind == "background_color":
        if (theme or "").lower() != color:
            return [
                ctx.diag(
                    "output_constraints",
                    f"task rule '{rid}' requires background {color}, {ctx.what} has {theme or 'none'}",
                    ("theme", "background"),
                    allowed=color,
                )
            ]
        return []
    target = (check.get("field") or "").lower()
    out, applied = [], False
    for at, comp in ctx.components():
        cid = comp.get("id")
        colored = kind_of(comp).color_channel(comp) if kind == "category_color" else None
        if colored is not None:
            where, channel = colored
            if (channel.get("field") or "").lower() != target:
                continue
            applied = True
            scale = channel.get("scale") or {}
            domain, rng = scale.get("domain") or [], scale.get("range") or []
            idx = next((j for j, v in enumerate(domain) if _same_value(v, check["value"])), None)
            if idx is None or idx >= len(rng) or str(rng[idx]).lower() != color:
                out.append(
                    ctx.diag(
                        "output_constraints",
                        f"component '{cid}' colours {check['field']} but not {check['value']!r} in {color} (task rule '{rid}')",
                        at + where + ("scale",),
                        allowed=f"{check['value']} -> {color}",
                    )
                )
        elif kind == "threshold_color":
            places = _threshold_places(ctx, comp, at, target)
            for path, thresholds in places:
                applied = True
                if not any(
                    t.get("op") == check["op"] and _same_value(t.get("value"), check["value"]) and t.get("color", "").lower() == color for t in thresholds or []
                ):
                    out.append(
                        ctx.diag(
                            "output_constraints",
                            f"component '{cid}' shows {check['field']} without the threshold {check['op']} {check['value']} in {color} (task rule '{rid}')",
                            path,
                            allowed=f"thresholds: [{{op: '{check['op']}', value: {check['value']}, color: '{color}'}}]",
                        )
                    )
    if not applied:
        out.append(ctx.diag("output_constraints", f"task rule '{rid}' applies to no component (nothing shows {check.get('field')})", (), WARNING))
    return out


def _threshold_places(ctx: CheckContext, comp: dict, at: tuple, target: str) -> list[tuple[tuple, list | None]]:
    """Where a component shows `target` and so must carry the rule's threshold."""

    def columns_of(sql: str) -> list[str] | None:
        """The query's output columns, when there is data to bind it to and it binds."""
        bound = ctx.bound(sql) if ctx.tables is not None else None
        return [c for c, _ in bound] if isinstance(bound, list) else None

    return [(at + path, thresholds) for path, thresholds in kind_of(comp).threshold_places(comp, target, columns_of)]


# --------------------------------------------------------------------------- checks on data


def _is_reference(error: QueryError) -> bool:
    """A query that names a table or column the data does not have: check_references explains those."""
    return bool(error.table or error.column)


def check_queries(ctx: CheckContext) -> list[Diagnostic]:
    """Each query binds (syntax, statement kind, functions, types) without running it:
    failures while running show in check_renders, which runs every component's query once."""
    out = []
    for path, where, sql in queries(ctx.dashboard):
        bound = ctx.bound(sql)
        if isinstance(bound, QueryError) and not _is_reference(bound):
            out.append(ctx.diag("queries", f"{where}: the query does not run: {bound}", path))
    return out


def _unbound_components(ctx: CheckContext) -> set[str]:
    """Ids of components with a query that does not bind (reported by check_queries or check_references)."""
    unbound = {path for path, _, sql in queries(ctx.dashboard) if isinstance(ctx.bound(sql), QueryError)}
    out = {c.get("id") for at, c in ctx.components() if any(path[: len(at)] == at for path in unbound)}
    if any(path[0] == "queries" for path in unbound):  # a report's prose reads its named queries
        out |= {prose_id(i) for i, query in _prose_sections(ctx) if any(("queries", name) in unbound for name in query)}
    return {cid for cid in out if isinstance(cid, str)}


def _listed(names: list[str], most: int = 40) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    close = [c for c in choices if c.lower() == name.lower()] or difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f"; did you mean '{close[0]}'?" if close else ""


def check_references(ctx: CheckContext) -> list[Diagnostic]:
    """Every table and column a query names exists: the located message, with what it may name instead
    (the loaded tables; the columns of only the tables that query reads)."""
    out = []
    for path, where, sql in queries(ctx.dashboard):
        bound = ctx.bound(sql)
        if not isinstance(bound, QueryError) or not _is_reference(bound):
            continue
        name, what = (bound.table, "table") if bound.table else (bound.column or "", "column")
        allowed = list(bound.allowed)
        out.append(ctx.diag("references", f"{where}: unknown {what} '{name}'{_did_you_mean(name, allowed)}", path, allowed=_listed(allowed)))
    for at, comp in ctx.components():
        out.extend(_component_fields(ctx, comp, at))
    return out


USABLE = {"quantitative": ("number",), "temporal": ("time", "text"), "kpi": ("number",)}


def _component_fields(ctx: CheckContext, comp: dict, at: tuple) -> list[Diagnostic]:
    """Fields a component names (encodings, KPI and table columns, placeholders) exist in its query's output."""
    out = []
    cid = comp.get("id")
    kind = kind_of(comp)
    for match, place in kind.placeholders(comp):
        qname, column = match.group(1), match.group(2)
        path = at + place
        sql = (comp.get("queries") or {}).get(qname)
        if sql is None:
            out.append(
                ctx.diag(
                    "references",
                    f"component '{cid}': placeholder {match.group(0)} names no query{_did_you_mean(qname, comp.get('queries') or {})}",
                    path,
                    allowed=", ".join(comp.get("queries") or {}),
                )
            )
            continue
        bound = ctx.bound(sql)
        if isinstance(bound, list) and column.lower() not in [c.lower() for c, _ in bound]:
            names = [c for c, _ in bound]
            out.append(
                ctx.diag(
                    "references",
                    f"component '{cid}': placeholder {match.group(0)}: query '{qname}' has no column '{column}'{_did_you_mean(column, names)}",
                    path,
                    allowed=", ".join(names),
                )
            )
    bound = ctx.bound(comp["query"]) if isinstance(comp.get("query"), str) else None
    if not isinstance(bound, list):
        return out
    types = {c.lower(): t for c, t in bound}
    names = [c for c, _ in bound]
    for ref in kind.fields(comp, names):
        if not ref.name:
            continue
        path = at + ref.path
        if ref.name.lower() not in types:
            out.append(
                ctx.diag(
                    "references",
                    f"component '{cid}': {ref.what} '{ref.name}' is not a column of its query{_did_you_mean(ref.name, names)}",
                    path,
                    allowed=", ".join(names),
                )
            )
        elif ref.usable and coltypes.family(types[ref.name.lower()]) not in USABLE[ref.usable]:
            out.append(
                ctx.diag(
                    "references",
                    f"component '{cid}': {ref.what} '{ref.name}' is {types[ref.name.lower()]}, not usable as {ref.usable}",
                    path,
                    allowed=" or ".join(USABLE[ref.usable]),
                )
            )
    return out


NUMBER_RE = re.compile(r"(?<![\w.#{])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*(%)?")


def _numbers_in(text: str) -> list[tuple[float, bool, int, str]]:
    """(value, is_percent, decimals, as written) for numbers in prose, leaving out placeholders.

    Bare integers below 10 ("top 5 sites") are counts of the prose, not data, and are left out.
    """
    text = PLACEHOLDER_RE.sub(" ", text or "")
    out = []
    for m in NUMBER_RE.finditer(text):
        written = m.group(0).strip()
        decimals = len(m.group(2)) - 1 if m.group(2) else 0
        value = float((m.group(1) + (m.group(2) or "")).replace(",", ""))
        if decimals == 0 and not m.group(3) and value < 10:
            continue
        out.append((value, bool(m.group(3)), decimals, written))
    return out


def _matches(number: float, percent: bool, decimals: int, data_value: float) -> bool:
    """The number is the data value as a person would write it: same digits at the written precision."""
    if data_value == 0:
        return False
    shown = data_value * 100 if percent else data_value
    return round(shown, decimals) == number


def check_literal_values(ctx: CheckContext) -> list[Diagnostic]:
    rendered = ctx.rendered()
    values: set[float] = set()
    for comp in rendered.components:
        results = ([comp.result] if comp.result is not None else []) + list(comp.text_results.values())
        for res in results:
            for column in res.table.columns:
                if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_decimal(column.type):
                    values.update(float(v) for v in column.to_pylist()[:2000] if v is not None)
    allowed = _threshold_values(ctx)
    out = []
    places: list[tuple[tuple, str]] = [(("title",), ctx.dashboard.get("title", "")), (("description",), ctx.dashboard.get("description", ""))]
    for at, comp in ctx.components():
        places.append((at + ("title",), comp.get("title", "")))
        places.extend((at + path, text) for path, text in kind_of(comp).prose(comp))
    for i, section in enumerate(ctx.dashboard.get("sections") or []):  # a report's headings and prose
        for key in ("text", "markdown"):
            if isinstance(section.get(key), str):
                places.append((("sections", i, key), section[key]))
    for path, text in places:
        for number, percent, decimals, written in _numbers_in(text):
            if any(_matches(number, percent, decimals, v) for v in allowed):
                continue
            hit = next((v for v in values if _matches(number, percent, decimals, v)), None)
            if hit is not None:
                component = _component_id(ctx, path)
                where = f"component '{component}'" if component != "?" else _section_name(ctx, path) if path[0] == "sections" else ctx.what
                fix = "a {{query.column}} placeholder" + (" in a text block" if ctx.kind == "dashboard" else " in prose")
                out.append(
                    ctx.diag(
                        "literal_values",
                        f"{where}: '{written}' in {path[-1]} equals a value in the data ({hit:g}); it will go stale on refresh, use {fix}",
                        path,
                    )
                )
    return out


def _section_name(ctx: CheckContext, path: tuple) -> str:
    """ "the heading in sections[3]": a report's section that is not a component, as messages name it."""
    return f"the {(ctx.dashboard.get('sections') or [])[path[1]].get('type', 'section')} in sections[{path[1]}]"


def _threshold_values(ctx: CheckContext) -> list[float]:
    """Numbers the spec or the task rules state as rules (thresholds), which text may repeat."""
    out = []
    for _, comp in ctx.components():
        out.extend(kind_of(comp).rule_values(comp))
    for rule in (ctx.ws.get("task") or {}).get("rules") or []:
        value = (rule.get("check") or {}).get("value")
        if isinstance(value, (int, float)):
            out.append(float(value))
    return out


def check_renders(ctx: CheckContext) -> list[Diagnostic]:
    rendered = ctx.rendered()
    index: dict[Any, tuple] = {c.get("id"): at for at, c in ctx.components()}
    index.update({prose_id(i): ("sections", i) for i, _ in _prose_sections(ctx)})
    explained = _unbound_components(ctx)
    out = []
    for cid, error in rendered.errors:
        if cid in explained or (cid.startswith("prose_") and "placeholder" in error):  # check_placeholders says why
            continue
        path = index.get(cid) or (("filters",) if ctx.kind == "dashboard" else ("parameters",))
        what = f"component '{cid}'" if not cid.startswith("prose_") else f"the prose in {format_path(path)}"
        out.append(ctx.diag("renders", f"{what} does not render: {error}", path))
    return out


# --------------------------------------------------------------------------- reports: placeholders in prose


def _prose_sections(ctx: CheckContext) -> list[tuple[int, list[str]]]:
    """(index, the query names its placeholders read) of each prose section of a report."""
    return [
        (i, [m.group(1) for m in PLACEHOLDER_RE.finditer(s.get("markdown") or "")])
        for i, s in enumerate(ctx.dashboard.get("sections") or [])
        if s.get("type") == "prose"
    ]


def _placeholders(ctx: CheckContext) -> Iterable[tuple[tuple, re.Match]]:
    for i, section in enumerate(ctx.dashboard.get("sections") or []):
        if section.get("type") == "prose":
            for match in PLACEHOLDER_RE.finditer(section.get("markdown") or ""):
                yield ("sections", i, "markdown"), match


def check_placeholder_queries(ctx: CheckContext) -> list[Diagnostic]:
    """Every placeholder in a report's prose names one of the report's queries (no data needed)."""
    named = ctx.dashboard.get("queries") or {}
    return [
        ctx.diag(
            "placeholders",
            f"placeholder {match.group(0)} in sections[{path[1]}] names no query{_did_you_mean(match.group(1), named)}",
            path,
            allowed=", ".join(named) or "a query under `queries`",
        )
        for path, match in _placeholders(ctx)
        if match.group(1) not in named
    ]


def check_placeholders(ctx: CheckContext) -> list[Diagnostic]:
    """Every placeholder reads a column of its query's first row, and that row has a value there
    (parameters unset): an empty result or a NULL prints a dash where the reader expects a figure."""
    named = ctx.dashboard.get("queries") or {}
    rendered = ctx.rendered()
    firsts: dict[str, dict[str, Any] | None] = {}
    for comp in rendered.components:
        for name, result in comp.text_results.items():
            rows = result.table.slice(0, 1).to_pylist()
            firsts[name] = {k.lower(): v for k, v in rows[0].items()} if rows else None
    out = []
    for path, match in _placeholders(ctx):
        name, column = match.group(1), match.group(2)
        if name not in named:
            continue  # check_placeholder_queries
        bound = ctx.bound(named[name])
        if isinstance(bound, QueryError):
            continue  # check_queries or check_references
        names = [c for c, _ in bound]
        if column.lower() not in [c.lower() for c in names]:
            out.append(
                ctx.diag(
                    "placeholders",
                    f"placeholder {match.group(0)} in sections[{path[1]}]: query '{name}' has no column '{column}'{_did_you_mean(column, names)}",
                    path,
                    allowed=", ".join(names),
                )
            )
        elif name in firsts and firsts[name] is None:
            out.append(
                ctx.diag("placeholders", f"placeholder {match.group(0)} in sections[{path[1]}] shows no value: query '{name}' returns no rows", path, WARNING)
            )
        elif name in firsts and (firsts[name] or {}).get(column.lower()) is None:
            out.append(
                ctx.diag(
                    "placeholders",
                    f"placeholder {match.group(0)} in sections[{path[1]}] shows no value: column '{column}' is NULL in the first row",
                    path,
                    WARNING,
                )
            )
    return out


STATIC: list[Callable[[CheckContext], list[Diagnostic]]] = [check_schema, check_inline_data, check_output_constraints, check_selections]
ON_DATA: list[Callable[[CheckContext], list[Diagnostic]]] = [check_queries, check_references, check_literal_values, check_renders]
# A report's own, after the shared ones.
REPORT_STATIC: list[Callable[[CheckContext], list[Diagnostic]]] = [check_placeholder_queries]
REPORT_ON_DATA: list[Callable[[CheckContext], list[Diagnostic]]] = [check_placeholders]


def shown_file_of(ctx: CheckContext, kind: str) -> str:
    """The file name of another workspace file, beside the dashboard's as the diagnostics show it."""
    return ctx.file.rsplit("/", 1)[0] + "/" + KINDS[kind].file if "/" in ctx.file else KINDS[kind].file


def _isolated(check: Callable[[CheckContext], list[Diagnostic]], ctx: CheckContext) -> list[Diagnostic]:
    """One check's findings; a check that breaks becomes an error naming it, and the others still run."""
    try:
        return check(ctx)
    except Exception as exc:  # a bug in one check must not hide the others' results, nor crash a page
        name = check.__name__.removeprefix("check_")
        log.exception("check %s failed on %s", name, ctx.file)
        return [
            Diagnostic(
                f"check.{name}",
                ERROR,
                f"the {name} check could not finish ({type(exc).__name__}: {exc}); the other checks ran. Please report this with the spec.",
                ctx.file,
            )
        ]


def run(
    ws: Workspace,
    tables: Mapping[str, pa.Table] | None,
    version: str = "",
    file: str = FILE,
    skipped_note: Diagnostic | None = None,
    *,
    kind: str = "dashboard",
) -> list[Diagnostic]:
    """All checks on the workspace's dashboard (or, with `kind="report"`, its report); the data checks need `tables`.

    Without tables the static checks run and `skipped_note` (by default a
    warning that no data is loaded) says that the data checks did not.
    """
    if not ws.get(kind):
        return []
    if file == FILE and kind != "dashboard":
        file = KINDS[kind].file
    ctx = CheckContext(ws, tables, version, file, kind)
    out = _isolated(check_schema, ctx)
    if any(d.level == ERROR for d in out):
        return out  # the other checks assume a well-formed spec
    for check in STATIC[1:] + (REPORT_STATIC if kind == "report" else []):
        out.extend(_isolated(check, ctx))
    if tables is None:
        out.append(skipped_note or Diagnostic("check.skipped", WARNING, f"data checks not run: no data loaded (run `{settings.COMMAND} refresh`)", file))
        return out
    for check in ON_DATA + (REPORT_ON_DATA if kind == "report" else []):
        out.extend(_isolated(check, ctx))
    return out


DATA_NOT_RUN = "check.data_not_run"


def validate_workspace(
    path, *, today=None, strict: bool = False, fetch: Callable[[Path], tuple[Mapping[str, pa.Table], list]] = fetch_candidate
) -> list[Diagnostic]:
    """The one definition of "valid": what CI, `validate`, `check`, Review and every publish route use.

    Schema validation of every file, then all dashboard and report checks, the data checks
    included, on the data the workspace's own sources give now. The verdict
    depends only on the files and the data they name, never on what a cache
    happens to hold: the data is fetched afresh into memory (nothing is written
    to the cache), so the same files give the same verdict in any process.
    When the data cannot be loaded (a secret that is not set, a source that is
    unreachable), the data checks are not run and a warning says so and why;
    it is never a silent pass. Schema errors stop the dashboard checks (they
    assume valid files); warnings do not. Task rules not confirmed within the
    workspace's review period (as of `today`) are warnings (lib/memory/rule_review.py).

    `strict` (`validate --strict`, a config repo's CI that asks for it) makes data checks that could not run
    an error instead of that warning: a gate that must see the data fails where it cannot. `fetch` reads
    the sources (`refresh.fetch_candidate`); publish passes one that keeps what it read, to serve it.
    """
    ws, diagnostics = load_workspace(path)
    if not has_errors(diagnostics):
        diagnostics = diagnostics + rule_review.diagnostics(ws, today)
    artifacts = [kind for kind in ARTIFACTS if ws.get(kind)]
    if has_errors(diagnostics) or not artifacts:
        return diagnostics
    tables, reports = fetch(Path(path))
    failed = [r for r in reports if r.status != "ok"]
    if failed:
        reasons = "; ".join(r.message or f"source {r.name!r} failed" for r in failed)
        if strict:
            note = Diagnostic(
                DATA_NOT_RUN, ERROR, f"data checks not run, which strict validation does not allow ({DATA_NOT_RUN}): {reasons}", shown_file(path, "sources")
            )
        else:
            note = Diagnostic(DATA_NOT_RUN, WARNING, f"data checks not run: {reasons}", shown_file(path, "sources"))
        static = [d for kind in artifacts for d in run(ws, None, file=shown_file(path, kind), skipped_note=note, kind=kind) if d is not note]
        return diagnostics + static + [note]
    return diagnostics + [d for kind in artifacts for d in run(ws, tables, version="validate", file=shown_file(path, kind), kind=kind)]
