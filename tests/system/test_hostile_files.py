"""Hostile workspace files (issue #13): they come from pull requests, and the CI gate and every page read them.

YAML bombs and oversized files are refused before anything is built, with a
`file:line` diagnostic; credentials written into a source fail validation
without their value ever being repeated; CSV files that are not UTF-8 are
read in a declared or detected encoding, or refused, never stored as bytes;
saved workspace files get the permissions the umask asks for.

The YAML and permission tests run `python -m lib` in a subprocess with a
timeout, as CI runs it: a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lib.core.diagnostics import ValidationFailed, has_errors
from lib.data.connectors.base import FetchContext, SourceError, fetch, fetch_note
from lib.memory import workspace, yamlio

from ..conftest import ROOT, WORKSPACES

TIMEOUT = 120  # seconds; each command below finishes in about one


def cli(*args, cwd=ROOT, umask: int | None = None):
    return subprocess.run(
        [sys.executable, "-m", "lib", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], "GIT_CONFIG_NOSYSTEM": "1"},
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def validate_json(path: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    proc = cli("validate", path, "--json")
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    return proc, [d for w in report["workspaces"] for d in w["diagnostics"]]


@pytest.fixture
def ws(tmp_path) -> Path:
    target = tmp_path / "gdp-explorer"
    shutil.copytree(WORKSPACES / "gdp-explorer", target)
    return target


HEADER = "# yaml-language-server: $schema=../schemas/task.schema.json\n"

# ------------------------------------------------------------------ YAML anchors, aliases, merge keys, size


def billion_laughs() -> str:
    lines = [HEADER.rstrip("\n"), "goal: laughs", "rules: []", 'lol0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]  # 9**12 strings once expanded
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_at_its_first_anchor_without_expanding(ws):
    (ws / "task.yaml").write_text(billion_laughs())
    proc, diags = validate_json(ws)  # used to run until killed (> 180 s)
    assert proc.returncode == 1
    [d] = [d for d in diags if d["file"].endswith("task.yaml")]
    assert (d["id"], d["level"], d["line"]) == ("yaml.anchor", "error", 4)
    assert "&a0" in d["message"] and "anchors" in d["message"]


def test_a_self_recursive_alias_is_refused_not_a_recursion_error(ws):
    (ws / "task.yaml").write_text(HEADER + "goal: &g [*g]\nrules: []\n")
    proc, diags = validate_json(ws)  # used to die with RecursionError
    assert proc.returncode == 1
    [d] = [d for d in diags if d["file"].endswith("task.yaml")]
    assert (d["id"], d["line"]) == ("yaml.anchor", 2)


def test_a_merge_key_is_refused_with_its_line(ws):
    # no anchor or alias at all: the merge key alone must be caught
    (ws / "task.yaml").write_text(HEADER + "goal: x\nrules:\n  - <<: {id: merged, author: sam}\n    text: t\n    created: '2026-01-01'\n")
    proc, diags = validate_json(ws)
    assert proc.returncode == 1
    [d] = [d for d in diags if d["file"].endswith("task.yaml")]
    assert (d["id"], d["line"]) == ("yaml.merge", 4)
    assert "<<" in d["message"]


def test_a_50_mb_file_is_refused_by_its_size_before_parsing(ws):
    rule = "  - id: r{:07d}\n    text: " + "a long rule text " * 4 + "\n    author: sam\n    created: '2026-01-01'\n"
    with open(ws / "task.yaml", "w") as handle:
        handle.write(HEADER + "goal: big\nrules:\n")
        block = "".join(rule.format(i) for i in range((1 << 20) // len(rule.format(0)) + 1))  # 1 MB of rules
        for _ in range(51):
            handle.write(block)
    size = (ws / "task.yaml").stat().st_size
    assert size > 50 << 20
    proc, diags = validate_json(ws)  # used to take over 180 s
    assert proc.returncode == 1
    [d] = [d for d in diags if d["file"].endswith("task.yaml")]
    assert d["id"] == "file.too_large"
    assert "task.yaml" in d["message"] and f"{size:,} bytes" in d["message"] and f"{yamlio.MAX_FILE_BYTES:,} bytes" in d["message"]


def test_the_size_cap_is_a_constant_and_a_file_just_under_it_still_loads(ws):
    assert yamlio.MAX_FILE_BYTES == 2 << 20
    body = HEADER + "goal: big\nrules: []\n"
    filler = "# " + "x" * 97 + "\n"
    (ws / "task.yaml").write_text(body + filler * ((yamlio.MAX_FILE_BYTES - len(body) - 1) // len(filler)))
    _, diags = workspace.load(ws)
    assert not [d for d in diags if (d.file or "").endswith("task.yaml")]
    with open(ws / "task.yaml", "a") as handle:
        handle.write(filler)
    [d] = [d for d in workspace.load(ws)[1] if (d.file or "").endswith("task.yaml")]
    assert d.id == "file.too_large"


@pytest.mark.parametrize(
    "text, kind, line",
    [
        ("goal: &x text\n", "anchor", 1),  # an anchor alone is harmless, but never written by dashmem: refused too
        ("a: 1\ngoal: *nowhere\n", "alias", 2),
        ("rules:\n  - <<: {id: a}\n", "merge", 2),
        ("a: 1\nb: !!python/object:os.system echo\n", "tag", 2),  # used to raise ConstructorError, not a diagnostic
        ("a: !!binary aGVsbG8=\n", "tag", 1),  # used to load bytes
        ("a: 1\n? [x, y]\n: 2\n", "key", 2),  # used to raise TypeError (unhashable list)
        ("a: 1\nb: {c: " + "[" * 200 + "]" * 200 + "}\n", "depth", 2),  # 900 levels used to raise RecursionError
        ("a: 1\nb: 2\nc: \x07\n", "syntax", 3),  # a control character: used to carry no line
        ("a: 1\n---\nb: 2\n", "syntax", 2),
    ],
)
def test_parse_refuses_what_no_workspace_file_holds_with_a_line(text, kind, line):
    with pytest.raises(yamlio.YamlSyntaxError) as info:
        yamlio.parse(text)
    assert (info.value.kind, info.value.line) == (kind, line)


@pytest.mark.parametrize("levels", [900, 5000, 100_000])
def test_deep_nesting_is_a_yaml_error_not_a_recursion_error(levels):
    with pytest.raises(yamlio.YamlSyntaxError) as info:
        yamlio.parse("a: 1\nb: " + "[" * levels + "]" * levels + "\n")
    assert info.value.line == 2


def test_parse_refuses_oversized_text_from_any_caller():
    with pytest.raises(yamlio.YamlSyntaxError) as info:
        yamlio.parse("a: '" + "x" * yamlio.MAX_FILE_BYTES + "'\n")
    assert info.value.kind == "too_large" and f"{yamlio.MAX_FILE_BYTES:,} bytes" in str(info.value)


def test_refusals_are_diagnostics_with_file_and_line(ws):
    (ws / "output.yaml").write_text("data_injection: &d {mode: queries_at_render}\n")
    [d] = [d for d in workspace.load(ws)[1] if (d.file or "").endswith("output.yaml")]
    assert d.id == "yaml.anchor" and d.line == 1 and d.location.endswith("output.yaml:1")


def test_shipped_workspaces_load_as_plain_yaml_does():
    """The event-built documents are the data PyYAML's safe loader builds (dates kept as text)."""
    import yaml

    for file in sorted(WORKSPACES.glob("*/*.yaml")):
        text = file.read_text(encoding="utf-8")
        assert yamlio.parse(text).data == yaml.load(text, Loader=yamlio._SafeLoaderNoDates), file


