"""Fuzzing the readers of untrusted files (issue #13): the YAML loader, the CSV connector, source validation.

Whatever the input, the answer is a result or a diagnostic (a YAML error
always with `file:line`), never a traceback. A hang shows as this file not
finishing. Example counts are kept small so the file runs in seconds; the
examples differ from run to run (no database is written into the checkout).
"""

from __future__ import annotations

import csv
import io
import math
import re
import tempfile
from pathlib import Path

import pyarrow as pa
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from lib.core.diagnostics import Diagnostic
from lib.data.connectors.base import FetchContext, SourceError, fetch
from lib.memory import schemas, workspace, yamlio
from lib.memory.yamlio import Document, YamlSyntaxError, parse

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "dashmem-hypothesis")  # its caches stay out of the checkout
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEW = settings(FUZZ, max_examples=60)

# Text that is mostly YAML punctuation, so the parser gets deep into odd states.
YAML_ALPHABET = ":-[]{}&*!|>'\"#?,<=%@`~ \n\t\r" + "abcxyz019.eE+_" + "é€\x85\u2028\x00\x07\ufeff"
yaml_like_text = st.text(alphabet=YAML_ALPHABET, max_size=300)
any_text = st.text(max_size=300)  # every code point but lone surrogates

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(
        [
            "<<",
            "=",
            "~",
            "null",
            "yes",
            "no",
            "2026-01-01",
            "1e3",
            "0x1F",
            "*a",
            "&a",
            "!x",
            "- a",
            "a: b",
            "#",
            "|",
            ">",
            "'",
            '"',
            "\n",
            " lead",
            "trail ",
            "a\nb",
            "a \nb",
            "\x85",
            "\u2028",
            "\t",
        ]
    ),
)
keys = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none())
json_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=20), inner, max_size=5)), max_leaves=30)
yaml_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)), max_leaves=30)


def lines_in(text: str) -> int:
    return len(text.splitlines()) + 2


def check_parse(text: str) -> Document | None:
    """parse() gives a document or a YamlSyntaxError with a line inside the text; nothing else."""
    try:
        return parse(text)
    except YamlSyntaxError as exc:
        assert isinstance(exc.line, int) and 1 <= exc.line <= lines_in(text), (exc.kind, exc.line, str(exc))
        assert str(exc)
        return None


@FUZZ
@given(st.one_of(yaml_like_text, any_text))
def test_random_text_parses_or_fails_with_a_line(text):
    check_parse(text)


@FEW
@given(st.one_of(yaml_like_text, st.binary(max_size=300)), st.sampled_from(list(workspace.FILES)))
def test_random_files_load_as_diagnostics_with_file_and_line(content, kind):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        folder.mkdir()
        file = folder / workspace.FILES[kind]
        if isinstance(content, bytes):
            file.write_bytes(content)
        else:
            file.write_text(content, encoding="utf-8")
        ws, diags = workspace.load(folder)
    for d in diags:
        assert isinstance(d, Diagnostic) and d.format()
        if d.file and d.file.endswith(file.name) and d.id.startswith(("yaml.", "file.encoding")):
            assert d.line and d.location.endswith(f"{file.name}:{d.line}"), d


@FUZZ
@given(yaml_like, st.booleans(), st.sampled_from([None, False, True]), st.integers(min_value=2, max_value=8))
def test_random_yaml_documents_read_as_pyyaml_reads_them(data, unicode, flow, indent):
    text = yaml.safe_dump(data, allow_unicode=unicode, default_flow_style=flow, indent=indent, sort_keys=False)
    # PyYAML's reading is the reference (its dumper does not always write what it was given: a raw NEL, say)
    document = check_parse(text)
    assert document is not None and document.data == yaml.load(text, Loader=yamlio._SafeLoaderNoDates)


@FUZZ
@given(json_like)
def test_the_canonical_text_reads_back_as_the_data(data):
    assert parse(yamlio.dump(data)).data == data  # parse refuses anchors, so this also says none was written


@FEW
@given(st.recursive(scalars, lambda inner: st.lists(inner, min_size=1, max_size=3), max_leaves=20))
def test_documents_with_anchors_are_refused_at_the_anchor(data):
    shared = [data, "x"]
    text = yaml.dump({"a": shared, "b": shared}, Dumper=yaml.SafeDumper)  # the dumper writes &id001 and *id001
    try:
        parse(text)
    except YamlSyntaxError as exc:
        assert exc.kind == "anchor" and exc.line == 1  # `a: &id001`
    else:
        raise AssertionError("anchors were accepted")


# ------------------------------------------------------------------ CSV

cell = st.one_of(
    st.text(max_size=12),
    st.integers().map(str),
    st.floats(allow_nan=True).map(str),
    st.sampled_from(["", "NULL", "1/2/2026", "2026-01-02", "12/31/26 10:00", '"', ",", ";", "\n", "Köln", "\ufeff"]),
)


def fetch_file(data: bytes, **settings_):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data.csv").write_bytes(data)
        try:
            table = fetch({"name": "t", "type": "csv", "path": "data.csv", **settings_}, FetchContext(workspace_path=Path(tmp)))
        except SourceError as exc:
            assert "data.csv" in str(exc) or "source 't'" in str(exc)
            return None
    assert isinstance(table, pa.Table)
    assert not [f for f in table.schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)], table.schema
    return table


