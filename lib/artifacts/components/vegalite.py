"""Vega-Lite as a file format: the version dashmem writes, checking a spec against its JSON Schema, and chart data.

Charts are written as Vega-Lite dicts directly (lib.artifacts.components.chart),
not through Altair: importing Altair and pandas and letting Altair build and
validate a chart cost a fresh `export --html` about 0.7 s of its 2 s. The
schema is still the official one, the file the installed Altair ships
(`altair/vegalite/v6/schema/vega-lite-schema.json` for Altair 6), read as a file without
importing Altair. A spec found valid is remembered as an empty file in the
cache (lib.memory.schemas.valid_marker), so a cron export whose charts were
checked before imports no jsonschema and loads no schema.

Chart data is an Arrow table: the page sends it to the browser as Arrow, and
the standalone export inlines it as rows of JSON values (`json_rows`).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import hashlib
import importlib.util
import json
import math
import re
from array import array
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...memory.schemas import jsonschema_stamp, remember_valid, valid_marker


@functools.cache
def _schema_folder() -> Path:
    """Where the installed Altair keeps the Vega-Lite schema it writes for (`vegalite/v5/schema`, `vegalite/v6/schema`)."""
    spec = importlib.util.find_spec("altair")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("Altair is not installed: its Vega-Lite schema checks every chart (pip install -r requirements.txt)")
    root = Path(next(iter(spec.submodule_search_locations))) / "vegalite"
    found = [p.parent for p in root.glob("v*/schema/vega-lite-schema.json") if p.parent.parent.name[1:].isdigit()]
    if not found:
        raise RuntimeError(f"no Vega-Lite schema under {root}")
    return max(found, key=lambda folder: int(folder.parent.name[1:]))


@functools.cache
def version() -> str:
    """The Vega-Lite version specs are written for and checked against, such as "6.4.1"."""
    text = (_schema_folder() / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^SCHEMA_VERSION = "v([0-9.]+)"', text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no SCHEMA_VERSION in {_schema_folder() / '__init__.py'}")
    return found.group(1)


def schema_url() -> str:
    return f"https://vega.github.io/schema/vega-lite/v{version()}.json"


@functools.cache
def _fingerprint() -> bytes:
    path = _schema_folder() / "vega-lite-schema.json"
    return hashlib.sha256(f"vega-lite|{path}|{path.stat().st_mtime_ns}|{jsonschema_stamp()}".encode()).digest()


@functools.cache
def _validator() -> Any:
    from jsonschema import validators

    schema = json.loads((_schema_folder() / "vega-lite-schema.json").read_text(encoding="utf-8"))
    return validators.validator_for(schema)(schema)


def problem(spec: dict[str, Any]) -> str | None:
    """Why a Vega-Lite spec (data by name, no rows) is not valid, in one line; None when it is.

    A valid spec is remembered without its description and its data's name, texts the schema takes whatever
    they say, so the same chart over new data is known valid too.
    """
    marker = valid_marker(_fingerprint(), {k: v for k, v in spec.items() if k not in ("description", "data")})
    if marker is not None and marker.exists():
        return None
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(spec))
    if error is None:
        if marker is not None:
            remember_valid(marker)
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


# --------------------------------------------------------------------------- a chart and its data


@dataclass(frozen=True, eq=False)
class Drawn:
    """A chart: its Vega-Lite spec (data by name), and that data as the Arrow table the page sends."""

    spec: dict[str, Any]  # `data: {name}`, no `datasets`
    name: str
    data: pa.Table

    def streamlit_spec(self) -> dict[str, Any]:
        """A fresh copy for st.vega_lite_chart, which moves `datasets` out of the spec it is given; the data as
        Arrow IPC bytes, which it sends as they are (written once per chart, not on every rerun)."""
        return {**copy.deepcopy(self.spec), "datasets": {self.name: self.arrow_bytes}}

    def inline(self) -> dict[str, Any]:
        """The spec with its rows inlined as JSON values, as a standalone file carries it."""
        return {**copy.deepcopy(self.spec), "datasets": {self.name: json_rows(self.data)}}

    @functools.cached_property
    def arrow_bytes(self) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.data.schema) as writer:
            writer.write_table(self.data)
        return sink.getvalue().to_pybytes()


def draw(spec: dict[str, Any], table: pa.Table) -> tuple[Drawn, dict[str, Any]]:
    """The chart of `spec` (Vega-Lite without data) over `table` (as `chart_table` gives it), checked against the
    schema, and its spec with the rows inlined (what the export writes); ValueError when the spec is not valid."""
    rows = json_rows(table)
    name = dataset_name(rows)
    full = {"$schema": schema_url(), "data": {"name": name}, **spec}
    found = problem(full)
    if found:
        raise ValueError(f"not a valid Vega-Lite chart: {found}")
    return Drawn(full, name, table), {**full, "datasets": {name: rows}}


# --------------------------------------------------------------------------- chart data


def field(column: str) -> str:
    """A column's name as a Vega-Lite field: a dot or a bracket would read as a nested field ("avg. price" as
    the member " price" of "avg": no value at all, an empty chart), so they are escaped."""
    return re.sub(r"([.\[\]])", r"\\\1", column)


def measure_type(kind: pa.DataType) -> str:
    """The Vega-Lite type a column of this Arrow type gets when the spec names none (as Altair inferred it)."""
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "quantitative"
    if is_temporal(kind):
        return "temporal"
    return "nominal"


def is_temporal(kind: pa.DataType) -> bool:
    return pa.types.is_date(kind) or pa.types.is_timestamp(kind)


def is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def chart_table(table: pa.Table) -> pa.Table:
    """The table a chart draws: decimals as floats (a chart needs no exact decimals; the browser has none) and
    dates as timestamps at midnight, which the browser reads as local midnight, as it reads the export's rows."""
    columns = []
    for column, field in zip(table.columns, table.schema):
        if pa.types.is_decimal(field.type):
            column = pc.cast(column, pa.float64())
        elif pa.types.is_date(field.type):
            column = pc.cast(column, pa.timestamp("ms"))
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def strings(values: list[str | None]) -> pa.Array:
    """An Arrow string array of Python strings (None as null), built from its buffers.

    `pa.array` on a Python list imports pandas (pyarrow checks whether the list is a pandas object), 0.3 s
    of a fresh export that otherwise needs no pandas.
    """
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = array("i", [0])
    for item in encoded:
        offsets.append(offsets[-1] + len(item))
    nulls = sum(v is None for v in values)
    validity = None
    if nulls:
        bits = bytearray((len(values) + 7) // 8)
        for i, v in enumerate(values):
            if v is not None:
                bits[i // 8] |= 1 << (i % 8)
        validity = pa.py_buffer(bytes(bits))
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded)), validity, nulls)


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as JSON values: NaN and infinities as null, times as ISO text without a zone when they have none
    ("2026-11-22T00:00:00", which browsers read as local time), anything else JSON lacks as its text."""
    names = table.column_names
    columns = [[json_value(v) for v in column.to_pylist()] for column in table.columns]
    return [dict(zip(names, values)) for values in zip(*columns)]


def json_value(value: Any) -> Any:
    """A query value as JSON has it (see `json_rows`)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time()).isoformat()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)  # times of day, intervals, bytes


def dataset_name(rows: list[dict[str, Any]]) -> str:
    """A name for inline data made from its content, as Altair names it, so the same rows keep the same name."""
    return "data-" + hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:32]
