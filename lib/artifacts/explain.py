""" "Explain this number": where a component's figures come from.

For one component of a dashboard, over the data a rendering uses, this says

- each query it runs with the filter values bound: the SQL as written, the
  parameters as they travel to the engine, and a readable rendering with the
  values inlined (for people to read, never run);
- the tables each query reads and the source behind each (type and location,
  credentials redacted);
- the data it was computed on: the snapshot id and when it was loaded, or, for
  a live source, that it is read from the database at query time;
- the task rules that shaped it: rules whose check or text names a column,
  table or the component itself, and the global rules (no check, naming no
  column or table of the workspace);
- a sample of the rows behind the value: `SELECT * FROM <table> WHERE <the
  query's own WHERE>` with the same parameters, only for a single-table query
  without joins, subqueries, CTEs or HAVING (otherwise "not derivable"). It runs
  like every dashboard query does, through the workspace's query engine
  (`lib.data.engine`): in the sandbox, or read-only in a live source's database.

Nothing here writes anything; the page and `python -m lib explain` show it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.errors import DashmemError
from ..data.engine import Engine
from ..data.live import DEFAULT_TTL_S, live_sources
from ..data.sandbox import QueryError
from ..data.standins import parse as _parse
from ..data.standins import tables_named
from ..memory import spec as specs
from ..memory.credentials import redact_url
from ..memory.spec import PARAM_RE
from .render import filter_params, filter_states

if TYPE_CHECKING:
    import pyarrow as pa

    from ..data.snapshots import Snapshot

SAMPLE_ROWS = 5
RESULT_ROWS = 5  # of each query's own result, to set beside the sample


class ExplainError(DashmemError, ValueError):
    """The component or a filter value asked about does not exist; the message says what does."""


@dataclass
class SourceInfo:
    table: str
    source: str | None  # the sources.yaml entry that makes the table; None when no source does
    type: str | None
    location: str  # file path, URL (credentials redacted), database table or tool
    live: bool
    rows: int | None  # rows in the snapshot; None for a live table (its snapshot copy is empty)


@dataclass
class RuleInfo:
    id: str
    text: str
    why: str  # "check on column 'gate'", "text names column 'actual'", "global: ..."


@dataclass
class QueryExplained:
    name: str  # "query", or a text block's query name
    sql: str
    params: dict[str, Any]
    readable: str  # the values inlined, for reading only
    tables: list[str]
    columns: list[str]  # of its result
    result_rows: list[dict[str, Any]]
    sample_sql: str | None = None
    sample_params: dict[str, Any] = field(default_factory=dict)
    sample_rows: list[dict[str, Any]] = field(default_factory=list)
    sample_matching: int | None = None  # how many rows the WHERE keeps
    sample_note: str = ""  # why there is no sample
    error: str | None = None

    @property
    def label(self) -> str:
        """How a person reads its name: "This component's query", or a text block's "The query `top`"."""
        return "This component's query" if self.name == "query" else f"The query `{self.name}`"