def test_the_canonical_saver_never_writes_anchors(tmp_path):
    shared = {"id": "same", "text": "shared object", "author": "sam", "created": "2026-01-01"}
    text = workspace.render("task", {"goal": "g", "rules": [shared, dict(shared, id="other"), shared]})
    assert "&" not in text and "*" not in text
    assert yamlio.parse(text).data["rules"][2] == shared


# ------------------------------------------------------------------ literal secrets in sources


def source_diags(tmp_path, *sources) -> list:
    return workspace.validate_content(tmp_path / "ws", {"sources": {"sources": list(sources)}})


def rest(**settings):
    return {"name": "tickets", "type": "rest", "url": "https://api.example.com/v1/tickets", **settings}


SECRET = "Zq8vSECRETVALUE42"

LEAKS = [
    (rest(url=f"https://bob:{SECRET}@api.example.com/v1/tickets"), "sources[0].url", "secret.in_url"),
    *[
        (rest(url=f"https://api.example.com/v1/tickets?page=2&{name}={SECRET}"), "sources[0].url", "secret.in_url")
        for name in ("access_token", "api_key", "token", "key", "secret", "password")
    ],
    ({"name": "inv", "type": "mcp", "url": f"https://mcp.example.com/mcp?token={SECRET}", "tool": "stock"}, "sources[0].url", "secret.in_url"),
    (
        {"name": "wh", "type": "sql", "url": f"snowflake://reporting@acct/db?authenticator=oauth&token={SECRET}", "table": "t"},
        "sources[0].url",
        "secret.in_url",
    ),
    (
        {"name": "ev", "type": "sql", "url": f"sc://spark.internal:15002/;use_ssl=true;token={SECRET}", "table": "t", "mode": "live"},
        "sources[0].url",
        "secret.in_url",
    ),
    (rest(params={"status": "open", "api_key": SECRET}), "sources[0].params.api_key", "secret.literal"),
    (rest(params={"access_token": SECRET}), "sources[0].params.access_token", "secret.literal"),
    (rest(params={"apiKey": SECRET}), "sources[0].params.apiKey", "secret.literal"),
    (rest(method="POST", body={"auth": {"client_secret": SECRET}}), "sources[0].body.auth.client_secret", "secret.literal"),
    (rest(headers={"Accept": "application/json", "X-Auth-Token": SECRET}), "sources[0].headers.X-Auth-Token", "secret.header"),
    (rest(headers={"Private-Token": SECRET}), "sources[0].headers.Private-Token", "secret.header"),
]