@FEW
@given(
    st.binary(max_size=400),
    st.sampled_from([{}, {"encoding": "utf-8"}, {"encoding": "latin-1"}, {"encoding": "utf-16"}, {"header": False}, {"delimiter": ";"}]),
)
def test_random_bytes_load_as_text_or_fail_as_a_source_error(data, settings_):
    fetch_file(data, **settings_)


BYTES_REPR = re.compile(r"b'.*'|b\".*\"", re.S)  # how Python shows bytes: b'K\xf6ln'


@FEW
@given(
    st.lists(st.lists(cell, min_size=1, max_size=5), min_size=1, max_size=12),
    st.sampled_from(["utf-8", "cp1252", "utf-16"]),
    st.sampled_from([",", ";", "\t", "|"]),
    st.booleans(),
)
# A file whose header shows no delimiter is read with commas, giving the text value 'b"': text, not bytes.
@example(rows=[[""], ["", "\nb"]], encoding="utf-8", delimiter=";", declare=False)
def test_random_rows_load_as_text_or_fail_as_a_source_error(rows, encoding, delimiter, declare):
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    data = out.getvalue().encode(encoding, errors="replace")
    table = fetch_file(data, **({"encoding": {"cp1252": "latin-1"}.get(encoding, encoding)} if declare else {}))
    if table is not None:
        for column in table.columns:
            if pa.types.is_string(column.type):
                assert all(v is None or isinstance(v, str) and not BYTES_REPR.fullmatch(v) for v in column.to_pylist())


# ------------------------------------------------------------------ source validation

SOURCE_FIELDS = sorted(
    {
        name
        for kind in ("csv", "sql", "rest", "mcp")
        for name in yamlio.declared_properties(schemas.load_schema("sources")["$defs"][kind], schemas.load_schema("sources"))
    }
    | {"name", "type", "description", "sample_values", "columns"}
)
# A literal credential, placed only where a credential goes: it must never show in a diagnostic.
SECRET = "hunter2SECRET"
references = st.sampled_from(["env:X", "env:DASHMEM_COOKIE_KEY", "secrets:auth.cookie_key", "secrets:x.y"])
credential_name = st.sampled_from(["api_key", "Authorization", "X-Auth-Token", "Private-Token", "token", "password", "Cookie"])
credential = st.one_of(
    st.fixed_dictionaries({"password": st.sampled_from([SECRET, [SECRET], {"v": SECRET}])}),
    st.fixed_dictionaries(
        {
            "url": st.sampled_from(
                [
                    f"https://u:{SECRET}@h/x",
                    f"https://h/x?page=1&api_key={SECRET}",
                    f"ftp://h/?token={SECRET}",
                    f"postgresql://u:{SECRET}@h/db",
                    f"http://[::1/?key={SECRET}",
                    f"https://u:{SECRET}@[bad/x",
                ]
            )
        }
    ),
    st.sampled_from(["params", "headers", "secret_headers", "env", "body", "arguments"]).flatmap(
        lambda section: st.fixed_dictionaries(
            {section: st.dictionaries(credential_name, st.sampled_from([SECRET, [SECRET], {"v": [SECRET]}, 7]), min_size=1, max_size=2)}
        )
    ),
)
source_value = st.one_of(json_like, references, st.dictionaries(st.sampled_from(["page", "Accept", "status"]), st.one_of(references, scalars), max_size=3))
random_source = st.tuples(
    st.fixed_dictionaries({"name": st.sampled_from(["a", "orders", "Bad Name", ""]), "type": st.sampled_from(["csv", "sql", "rest", "mcp", "ftp"])}),
    st.dictionaries(st.one_of(st.sampled_from(SOURCE_FIELDS), st.text(max_size=10)), source_value, max_size=6),
    st.one_of(st.just({}), credential),
).map(lambda parts: {**parts[0], **parts[1], **parts[2]})


def assert_diagnostics(diags):
    for d in diags:
        assert isinstance(d, Diagnostic) and isinstance(d.message, str) and d.message and d.format()
        assert d.line is None or isinstance(d.line, int)


@FUZZ
@given(st.lists(random_source, max_size=3))
def test_random_sources_validate_to_diagnostics(sources):
    with tempfile.TemporaryDirectory() as tmp:
        diags = workspace.validate_content(Path(tmp) / "ws", {"sources": {"sources": sources}})
    assert_diagnostics(diags)
    assert SECRET not in "".join(d.format() for d in diags)  # a credential written out is never echoed


@FEW
@given(yaml_like, st.sampled_from(list(workspace.FILES)))
def test_random_documents_of_every_kind_validate_to_diagnostics(data, kind):
    assert_diagnostics(schemas.validate_document(kind, Document(data=data), workspace.FILES[kind]))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        folder.mkdir()
        (folder / workspace.FILES[kind]).write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        assert_diagnostics(workspace.load(folder)[1])


def test_the_fuzzers_cover_floats_that_yaml_spells_specially():
    """inf and -inf read back as written (nan is left out above: it never equals itself)."""
    for value in (math.inf, -math.inf, 1e300, -0.0):
        assert parse(yamlio.dump({"x": value})).data == {"x": value}
