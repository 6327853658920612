"""Relationships between tables: candidates found in the data, and the ones stewards declare or reject.

Candidates come from value containment, whatever the columns are called: the
distinct values of a column (the "many" side) fall inside a nearly unique
column of another table (the "one" side). Matching names are one more signal,
which relaxes the share of values that must be found. Containment is decided
on a sample: the distinct values of an evenly spaced sample of the many side's
rows are looked up in one pass over the one side's column (a hash of the small
sample, probed by every row), never a `SELECT DISTINCT` of both sides.

Value containment alone is evidence only where accidents are rare. Small
integers (quantities, ranks, day numbers) fall inside any id range, so an
integer pair needs enough distinct values and a many side that reaches near
both ends of the one side's range; two unique dense sequences (row numbers), or a short
sequence 1..N, are not a key pair on values alone (ids 1..100 hold every age).
Dates, times, years, booleans, floats and columns with a handful of values
are never keys on values alone; a one side must be (nearly)
unique, so many-to-many pairs are not proposed.

Stewards' decisions live in sources.yaml, which profile regeneration never
writes: `relationships` (declared joins, `{from: t.col, to: u.col}`, the many
side first) and `rejected_relationships` (pairs not to propose again).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..core.diagnostics import ERROR, Diagnostic, format_path

if TYPE_CHECKING:
    import pyarrow as pa

SAMPLE_ROWS = 4_096  # rows of the many side whose distinct values are looked up
MIN_CONTAINMENT = 0.9  # share of the sampled values found, on values alone
MIN_NAMED_CONTAINMENT = 0.5  # with matching names
UNIQUE_SHARE = 0.9  # a one side's distinct values per non-null row, by the profile's estimate (HyperLogLog: a few % off)...
UNIQUE_SAMPLE_SHARE = 0.98  # ...and among its sampled rows, which is exact below SAMPLE_ROWS rows
MIN_TEXT_DISTINCT = 3  # fewer distinct codes than this on either side match by accident
MIN_INTEGER_DISTINCT = 20  # small integer sets (quantities, months, ranks) fall inside any id range
MIN_DENSE_KEYS = 1_000  # a one side numbered 1..N with fewer keys holds any small count or score (hours per week, ages)
END_SLACK = 0.1  # an integer many side reaches within this share of the range of both ends of the one side's
MAX_KEY_LENGTH = 100  # longer text is prose, not a code
_DATE_TEXT = re.compile(r"^\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T]\d{1,2}:\d{2}.*)?\s*$")


# --------------------------------------------------------------------------- stewards' decisions


def split(ref: str) -> tuple[str, str]:
    """'orders.customer_id' -> ('orders', 'customer_id'); a column name may itself hold dots."""
    table, _, column = ref.partition(".")
    return table, column


def declared(sources: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The declared joins of a sources.yaml document, as written."""
    return [dict(r) for r in (sources or {}).get("relationships") or []]