@pytest.mark.parametrize("source, field, check_id", LEAKS, ids=[f"{f}:{c}:{i}" for i, (_, f, c) in enumerate(LEAKS)])
def test_a_credential_written_into_a_source_fails_validation_unrepeated(tmp_path, source, field, check_id):
    diags = source_diags(tmp_path, source)
    assert has_errors(diags)
    assert any(d.field == field and d.id == check_id and d.line for d in diags), [d.format() for d in diags]
    assert SECRET not in json.dumps([d.to_dict() for d in diags]) + "".join(d.format() for d in diags)


@pytest.mark.parametrize("header", ["X-API-Key", "Cookie", "Authorization", "X-Auth-Token", "Private-Token"])
def test_credential_headers_outside_secret_headers_fail_unrepeated(tmp_path, header):
    diags = source_diags(tmp_path, rest(headers={header: f"Bearer {SECRET}"}))
    assert has_errors(diags) and any(header in (d.field or "") or header in d.message for d in diags)
    assert SECRET not in "".join(d.format() for d in diags)


@pytest.mark.parametrize(
    "source",
    [
        rest(url=f"ftp://api.example.com/v1?api_key={SECRET}"),  # the schema's own error quoted the url
        rest(headers={"X-Auth-Token": [SECRET]}),  # ... and the value of a wrongly typed header
        rest(params={"token": {"nested": SECRET}}),
    ],
)
def test_schema_errors_under_a_credential_never_quote_it(tmp_path, source):
    diags = source_diags(tmp_path, source)
    assert has_errors(diags)
    assert SECRET not in json.dumps([d.to_dict() for d in diags]) + "".join(d.format() for d in diags)


@pytest.mark.parametrize(
    "source, field, ref",
    [
        (
            {"name": "db", "type": "sql", "url": "postgresql://reporting@db/sales", "table": "t", "password": "env:DASHMEM_COOKIE_KEY"},
            "sources[0].password",
            "env:DASHMEM_COOKIE_KEY",
        ),
        (rest(secret_headers={"Authorization": "env:ANTHROPIC_API_KEY"}), "sources[0].secret_headers.Authorization", "env:ANTHROPIC_API_KEY"),
        (
            {"name": "inv", "type": "mcp", "command": ["python", "server.py"], "tool": "t", "env": {"TOKEN": "secrets:auth.cookie_key"}},
            "sources[0].env.TOKEN",
            "secrets:auth.cookie_key",
        ),
        (rest(secret_headers={"X-Key": "env:anthropic_api_key"}), "sources[0].secret_headers.X-Key", "env:anthropic_api_key"),
    ],
)
def test_a_reference_to_the_apps_own_credentials_fails_validation(tmp_path, source, field, ref):
    diags = source_diags(tmp_path, source)  # used to pass, and be refused only at fetch time
    [d] = [d for d in diags if d.field == field]
    assert d.id == "secret.reserved" and d.level == "error" and "belongs to the app itself" in d.message


