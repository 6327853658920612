"""The shapes of the workspace files as loaded, for the type checker: dashboard.yaml, report.yaml, sources.yaml.

A file is validated against its JSON Schema (schemas/<kind>.schema.json) when it is loaded, and from there
on travels as these TypedDicts (`Workspace.dashboard`, `.report`, `.sources`), so basedpyright sees a
misspelt field or a wrong type where the spec is read. They are plain dicts at run time: nothing is copied
or converted. The schema stays the one definition of what is allowed (enums, patterns, defaults, which
fields each component or source type takes): these list the same fields, and tests/memory/test_shapes.py fails
when a schema gains or loses a field that its shape does not.

A component's or a source's fields depend on its `type`; one TypedDict holds every type's fields (all
optional but the ones every type has), since callers pick the type from the value, not from the class.
"""

from typing import Any, Iterator, Mapping, Required, TypedDict, cast

# --------------------------------------------------------------------------- dashboard.yaml


class Threshold(TypedDict):
    op: str
    value: float
    color: str


class Channel(TypedDict, total=False):
    """One encoding channel of a chart (x, y, color, tooltip ...), as Vega-Lite names its fields."""

    field: str
    type: str
    title: str
    aggregate: str
    timeUnit: str
    sort: Any
    format: str
    stack: Any
    scale: dict[str, Any]
    thresholds: list[Threshold]


class Selection(TypedDict):
    """A chart's clickable marks: which field a click picks and which filter it sets."""

    field: str
    filter: str


class FilterSpec(TypedDict, total=False):
    """A dashboard filter, or a report parameter."""

    id: Required[str]
    type: Required[str]
    label: str
    options_query: str
    bounds_query: str


class _KindFields(TypedDict, total=False):
    """The fields of each component kind (lib/artifacts/components/ has one module each)."""

    # kpi
    query: str
    value_column: str
    compare_column: str
    compare_label: str
    delta: Any
    format: str
    thresholds: list[Threshold]
    # chart
    mark: Any  # a mark name or a Vega-Lite mark object
    encoding: dict[str, Any]  # channel -> Channel (tooltip: a list of them)
    height: int
    select: Selection
    # table
    max_rows: int
    columns: dict[str, dict[str, Any]]  # column -> its label, format, thresholds
    # text
    markdown: str
    queries: dict[str, str]


class ComponentSpec(_KindFields, total=False):
    """A component of any kind (`type`: kpi, chart, table, text)."""

    id: Required[str]
    type: Required[str]
    title: str


class DashboardSpec(TypedDict, total=False):
    title: Required[str]
    description: str
    theme: dict[str, Any]
    filters: list[FilterSpec]
    components: Required[list[ComponentSpec]]
    layout: list[list[Any]]  # rows of component ids, or {id, width}


# --------------------------------------------------------------------------- report.yaml


class SectionSpec(_KindFields, total=False):
    """A report section in reading order: a heading, prose, a row of KPIs, a page break, or a component
    (chart, table, text) with the fields a dashboard component has."""

    type: Required[str]
    id: str
    title: str
    text: str  # heading
    level: int  # heading
    components: list[ComponentSpec]  # kpis


class ReportSpec(TypedDict, total=False):
    title: Required[str]
    description: str
    theme: dict[str, Any]
    parameters: list[FilterSpec]
    queries: dict[str, str]  # named queries the prose's placeholders read
    sections: Required[list[SectionSpec]]


# --------------------------------------------------------------------------- sources.yaml


class RetrySpec(TypedDict, total=False):
    attempts: int
    backoff_s: float
    max_backoff_s: float


class TlsSpec(TypedDict, total=False):
    client_cert: str
    client_key: str
    client_key_password: str  # a secret reference, never a value
    ca_bundle: str


class SourceSpec(TypedDict, total=False):
    """A source of any type (`type`: csv, excel, parquet, sql, rest, mcp; lib/data/connectors/ has one module each)."""

    name: Required[str]
    type: Required[str]
    description: str
    sample_values: bool
    columns: dict[str, str]  # pinned column types
    # files: csv, excel, parquet
    path: str
    delimiter: str
    header: Any
    encoding: str
    null_values: list[str]
    thousands: str
    decimal: str
    sheet: Any
    # sql
    url: str
    password: str  # a secret reference, never a value
    query: str
    table: str
    mode: str  # snapshot | live
    cache_ttl_s: float
    change_marker: dict[str, Any]
    incremental: dict[str, Any]
    timeout_s: float
    query_timeout_s: float
    retry: RetrySpec
    allow_truncated: bool  # rest, mcp
    columns_path: str  # rest, mcp
    # rest
    method: str
    params: dict[str, Any]
    body: Any
    headers: dict[str, str]
    secret_headers: dict[str, str]  # header -> secret reference
    records_path: str
    pagination: dict[str, Any]
    tls: TlsSpec
    # mcp
    command: list[str]
    env: dict[str, str]
    tool: str
    arguments: dict[str, Any]
    resource: str
    result_format: str  # json | python | markdown | key_value | csv | tsv
    column_names: list[str]


# `from` is a Python keyword: the functional form names the field as the file does.
Relationship = TypedDict("Relationship", {"from": str, "to": str})


class SourcesFile(TypedDict, total=False):
    sources: Required[list[SourceSpec]]
    relationships: list[Relationship]
    rejected_relationships: list[Relationship]


# --------------------------------------------------------------------------- walking a report's sections


REPORT_COMPONENT_SECTIONS = ("chart", "table")  # report sections that are themselves a dashboard component


def report_components(report: ReportSpec | Mapping[str, Any]) -> Iterator[tuple[tuple, ComponentSpec]]:
    """(path in report.yaml, spec) of every dashboard component a report holds: KPI cards, charts, tables."""
    for i, section in enumerate(report.get("sections") or []):
        if not isinstance(section, Mapping):
            continue
        if section.get("type") in REPORT_COMPONENT_SECTIONS:
            yield ("sections", i), cast(ComponentSpec, section)  # a chart or table section is a component, id included (its schema)
        elif section.get("type") == "kpis":
            for j, card in enumerate(section.get("components") or []):
                if isinstance(card, Mapping):
                    yield ("sections", i, "components", j), card


COMPONENT_DEFS = ("dashboard#component", "dashboard#kpi", "dashboard#chart", "dashboard#table", "dashboard#text")
SCHEMA_FIELDS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "dashboard": (DashboardSpec, ("dashboard#",)),
    "component": (ComponentSpec, COMPONENT_DEFS),
    "filter": (FilterSpec, ("dashboard#filter",)),
    "channel": (Channel, ("dashboard#channel",)),
    "threshold": (Threshold, ("dashboard#threshold",)),
    "select": (Selection, ("dashboard#select",)),
    "report": (ReportSpec, ("report#",)),
    "section": (SectionSpec, ("report#section", "report#heading", "report#prose", "report#kpis", *COMPONENT_DEFS)),
    "sources": (SourcesFile, ("sources#",)),
    "source": (SourceSpec, ("sources#source", "sources#csv", "sources#excel", "sources#parquet", "sources#sql", "sources#rest", "sources#mcp")),
    "retry": (RetrySpec, ("sources#retry",)),
    "tls": (TlsSpec, ("sources#tls",)),
    "relationship": (Relationship, ("sources#relationship",)),
}