@dataclass
class Explanation:
    component: str
    type: str
    title: str
    filters: dict[str, Any]  # the filter choices explained, by filter id
    queries: list[QueryExplained]
    sources: list[SourceInfo]
    data: dict[str, Any]  # snapshot id and load time, and the live sources read at query time
    rules: list[RuleInfo]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The explanation as plain text, for the CLI."""
        lines = [f"{self.type} {self.component!r}" + (f": {self.title}" if self.title else "")]
        chosen = ", ".join(f"{k} = {_literal(v)}" for k, v in self.filters.items())
        lines.append(f"filters: {chosen or 'none chosen (all rows)'}")
        data = self.data
        if data.get("snapshot_id"):
            lines.append(f"data: snapshot {data['snapshot_id']}, loaded {data['loaded']}")
        for name in data.get("live") or []:
            lines.append(f"data: {name} is live, read from its database when the query runs (a result is reused for up to {data['live_cache_s'][name]} s)")
        lines.append("sources:")
        for s in self.sources:
            rows = "live" if s.live else f"{s.rows:,} rows" if s.rows is not None else "not in the snapshot"
            lines.append(f"  {s.table}: {s.type or 'no source'} {s.location} ({rows})")
        for q in self.queries:
            lines.append(f"query {q.name}:")
            lines += ["  " + line for line in q.sql.strip().splitlines()]
            lines.append("  parameters: " + (", ".join(f"${k} = {_literal(v)}" for k, v in q.params.items()) or "none"))
            lines.append("  as it reads with the values inlined (for reading, not run):")
            lines += ["    " + line for line in q.readable.strip().splitlines()]
            if q.error:
                lines.append(f"  error: {q.error}")
                continue
            lines.append(f"  result ({', '.join(q.columns)}): " + "; ".join(_row(r) for r in q.result_rows))
            if q.sample_sql:
                lines.append(f"  rows behind it ({q.sample_matching:,} match; first {len(q.sample_rows)}): {q.sample_sql}")
                lines += ["    " + _row(r) for r in q.sample_rows]
            else:
                lines.append(f"  rows behind it: not derivable ({q.sample_note})")
        lines.append("task rules:" if self.rules else "task rules: none apply")
        lines += [f"  {r.id} ({r.why}): {r.text}" for r in self.rules]
        return "\n".join(lines)


def _row(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in row.items())


# --------------------------------------------------------------------------- filters


def parse_filters(dashboard: Mapping[str, Any], states: Sequence[Any], pairs: Sequence[str]) -> dict[str, Any]:
    """Filter choices from `ID=VALUE` texts, checked against the dashboard's filters and their options.

    A multiselect takes the option repeated (`site=A site=B`); a range takes `LOW..HIGH`.
    """
    by_id = {s.id: s for s in states}
    chosen: dict[str, Any] = {}
    for pair in pairs:
        fid, eq, value = pair.partition("=")
        fid = fid.strip()
        if not eq or not fid:
            raise ExplainError(f"filter {pair!r}: write it as ID=VALUE, e.g. {next(iter(by_id), 'site')}=VALUE")
        state = by_id.get(fid)
        if state is None:
            known = ", ".join(by_id) or "none (this dashboard has no filters)"
            raise ExplainError(f"filter {fid!r} is not a filter of this dashboard; its filters: {known}")
        if state.type in ("date_range", "number_range"):
            chosen[fid] = _range(state, value)
        else:
            option = _option(state, value)
            chosen[fid] = [*chosen.get(fid, []), option] if state.type == "multiselect" else option
    return chosen


def _option(state: Any, value: str) -> Any:
    if state.error:
        raise ExplainError(f"filter {state.id!r}: its options cannot be read ({state.error})")
    for option in state.options:
        if str(option) == value:
            return option
    shown = ", ".join(str(o) for o in state.options[:20]) + (" ..." if len(state.options) > 20 else "")
    raise ExplainError(f"filter {state.id!r}: {value!r} is not one of its options ({shown or 'none'})")


def _range(state: Any, value: str) -> tuple[Any, Any]:
    low, sep, high = value.partition("..")
    if not sep:
        raise ExplainError(f"filter {state.id!r}: a range is written LOW..HIGH, e.g. {state.id}=2000..2010 (got {value!r})")
    try:
        if state.type == "number_range":
            return _number(low), _number(high)
        return dt.date.fromisoformat(low.strip()), dt.date.fromisoformat(high.strip())
    except ValueError:
        kind = "numbers" if state.type == "number_range" else "dates YYYY-MM-DD"
        raise ExplainError(f"filter {state.id!r}: {value!r} is not a range of {kind}") from None


def _number(text: str) -> int | float:
    text = text.strip()
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)


# --------------------------------------------------------------------------- the explanation


def explain(
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    snapshot: Snapshot | None,
    component_id: str,
    chosen_filters: Mapping[str, Any] | None = None,
    *,
    workspace_path: Any = None,
    version: str | None = None,
    engine: Engine | None = None,
) -> Explanation:
    """Explain component `component_id` of `files["dashboard"]` over `tables` (the data of `snapshot`).

    `version` is the data version the query cache keys on, when `tables` are not exactly the
    snapshot's (the Dashboard's own-CSV view); it defaults to the snapshot's id. `engine` runs the
    queries instead of the workspace's (lib.artifacts.time_travel's over an earlier load, where live sources keep no data).
    """

    dashboard = files.get("dashboard") or {}
    components = {c.get("id"): c for c in dashboard.get("components") or []}
    comp = components.get(component_id)
    if comp is None:
        known = ", ".join(str(c) for c in components) or "none"
        raise ExplainError(f"no component {component_id!r} in this dashboard; its components: {known}")
    injection = (files.get("output") or {}).get("data_injection") or {}
    max_rows = int(injection.get("max_rows_per_query", 10_000))
    timeout_s = float(injection.get("query_timeout_s", 10))
    version = version or (snapshot.id if snapshot else "none")
    queries_runner = Engine.of(engine, files, tables, version, workspace_path)
    states = filter_states(dashboard, tables, version, queries_runner, timeout_s)
    all_params = filter_params(states, chosen_filters or {})
    for _, _, fid in specs.selections(comp):
        all_params.pop(fid, None)  # a cross-filtering chart runs without the filters it drives (lib.artifacts.components.chart)
    live = live_sources(files)

    named: list[tuple[str, str]] = [("query", comp["query"])] if isinstance(comp.get("query"), str) else []
    named += list((comp.get("queries") or {}).items())
    explained = [_query(name, sql, specs.params_for(sql, all_params), queries_runner, max_rows, timeout_s) for name, sql in named]

    read = sorted({t for q in explained for t in q.tables})
    sources = [_source(t, files, snapshot, live) for t in read]
    live_read = sorted({s.source for s in sources if s.live and s.source})
    # A live result is served from the cache for up to its source's TTL: "when fetched" is at most that old.
    data: dict[str, Any] = (
        {"live": live_read, "live_cache_s": {n: int(live[n].get("cache_ttl_s", DEFAULT_TTL_S)) for n in live_read}} if live_read else {"live": []}
    )
    if snapshot is not None and any(not s.live for s in sources):
        data.update(snapshot_id=snapshot.id, loaded=snapshot.created)
        if version != snapshot.id:
            data["replaced"] = version  # some table is a file of this session's, not the snapshot's
    columns = _columns_named(comp, named) | {c for q in explained for c in q.columns}
    chosen = {k: v for k, v in (chosen_filters or {}).items() if v not in (None, "", [], ())}
    return Explanation(
        component_id,
        str(comp.get("type", "")),
        str(comp.get("title", "")),
        chosen,
        explained,
        sources,
        data,
        _rules(files, tables, component_id, str(comp.get("title", "")), set(read), columns),
    )


def _query(name: str, sql: str, params: dict[str, Any], runner: Engine, max_rows: int, timeout_s: float) -> QueryExplained:

    q = QueryExplained(name, sql, params, inline(sql, params), [], [], [])
    try:
        q.tables = sorted(tables_named(sql))
    except QueryError:
        pass  # sqlglot does not read every DuckDB syntax; the query still runs, its tables unnamed
    try:
        result = runner.run(sql, params, max_rows=max_rows, timeout_s=timeout_s)
        q.columns = list(result.columns)
        q.result_rows = result.table.slice(0, RESULT_ROWS).to_pylist()
    except QueryError as exc:
        q.error = str(exc)
        return q
    _sample(q, runner, timeout_s)
    return q


def _sample(q: QueryExplained, runner: Engine, timeout_s: float) -> None:
    """The rows behind a single-table query: its table, its WHERE and parameters; otherwise why not."""
    from sqlglot import exp

    try:
        tree = _parse(q.sql)
    except DashmemError:
        q.sample_note = "the query could not be read to derive them"
        return
    reason = _not_derivable(tree)
    if reason:
        q.sample_note = reason
        return
    source = tree.args.get("from_") or tree.args.get("from")
    assert source is not None  # _not_derivable says so otherwise
    where = tree.args.get("where")
    base = exp.select("*").from_(source.this.copy())
    if where is not None:
        base = base.where(where.this.copy())
    sample_sql = base.limit(SAMPLE_ROWS).sql(dialect="duckdb")
    count_sql = base.select(exp.Count(this=exp.Star()), append=False).sql(dialect="duckdb")
    q.sample_sql = sample_sql
    q.sample_params = specs.params_for(sample_sql, q.params)
    try:
        # Through the query engine: sandboxed, or read-only in a live source's database; cached per data version.
        rows = runner.run(sample_sql, q.sample_params, max_rows=SAMPLE_ROWS, timeout_s=timeout_s)
        counted = runner.run(count_sql, specs.params_for(count_sql, q.params), max_rows=1, timeout_s=timeout_s)
    except DashmemError as exc:
        q.sample_sql, q.sample_note = None, f"the sample query failed: {exc}"
        return
    q.sample_rows = rows.table.to_pylist()
    q.sample_matching = int(counted.rows[0][0])


def _not_derivable(tree: Any) -> str:
    """Why one WHERE over one table does not describe the rows behind a query's values; "" when it does."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select):
        return "the query is not one SELECT (a set operation)"
    source = tree.args.get("from_") or tree.args.get("from")
    if tree.args.get("with_") or tree.args.get("with"):
        return "it has a WITH clause"
    if source is None:
        return "it reads no table"
    if tree.args.get("joins"):
        return "it joins tables"
    if not isinstance(source.this, exp.Table):
        return "it reads a subquery, not a table"
    if tree.args.get("having"):
        return "it filters groups (HAVING), so the rows behind each value differ"
    if any(True for _ in tree.find_all(exp.Subquery)):
        return "it has a subquery"
    return ""