def test_references_and_plain_settings_still_pass(tmp_path):
    diags = source_diags(
        tmp_path,
        rest(
            url="https://api.example.com:8443/v1/users/ann@example.com?page=2&sort=key&max_tokens=5",
            params={"status": "open", "sort_key": "created", "max_tokens": 100, "author": "sam", "api_key": "env:TICKETS_KEY"},
            headers={"Accept": "application/json", "X-Request-Id": "dashmem"},
            secret_headers={"X-Auth-Token": "env:TICKETS_TOKEN", "Authorization": "secrets:tickets.token"},
        ),
        {
            "name": "db",
            "type": "sql",
            "url": "postgresql://reporting@db:5432/sales?sslmode=require&sslkey=certs/key.pem",
            "table": "t",
            "password": "env:SALES_DB_PASSWORD",
        },
        {"name": "inv", "type": "mcp", "command": ["python", "server.py"], "tool": "t", "env": {"TOKEN": "env:INVENTORY_TOKEN"}},
    )
    assert diags == []


def test_validate_json_never_prints_a_literal_secret(ws):
    text = (ws / "sources.yaml").read_text()
    (ws / "sources.yaml").write_text(
        text
        + f"""\
  - name: tickets
    type: rest
    url: https://bob:{SECRET}1@api.example.com/v1?access_token={SECRET}2
    params: {{api_key: {SECRET}3}}
    headers: {{X-Auth-Token: {SECRET}4}}
  - name: db
    type: sql
    url: postgresql://reporting@db/sales
    password: env:DASHMEM_COOKIE_KEY
    table: orders
"""
    )
    proc, diags = validate_json(ws)
    assert proc.returncode == 1
    assert {"secret.in_url", "secret.literal", "secret.header", "secret.reserved"} <= {d["id"] for d in diags}
    assert all(d["file"].endswith("sources.yaml") and d["line"] for d in diags)
    assert SECRET not in proc.stdout + proc.stderr


def test_save_refuses_a_literal_secret_without_repeating_it_and_writes_nothing(ws):
    before = (ws / "sources.yaml").read_bytes()
    sources = workspace.load(ws)[0].data["sources"]
    sources["sources"].append(rest(params={"api_key": SECRET}))
    with pytest.raises(ValidationFailed) as info:
        workspace.save(ws, {"sources": sources})
    assert SECRET not in str(info.value)
    assert (ws / "sources.yaml").read_bytes() == before


# ------------------------------------------------------------------ CSV encodings

LATIN1_ROWS = "Stadt;Größe\nKöln;1086000\nZürich;421000\nMünchen;1488000\n"


def csv_fetch(folder: Path, name: str, **settings):
    return fetch({"name": "cities", "type": "csv", "path": name, **settings}, FetchContext(workspace_path=folder))


def test_a_latin1_file_reads_as_text_and_the_result_says_which_encoding(tmp_path):
    (tmp_path / "cities.csv").write_bytes(LATIN1_ROWS.encode("latin-1"))
    table = csv_fetch(tmp_path, "cities.csv")  # used to give binary values b'K\xf6ln'
    assert table.column_names == ["Stadt", "Größe"]
    assert table.column("Stadt").to_pylist() == ["Köln", "Zürich", "München"]
    note = fetch_note(table)
    assert note and "cities.csv" in note and "not UTF-8" in note and "Windows-1252" in note


def test_a_declared_encoding_is_honoured_without_a_note(tmp_path):
    (tmp_path / "cities.csv").write_bytes(LATIN1_ROWS.encode("latin-1"))
    table = csv_fetch(tmp_path, "cities.csv", encoding="latin-1")
    assert table.column("Stadt").to_pylist() == ["Köln", "Zürich", "München"] and fetch_note(table) is None
    table = csv_fetch(tmp_path, "cities.csv", columns={"Stadt": "VARCHAR"})  # a pinned text column used to fail
    assert table.column("Stadt").to_pylist() == ["Köln", "Zürich", "München"]


