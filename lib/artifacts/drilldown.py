"""Show rows: the rows of the table behind a component, or behind the marks selected in a chart.

A component's query aggregates rows of one table; "Show rows" lists those
rows, at most `CAP` of them, with how many match in all. The rows' SQL is
derived from the component's own query the way `lib.artifacts.explain` derives its
sample (`SELECT * FROM <its table> WHERE <its WHERE>`, only for a single-table
query without joins, subqueries, CTEs or HAVING; otherwise it says why not).

For a chart with `select` (a cross-filter), the rows are those behind the
selected marks: the chart's query runs without the filters it drives (as the
chart is drawn, lib.artifacts.components.chart), and each selected field adds a
condition `<the expression the query outputs as that field> = <a chosen
value>`. Every value travels as a bound parameter; `readable` inlines them
for people to read, never to run. The queries run like every dashboard query,
through the workspace's query engine (`lib.data.engine`): in the sandbox, or read-only in a live
source's database. Over an earlier load (`lib.artifacts.time_travel`) they run through
that load's engine, which refuses a live source: its database has no earlier rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.errors import DashmemError
from ..data.engine import Engine
from ..data.standins import parse as _parse
from ..memory import spec as specs
from .explain import _not_derivable, inline
from .render import filter_params, filter_states

if TYPE_CHECKING:
    import pyarrow as pa

CAP = 200  # rows shown; the count says how many match
MAX_CAP = 5000  # the most rows anyone may ask for (`rows --max-rows`): they are held in memory as Python values
MARK_PARAM = "__mark_{i}_{j}"  # parameter names of the selected values: no filter id starts with "__" (schema: id)


class DrilldownError(DashmemError, ValueError):
    """The component asked about does not exist, or its rows cannot be derived; the message says why."""


@dataclass
class Drilldown:
    component: str
    sql: str  # runs, with `params` bound
    params: dict[str, Any]
    readable: str  # the values inlined, for reading only
    marks: dict[str, list[Any]]  # selected field -> its chosen values; empty: every row behind the component
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    matching: int = 0  # rows the WHERE keeps, of which `rows` are the first CAP at most

    @property
    def capped(self) -> bool:
        return self.matching > len(self.rows)


def rows_sql(sql: str, marks: Mapping[str, Sequence[Any]] | None = None) -> tuple[str, str, dict[str, Any]]:
    """(rows SQL, count SQL, the marks' parameters) for the rows behind a query's values, or behind some of its marks.

    `marks` maps an output column of the query to the values selected; a row
    is kept when, for every field, the expression behind it equals one of them.
    """
    import sqlglot
    from sqlglot import exp

    try:
        tree = _parse(sql)
    except DashmemError:
        raise DrilldownError("the query could not be read to derive the rows behind it") from None
    reason = _not_derivable(tree)
    if reason:
        raise DrilldownError(f"the rows behind it cannot be derived: {reason}")
    source = tree.args.get("from_") or tree.args.get("from")
    assert source is not None  # _not_derivable says so otherwise
    base = exp.select("*").from_(source.this.copy())
    where = tree.args.get("where")
    if where is not None:
        base = base.where(where.this.copy())
    params: dict[str, Any] = {}
    for i, (name, values) in enumerate((marks or {}).items()):
        behind = _expression_of(tree, name)
        if not values:
            continue
        names = [MARK_PARAM.format(i=i, j=j) for j in range(len(values))]
        params.update(zip(names, values))
        text = " OR ".join(f"{behind.sql(dialect='duckdb')} = ${n}" for n in names)
        base = base.where(exp.paren(sqlglot.condition(text, dialect="duckdb")))
    count = base.select(exp.Count(this=exp.Star()), append=False)
    return base.sql(dialect="duckdb"), count.sql(dialect="duckdb"), params


def _expression_of(tree: Any, name: str) -> Any:
    """The expression over the table's row that the query outputs as column `name` (not an aggregate)."""
    from sqlglot import exp

    for projection in tree.expressions:
        if projection.alias_or_name.lower() == name.lower() and not isinstance(projection, exp.Star):
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            if any(True for _ in inner.find_all(exp.AggFunc, exp.Window)):
                raise DrilldownError(f"'{name}' is computed over many rows (an aggregate), so no row has it")
            return inner.copy()
    if any(isinstance(p, exp.Star) for p in tree.expressions):
        return exp.column(name)
    raise DrilldownError(f"'{name}' is not a column of the query")


def component(dashboard: Mapping[str, Any], component_id: str) -> dict[str, Any]:
    """The dashboard's component `component_id`; DrilldownError naming the known ones when there is none."""
    components = {c.get("id"): c for c in dashboard.get("components") or []}
    if component_id not in components:
        known = ", ".join(str(c) for c in components) or "none"
        raise DrilldownError(f"no component {component_id!r} in this dashboard; its components: {known}")
    return components[component_id]


def drilldown(
    files: Mapping[str, Any],
    tables: Mapping[str, pa.Table],
    version: str,
    component_id: str,
    chosen_filters: Mapping[str, Any] | None = None,
    *,
    workspace_path: Any = None,
    cap: int = CAP,
    engine: Engine | None = None,
) -> Drilldown:
    """The rows behind component `component_id` of `files["dashboard"]` over `tables` (the data of `version`).

    For a chart with `select`, the rows behind its selected marks (its driven
    filters' chosen values); with none chosen, the rows behind the whole chart.
    `engine` runs the queries instead of the workspace's: over an earlier load it is
    `AsOf.engine`, which refuses a live source's (`NoEarlierData`), since its
    database holds today's rows, not that load's.
    """

    if not 1 <= cap <= MAX_CAP:
        raise DrilldownError(f"the rows shown must be between 1 and {MAX_CAP:,} (asked for {cap:,}); the count says how many match in all")
    dashboard = files.get("dashboard") or {}
    comp = component(dashboard, component_id)
    if not isinstance(comp.get("query"), str):
        raise DrilldownError(f"component {component_id!r} has no single query (a text block's figures come from several)")
    injection = (files.get("output") or {}).get("data_injection") or {}
    timeout_s = float(injection.get("query_timeout_s", 10))
    runner = Engine.of(engine, files, tables, version, workspace_path)
    states = filter_states(dashboard, tables, version, runner, timeout_s)
    params = filter_params(states, chosen_filters or {})
    pairs = specs.selections(comp)
    marks = {name: specs.selection_values(params.get(fid)) for _, name, fid in pairs}
    marks = {name: values for name, values in marks.items() if values}
    for _, _, fid in pairs:
        params.pop(fid, None)  # as the chart is drawn: its own query does not narrow by the filters it drives
    sql, count_sql, mark_params = rows_sql(comp["query"], marks)
    bound = {**specs.params_for(sql, params), **mark_params}
    out = Drilldown(component_id, sql, bound, inline(sql, bound), marks)
    result = runner.run(sql, bound, max_rows=cap, timeout_s=timeout_s)
    counted = runner.run(count_sql, {**specs.params_for(count_sql, params), **mark_params}, max_rows=1, timeout_s=timeout_s)
    out.columns = list(result.columns)
    out.rows = result.table.to_pylist()
    out.matching = int(counted.rows[0][0])
    return out