def _source(table: str, files: Mapping[str, Any], snapshot: Snapshot | None, live: Mapping[str, Any]) -> SourceInfo:

    sources = {str(s.get("name", "")).lower(): s for s in (files.get("sources") or {}).get("sources") or [] if isinstance(s, dict)}
    in_snapshot = {name.lower(): (name, meta) for name, meta in (snapshot.tables.items() if snapshot else [])}
    name, meta = in_snapshot.get(table, (table, None))
    made_by = str(meta.get("source") or name) if meta else name
    source = sources.get(made_by.lower()) or sources.get(table)
    if source is None:
        return SourceInfo(name, None, None, "no source in sources.yaml makes this table", False, int(meta["rows"]) if meta else None)
    kind = str(source.get("type", ""))
    if kind == "csv":
        location = f"file {source.get('path', '')}"
    elif kind == "sql":
        where = f"table {source['table']}" if source.get("table") else "its query"
        location = f"{redact_url(str(source.get('url', '')))}, {where}"
    elif kind == "rest":
        location = f"{source.get('method', 'GET')} {redact_url(str(source.get('url', '')))}"
    elif kind == "mcp":
        server = redact_url(str(source["url"])) if source.get("url") else "a local command"
        what = f"tool {source['tool']}" if source.get("tool") else f"resource {source.get('resource', '')}"
        location = f"{server}, {what}"
    else:
        location = ""
    is_live = source.get("name") in live
    return SourceInfo(name, str(source.get("name")), kind, location, is_live, None if is_live or not meta else int(meta["rows"]))