def test_a_file_declared_utf8_that_is_not_is_refused_at_its_first_bad_byte(tmp_path):
    (tmp_path / "cities.csv").write_bytes(LATIN1_ROWS.encode("latin-1"))
    with pytest.raises(SourceError) as info:
        csv_fetch(tmp_path, "cities.csv", encoding="utf-8")
    offset = LATIN1_ROWS.encode("latin-1").index(b"\xf6")
    assert "cities.csv" in str(info.value) and f"byte {offset}" in str(info.value) and "line 1" in str(info.value)


def test_a_mixed_encoding_file_is_refused_naming_the_first_bad_byte(tmp_path):
    data = "Stadt;Größe\n".encode("utf-8") + "Köln;1086000\n".encode("latin-1") + "Zürich;421000\n".encode("utf-8")
    (tmp_path / "mixed.csv").write_bytes(data)
    with pytest.raises(SourceError) as info:  # used to load b'K\xf6ln' and 'Zürich' side by side
        csv_fetch(tmp_path, "mixed.csv")
    offset = data.index(b"\xf6l")
    assert "mixed.csv" in str(info.value) and f"byte {offset}" in str(info.value) and "line 2" in str(info.value)
    assert "mixes encodings" in str(info.value)


def test_binary_garbage_is_refused_not_stored_as_bytes(tmp_path):
    (tmp_path / "blob.csv").write_bytes(b"a,b\nx\x81\x00y,1\n")
    with pytest.raises(SourceError, match=r"blob\.csv is not UTF-8 text: byte 5"):
        csv_fetch(tmp_path, "blob.csv")


def test_a_utf16_file_with_a_byte_order_mark_is_read(tmp_path):
    (tmp_path / "cities.csv").write_bytes(LATIN1_ROWS.encode("utf-16"))
    table = csv_fetch(tmp_path, "cities.csv")
    assert table.column("Stadt").to_pylist() == ["Köln", "Zürich", "München"] and "UTF-16" in (fetch_note(table) or "")


def test_a_viewers_own_latin1_csv_reads_as_text():
    from lib.data.refresh import read_own_file

    table, problems = read_own_file(LATIN1_ROWS.encode("cp1252"), "own.csv", "cities", {"Stadt": "VARCHAR"})
    assert problems == [] and table is not None and table.column("Stadt").to_pylist() == ["Köln", "Zürich", "München"]


# ------------------------------------------------------------------ file permissions


def modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.iterdir()]}


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_new_and_saved_workspace_files_follow_the_umask(tmp_path, umask, file_mode, dir_mode):
    target = tmp_path / "team-kpis"
    proc = cli("new", target, "--owner", "alice", umask=umask)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert modes(target) == {"team-kpis": dir_mode, **{workspace.FILES[k]: file_mode for k in workspace.REQUIRED}}  # were 0o600
    (target / "data").mkdir()
    (target / "data" / "kpis.csv").write_text("a,b\n1,2\n")
    proc = cli("source", "add", target, "kpis", "--type", "csv", "--path", "data/kpis.csv", umask=umask)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stat.S_IMODE((target / "sources.yaml").stat().st_mode) == file_mode
    assert not [p for p in target.iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_a_workspace_from_a_template_follows_the_umask_not_the_templates_modes(tmp_path):
    template = tmp_path / "templates" / "gdp-explorer"
    shutil.copytree(WORKSPACES / "gdp-explorer", template)
    for path in [template, *template.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    target = tmp_path / "gdp-copy"
    proc = cli("new", target, "--template", template, "--name", "GDP copy", umask=0o022)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = {p.relative_to(target).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [target, *target.rglob("*")]}
    assert found["."] == 0o755 and found["data"] == 0o755  # the folder was mkdtemp's 0o700
    assert found["workspace.yaml"] == found["task.yaml"] == found["data/gdp.csv"] == 0o644
    assert set(found.values()) == {0o755, 0o644}


def test_atomic_write_replaces_in_one_step_with_umask_permissions(tmp_path):
    target = tmp_path / "task.yaml"
    target.write_text("old")
    os.chmod(target, 0o600)
    old_umask = os.umask(0o022)
    try:
        workspace.atomic_write(target, "new: text\n")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "new: text\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["task.yaml"]
