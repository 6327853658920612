"""What a live query may reach: its one table, and functions that only compute over its rows.

A live query runs in the source's database with the source's own credentials (`lib.data.live`), so
whatever the database lets that role do, a viewer could reach through a dashboard filter or the
model's `run_sql`. Counting tables is not enough: PostgreSQL's `query_to_xml('select ...')` runs SQL
given as text, `pg_ls_dir('/')` is a table in FROM without a name, `pg_read_file`, `lo_import` and
MariaDB's `LOAD_FILE` read server files, `dblink` opens connections, `pg_advisory_lock` and
`GET_LOCK` hold locks past the query on a pooled connection, `set_config` changes settings and
`pg_sleep` ties up a connection. `check` refuses all of these before anything is sent.

It is an allow-list, not a deny-list, because a deny-list of server functions is never complete (each
release and extension adds more, and names differ by dialect): a function is allowed when sqlglot
knows it as a standard function (one of its typed expressions: arithmetic, text, dates, aggregates,
windows), which it then writes in the source's dialect, except the few of those that read files
(`DENIED_TYPED`), or when it is one of the few untyped names in `ALLOWED_UNTYPED`. Every other name
(sqlglot's `Anonymous`: every `pg_*`, `query_to_xml`, `dblink`, `lo_*`, `set_config`,
`current_setting`, `get_lock`, `sleep`, `load_file`; Spark's `reflect`, `java_method` and `try_reflect`,
which call any Java method on the server (one call of `System.exit` stops it), `read_files`, `input_file_name`,
`aes_decrypt`; Databricks' `secret`; and any function not yet invented) is refused,
naming it. A table function in FROM counts as a table and is refused, except the two that only make
rows (`generate_series`, `unnest`). Every table a query names must be the live source's own (or a CTE
of the query), so the catalogue (`pg_catalog`, `information_schema`, `pg_stat_*`, `mysql.*`) is out of
reach by name too.

This is the first line; the database role is the last (docs/security.md, "Live sources"): give a live
source a role that can read its one table and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sandbox import QueryRefused

if TYPE_CHECKING:
    from sqlglot import exp

# Functions sqlglot does not type (it keeps them as `Anonymous`) that only compute over their arguments,
# in DuckDB (where dashboards are written) and in the source's dialect. Lower case.
ALLOWED_UNTYPED = frozenset(
    {
        "date_part",
        "datepart",
        "age",
        "now",
        "to_date",
        "iff",
        "nullif",
        "lpad",
        "rpad",
        "repeat",
        "strpos",
        "position",
        "left",
        "right",
        "replace",
        "translate",
        "initcap",
        "btrim",
        "char_length",
        "character_length",
        "octet_length",
        "chr",
        "ascii",
        "cardinality",
        "to_json",
        "printf",
        "width_bucket",
        "ceiling",
        "mod",
        "power",
        "pow",
        "pi",
        "degrees",
        "radians",
        "sin",
        "cos",
        "tan",
        "log10",
        "log2",
        "cbrt",
        "factorial",
        "gcd",
        "lcm",
        "isfinite",
        "isnan",
        "isinf",
        "justify_days",
        "justify_hours",
        "make_timestamp",
        "date_diff",
        "dayname",
        "monthname",
        "last_day",
        "dayofmonth",
        "dayofyear",
        "weekday",
        "yearweek",
        "ifnull",
        "nvl",
    }
)

# Functions in FROM that only make rows from their arguments: a date spine, an array's elements.
ROW_MAKERS = ("GenerateSeries", "Unnest", "Explode", "ExplodeOuter", "Posexplode")

# sqlglot's typed functions that reach outside the query's rows: DuckDB's file readers and writers, and the
# server's facts about itself and the session (its version, users, roles, databases, schemas, address).
TIME_NOW = frozenset({"CurrentDate", "CurrentDatetime", "CurrentTime", "CurrentTimestamp", "CurrentTimestampLTZ", "CurrentTimezone"})
DENIED_TYPED = ("ReadCSV", "ReadParquet", "ToFile", "SessionUser", "Secret")  # Secret: Databricks' secret(scope, key)


def _denied(kind: str) -> bool:
    return kind in DENIED_TYPED or (kind.startswith("Current") and kind not in TIME_NOW)


def check(tree: exp.Expr, source_name: str) -> None:
    """Refuse a live query on `source_name` that names another table or calls a function outside the allow-list."""
    from sqlglot import exp

    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        made = table.this
        if isinstance(made, exp.Func):
            if type(made).__name__ in ROW_MAKERS:
                continue
            raise QueryRefused(f"a live query reads only its table {source_name}; {_called(made)} in FROM is a table function, which is not allowed")
        name = table.name.lower()
        if name == source_name.lower() or (name in ctes and not table.db):
            continue
        shown = ".".join(part for part in (table.catalog, table.db, table.name) if part)
        raise QueryRefused(f"a live query reads only its table {source_name}, not {shown}")
    for func in tree.find_all(exp.Func):
        kind = type(func).__name__
        if isinstance(func, exp.Anonymous):
            if str(func.name).lower() not in ALLOWED_UNTYPED:
                raise QueryRefused(f"{_called(func)} is not allowed in a live query: only functions that compute over the query's own rows are")
        elif _denied(kind):
            raise QueryRefused(f"{_called(func)} is not allowed in a live query: it reads files or the server's own settings")
    for cast in tree.find_all(exp.Cast):
        if cast.to.sql().lower().startswith("reg"):  # PostgreSQL's object-name types look names up in the catalogue
            raise QueryRefused(f"a cast to {cast.to.sql()} is not allowed in a live query: it looks names up in the database's catalogue")


def _called(func: exp.Func) -> str:
    from sqlglot import exp

    name = func.name if isinstance(func, exp.Anonymous) else func.sql(dialect="duckdb").split("(")[0]  # as the query wrote it
    return f"{name.strip().lower()}()"