def rejected(sources: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(from, to) of every rejected pair, in both orientations: a rejection is of the pair, not of a direction."""
    pairs = {(r["from"], r["to"]) for r in (sources or {}).get("rejected_relationships") or []}
    return pairs | {(b, a) for a, b in pairs}


def confirm(sources: Mapping[str, Any], left: str, right: str) -> dict[str, Any]:
    """sources.yaml content with `left -> right` declared (and no longer rejected)."""
    out = _without(sources, left, right)
    out["relationships"] = [*out.get("relationships", []), {"from": left, "to": right}]
    return _tidy(out)


def reject(sources: Mapping[str, Any], left: str, right: str) -> dict[str, Any]:
    """sources.yaml content with the pair rejected (and no longer declared)."""
    out = _without(sources, left, right)
    out["rejected_relationships"] = [*out.get("rejected_relationships", []), {"from": left, "to": right}]
    return _tidy(out)


def forget(sources: Mapping[str, Any], left: str, right: str) -> dict[str, Any]:
    """sources.yaml content with no decision on the pair: it may be proposed again."""
    return _tidy(_without(sources, left, right))


def without_table(sources: Mapping[str, Any], table: str) -> dict[str, Any]:
    """sources.yaml content without the decisions naming `table`: what removing its source leaves meaningful."""
    out = dict(sources)
    for key in ("relationships", "rejected_relationships"):
        out[key] = [r for r in out.get(key) or [] if table not in (split(r["from"])[0], split(r["to"])[0])]
    return _tidy(out)


def _without(sources: Mapping[str, Any], left: str, right: str) -> dict[str, Any]:
    pair = {(left, right), (right, left)}
    out = dict(sources)
    for key in ("relationships", "rejected_relationships"):
        out[key] = [r for r in out.get(key) or [] if (r["from"], r["to"]) not in pair]
    return out


def _tidy(sources: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sources.items() if v or k == "sources"}


def merged(profile: Mapping[str, Any] | None, sources: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What a reader should know: the declared joins (evidence "declared"), then the profile's
    candidates that are neither declared nor rejected, each as {left, right, overlap?, evidence}."""
    found = {(r["left"], r["right"]): r for r in (profile or {}).get("relationships") or []}
    out: list[dict[str, Any]] = []
    taken: set[tuple[str, str]] = set()
    for r in declared(sources):
        pair = (r["from"], r["to"])
        entry = {"left": r["from"], "right": r["to"], "evidence": "declared"}
        if pair in found and "overlap" in found[pair]:
            entry["overlap"] = found[pair]["overlap"]
        out.append(entry)
        taken |= {pair, (pair[1], pair[0])}
    skip = taken | rejected(sources)
    out.extend(dict(r) for pair, r in sorted(found.items()) if pair not in skip)
    return out


def reference_problems(sources_doc: Any, profile: Mapping[str, Any] | None, shown: str) -> list[Diagnostic]:
    """Declared and rejected pairs naming a table that is not a source, or (where the profile
    describes that table) a column the table does not have."""
    data = sources_doc.data
    names = sorted(s.get("name") for s in data.get("sources") or [] if s.get("name"))
    columns = {t["name"]: [c["name"] for c in t.get("columns") or []] for t in (profile or {}).get("tables") or []}
    out = []
    for key in ("relationships", "rejected_relationships"):
        for i, rel in enumerate(data.get(key) or []):
            for end in ("from", "to"):
                table, column = split(rel[end])
                path = (key, i, end)
                if table not in names:
                    message, allowed, check_id = (
                        f"{rel[end]!r}: no source makes a table {table!r}",
                        ", ".join(names) or "(no sources yet)",
                        "relationship.unknown_table",
                    )
                elif table in columns and column not in columns[table]:
                    message, allowed, check_id = (
                        f"{rel[end]!r}: table {table!r} has no column {column!r} (as last profiled)",
                        ", ".join(columns[table]),
                        "relationship.unknown_column",
                    )
                else:
                    continue
                out.append(Diagnostic(check_id, ERROR, message, shown, sources_doc.line_of(path), format_path(path), allowed))
    return out


# --------------------------------------------------------------------------- candidates from the data


def names_match(left_table: str, left: str, right_table: str, right: str) -> bool:
    """`customer_id` ~ `customer_id`, and `customer_id` ~ customers.`id` (the table's singular and the column)."""

    def norm(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())

    singular = {norm(right_table), norm(right_table).removesuffix("s"), norm(right_table).removesuffix("es")}
    return norm(left) == norm(right) or norm(left) in {t + norm(right) for t in singular}


class _Column:
    """One column as the detector sees it: its key kind and its profile's figures."""

    def __init__(self, table: str, profile: Mapping[str, Any], values: pa.ChunkedArray, rows: int):
        self.table, self.name, self.values, self.rows = table, profile["name"], values, rows
        self.nonnull = max(0, rows - values.null_count)
        self.distinct = min(int(profile.get("distinct") or 0), self.nonnull)
        self.min, self.max = profile.get("min"), profile.get("max")
        self.role = profile.get("role")
        self.kind = _kind(values, self.role)
        self._sample: pa.Array | None = None
        self._sampled = 0  # non-null rows in the sample

    @property
    def ref(self) -> str:
        return f"{self.table}.{self.name}"

    @property
    def unique(self) -> bool:
        if not (self.nonnull > 0 and self.distinct >= UNIQUE_SHARE * self.nonnull):
            return False
        return len(self.sample()) >= UNIQUE_SAMPLE_SHARE * self._sampled

    @property
    def dense(self) -> bool:
        """Unique integers filling their range, as row numbers do."""
        return self.kind == "integer" and self.unique and self.min is not None and self.max - self.min + 1 <= 1.05 * self.distinct

    def sample(self) -> pa.Array:
        """Distinct non-null values of evenly spaced rows, in the key's common type."""
        if self._sample is None:
            import pyarrow as pa
            import pyarrow.compute as pc

            values = self.values
            if self.rows > SAMPLE_ROWS:
                step = self.rows // SAMPLE_ROWS
                values = values.take(pa.array(range(0, step * SAMPLE_ROWS, step)))
            values = _normal(values).drop_null()
            self._sampled = len(values)
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            self._sample = pc.unique(values)  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        return self._sample


def _normal(values):
    """Keys compared in one type per kind: text as string, integers as int64, times as int64 microseconds."""
    import pyarrow as pa

    t = values.type
    if pa.types.is_dictionary(t):
        values, t = values.cast(t.value_type), t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return values.cast(pa.string())
    if pa.types.is_integer(t):
        return values.cast(pa.int64())
    if pa.types.is_date(t):
        return values.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
    if pa.types.is_timestamp(t):
        return values.cast(pa.timestamp("us")).cast(pa.int64())
    return values


def _kind(values: pa.ChunkedArray, role: str | None) -> str | None:
    """'text', 'integer' or 'time' for a possible key column, None for what is never one."""
    import pyarrow as pa

    t = values.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_integer(t):
        return "time" if role == "time" else "integer"  # a year column is a date, not a key
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        head = [v for v in values.slice(0, 200).to_pylist() if v]
        if head and sum(bool(_DATE_TEXT.match(v)) for v in head) >= 0.9 * len(head):
            return "time"
        if head and sum(len(v) for v in head) / len(head) > MAX_KEY_LENGTH:
            return None
        return "text"
    return None  # floats, booleans, lists...


def _plausible(many: _Column, one: _Column, named: bool) -> bool:
    """What the profiles' figures already decide, before any value is looked up."""
    if many.kind is None or many.kind != one.kind or not one.unique or many.distinct == 0:
        return False
    if one.role == "measure":
        # The side a key points to identifies its rows; an amount does not, whatever its name (Iowa's
        # net_generation -> net_generation). The many side may well be called a measure: a renamed key of
        # whole numbers (orders.buyer) reads as one to the classifier.
        return False
    if many.distinct > 1.05 * one.distinct:  # more values than the one side has (with the estimate's slack)
        return False
    if many.unique and one.distinct <= 1.05 * many.distinct and (many.table, many.name) > (one.table, one.name):
        return False  # one to one: reported once, the tables in name order
    if named:
        return True
    if many.kind == "time":
        return False  # dates and years line up with any calendar: not a key on values alone
    if many.kind == "text":
        return many.distinct >= MIN_TEXT_DISTINCT and one.distinct >= MIN_TEXT_DISTINCT
    if min(many.distinct, one.distinct) < MIN_INTEGER_DISTINCT or many.min is None or many.max is None or one.min is None or one.max is None:
        return False
    if many.min < one.min or many.max > one.max:
        return False
    # Keys referencing a table spread over its whole id range; ages, scores and counts bunch in a part of it.
    slack = END_SLACK * (one.max - one.min)
    if many.min - one.min > slack or one.max - many.max > slack:
        return False
    if one.dense and (many.dense or one.distinct < MIN_DENSE_KEYS):
        return False  # two row-number columns, or a short 1..N: contained, and meaningless
    return True


def candidates(tables: Mapping[str, pa.Table], profiles: Iterable[Mapping[str, Any]], skip: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """Candidate joins {left (many side), right (one side), overlap, evidence}, sorted; `skip` holds
    (left, right) pairs not to propose (rejected or already declared), either way round."""
    import pyarrow.compute as pc

    found = []
    for one, pairs in _plausible_pairs(tables, profiles, set(skip)):
        # One pass over the one side answers every many side's sample: its rows probe a hash of all the samples.
        everything = pc.unique(_concat([many.sample() for many, _ in pairs]))  # pyright: ignore[reportAttributeAccessIssue]  # pyarrow.compute makes its kernels at import: no stubs
        hits = pc.index_in(_normal(one.values), value_set=everything)  # pyright: ignore[reportAttributeAccessIssue]
        present = everything.take(pc.unique(hits.drop_null().combine_chunks()))  # pyright: ignore[reportAttributeAccessIssue]
        for many, named in pairs:
            sample = many.sample()
            if not len(sample):
                continue
            share = pc.sum(pc.is_in(sample, value_set=present)).as_py() / len(sample)  # pyright: ignore[reportAttributeAccessIssue]
            if share >= (MIN_NAMED_CONTAINMENT if named else MIN_CONTAINMENT) and (many.distinct > 1 or named):
                found.append({"left": many.ref, "right": one.ref, "overlap": float(f"{share:.6g}"), "evidence": "name and values" if named else "values"})
    return sorted(found, key=lambda r: (r["left"], r["right"]))


def pairs_to_check(tables: Mapping[str, pa.Table], profiles: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(many, one) of every pair whose values `candidates` looks up: what an exact check would have to compare."""
    return [(many.ref, one.ref) for one, pairs in _plausible_pairs(tables, profiles, set()) for many, _ in pairs]


def _plausible_pairs(
    tables: Mapping[str, pa.Table], profiles: Iterable[Mapping[str, Any]], skip: set[tuple[str, str]]
) -> list[tuple[_Column, list[tuple[_Column, bool]]]]:
    """Per one side, the many sides worth a look (and whether their names match), by the profiles' figures."""
    columns = [
        _Column(p["name"], c, tables[p["name"]].column(c["name"]), p["rows"])
        for p in profiles
        if p["name"] in tables and tables[p["name"]].num_rows
        for c in p["columns"]
        if c["name"] in tables[p["name"]].column_names
    ]
    columns = [c for c in columns if c.kind is not None]
    out = []
    for one in [c for c in columns if c.unique]:
        pairs = []
        for many in columns:
            if many.table == one.table or (many.ref, one.ref) in skip or (one.ref, many.ref) in skip:
                continue
            named = names_match(many.table, many.name, one.table, one.name)
            if _plausible(many, one, named):
                pairs.append((many, named))
        if pairs:
            out.append((one, pairs))
    return out


def _concat(arrays: list) -> Any:
    """Samples of one kind in one array; the value set of `index_in` may repeat values across samples."""
    import pyarrow as pa

    return pa.concat_arrays([a.cast(arrays[0].type) for a in arrays])