def _columns_named(comp: Mapping[str, Any], named: Sequence[tuple[str, str]]) -> set[str]:
    """Columns the component's queries read, and the fields its spec names."""
    from sqlglot import exp

    found: set[str] = set()
    for _, sql in named:
        try:
            found |= {c.name for c in _parse(sql).find_all(exp.Column) if c.name}
        except QueryError:
            continue
    encoding = comp.get("encoding") or {}
    found |= {str(ch["field"]) for ch in encoding.values() if isinstance(ch, dict) and ch.get("field")}
    found |= {str(k) for k in (comp.get("columns") or {})}
    return found


def _rules(files: Mapping[str, Any], data: Mapping[str, Any], component_id: str, title: str, tables: set[str], columns: set[str]) -> list[RuleInfo]:
    """Task rules about the component: a rule with a check by its field (a column the component
    reads or shows, or the measure its title names); one without, by its text naming the component,
    a table or a column it reads. A rule is global when it has no check and its text names no table or column the workspace has:
    it can shape any component. A rule naming only other columns is left out.
    """
    rules = (files.get("task") or {}).get("rules") or []
    every_column = _workspace_columns(files, data) | columns
    every_table = {str(s.get("name", "")) for s in (files.get("sources") or {}).get("sources") or [] if isinstance(s, dict)} | set(data) | tables
    found: list[RuleInfo] = []
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        text = str(rule.get("text", ""))
        check = rule.get("check") or {}
        target = str(check.get("field", "")) if isinstance(check, dict) else ""
        why = ""
        if isinstance(check, dict) and check.get("kind") == "background_color":
            why = "global: the dashboard's background"
        elif check:  # a rule with a check is about its field: judged by that, not by the words of its text
            if target.lower() in {c.lower() for c in columns}:
                why = f"its check is on column '{target}'"
            elif target and _mentions(title, [target]):
                why = f"its check is on '{target}', the measure this component's title names"
        elif _mentions(text, [component_id]):
            why = f"its text names this component '{component_id}'"
        elif named := _mentions(text, sorted(tables)):
            why = f"its text names table '{named}'"
        elif named := _mentions(text, sorted(columns)):
            why = f"its text names column '{named}'"
        elif not _mentions(text, sorted(every_column | every_table)):
            why = "global: names no table or column"
        if why:
            found.append(RuleInfo(str(rule.get("id", "")), text, why))
    return found


def _workspace_columns(files: Mapping[str, Any], tables: Mapping[str, Any]) -> set[str]:
    """Every column the workspace has: in the data, and as sources.yaml declares them."""
    columns = {str(c) for t in tables.values() for c in t.column_names}
    for source in (files.get("sources") or {}).get("sources") or []:
        if isinstance(source, dict):
            columns |= {str(c) for c in source.get("columns") or {}}
    return columns


def _mentions(text: str, names: Sequence[str]) -> str | None:
    """The first of `names` that `text` contains as a whole word (case-insensitive)."""
    for name in names:
        if name and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE):
            return name
    return None


# --------------------------------------------------------------------------- the readable SQL


def inline(sql: str, params: Mapping[str, Any]) -> str:
    """The SQL with each `$name` replaced by its value as a literal: for people to read, never to run.

    The query itself always runs with the values bound as parameters (`lib.artifacts.render`, `lib.data.live`).
    """

    return PARAM_RE.sub(lambda m: _literal(params[m.group(1)]) if m.group(1) in params else m.group(0), sql)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"
