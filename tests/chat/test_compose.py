"""Memory composition: block order, cache breakpoints, fixed tools, same input -> same bytes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from lib.chat import agent_tools, compose
from lib.core import tokens
from lib.core.settings import SettingError
from lib.data import profile
from lib.memory import schemas, workspace

from ..conftest import ROOT, WORKSPACES

EPHEMERAL = {"type": "ephemeral"}


def files_of(slug: str) -> dict:
    ws, diagnostics = workspace.load(WORKSPACES / slug)
    assert diagnostics == []
    return ws.data


def breakpoints(request: dict) -> int:
    return json.dumps(request).count('"cache_control"')


def test_system_blocks_are_base_task_sources_output_with_a_breakpoint_after_the_workspace_memory():
    files = files_of("supply-chain-weekly")
    system = compose.compose(files, "edit", "Add a trend chart").request["system"]
    assert [b["type"] for b in system] == ["text"] * 4
    base, task, sources, output = (b["text"] for b in system)
    assert base == compose.BASE_EDIT
    assert "# Task specifications (task.yaml)" in task and "attainment-green" in task and "Supply chain weekly" in task
    assert sources.startswith("# Tool configurations (sources.yaml)") and "path: data/gates.csv" in sources
    assert output.startswith("# Output constraints (output.yaml)") and "queries_at_render" in output
    assert "yaml-language-server" not in task + sources + output  # the editor's header line is noise for the model
    # The base instructions with the tools are over the model's minimum too, but with the profile and the artifacts
    # there are four candidates for three explicit breakpoints (the automatic one takes the fourth): the base's goes.
    assert [b.get("cache_control") for b in system] == [None, None, None, EPHEMERAL]


def test_base_instructions_explain_the_contract_the_spec_and_the_tools():
    text = compose.BASE_EDIT
    assert "data-injection contract" in text and "no inline data" in text
    assert "{{query.column|format}}" in text and "$id" in text and "names its" in text
    assert "write_dashboard" in text and "run_sql" in text and "propose_rule" in text
    assert "run_sql" in compose.BASE_QUERY and "write_dashboard" not in compose.BASE_QUERY


def test_profile_opens_the_user_turn_with_its_own_breakpoint_and_the_message_comes_last():
    files = files_of("supply-chain-weekly")
    request = compose.compose(files, "edit", "Add a trend chart", profile_budget=400).request
    assert list(request) == ["model", "max_tokens", "cache_control", "system", "tools", "messages"]
    assert request["cache_control"] == EPHEMERAL  # the automatic breakpoint, on the last block
    [turn] = request["messages"]
    assert turn["role"] == "user"
    first, dashboard_block, report_block, last = turn["content"]
    keep = compose.referenced_columns(files["profile"], files["dashboard"]) + compose.referenced_columns(files["profile"], files["report"])
    assert "gates.attainment" in keep and "gates.site" in keep
    assert first["text"].endswith(profile.text(files["profile"], 400 - tokens.estimate(first["text"].split("\n")[0] + "\n"), keep))
    assert first["cache_control"] == EPHEMERAL
    # The dashboard and the report share one breakpoint: the API allows four, the automatic one included.
    assert "cache_control" not in dashboard_block and report_block["cache_control"] == EPHEMERAL and "cache_control" not in last
    assert last == {"type": "text", "text": "Add a trend chart"}
    assert breakpoints(request) == 4 == compose.breakpoints_of(request)  # the API's limit
    query = compose.compose(files, "query", "Which site missed most?").request
    assert "cache_control" not in query["messages"][0]["content"][-1] and query["cache_control"] == EPHEMERAL
    assert breakpoints(query) <= 4


def test_edit_mode_shows_the_current_dashboard_for_refinement():
    files = files_of("supply-chain-weekly")
    content = compose.compose(files, "edit", "Make the KPIs bigger").request["messages"][0]["content"]
    shown = content[1]["text"]
    canonical = workspace.render("dashboard", files["dashboard"]).split("\n", 1)[1]
    assert "Refine it with edit_dashboard" in shown and canonical in shown
    without = {k: v for k, v in files.items() if k not in ("dashboard", "report")}
    composed = compose.compose(without, "edit", "Build a dashboard")
    assert len(composed.request["messages"][0]["content"]) == 2
    assert composed.breakdown["dashboard"] == composed.breakdown["report"] == 0


def test_edit_mode_shows_the_current_report_after_the_dashboard_under_one_breakpoint():
    files = files_of("supply-chain-weekly")
    request = compose.compose(files, "edit", "Add a movers table to the report").request
    content = request["messages"][0]["content"]
    assert [b["text"].split("\n")[0] for b in content[1:3]] == [
        "# " + compose.ARTIFACT_HEADINGS["dashboard"],
        "# " + compose.ARTIFACT_HEADINGS["report"],
    ]
    canonical = workspace.render("report", files["report"]).split("\n", 1)[1]
    assert canonical in content[2]["text"] and "yaml-language-server" not in content[2]["text"]
    assert breakpoints(request) == 4
    # A report alone: it takes the dashboard's place and its breakpoint.
    only_report = {k: v for k, v in files.items() if k != "dashboard"}
    request = compose.compose(only_report, "edit", "Tighten the overview").request
    profile_block, report_block, message = request["messages"][0]["content"]
    assert report_block["text"].startswith("# Current report (report.yaml)") and report_block["cache_control"] == EPHEMERAL
    assert breakpoints(request) == 4
    # Query mode shows neither artifact.
    query = compose.compose(files, "query", "Which site missed most?").request
    assert "report.yaml" not in json.dumps(query["messages"])


def test_the_profile_budget_keeps_the_columns_only_the_report_names():
    files = files_of("supply-chain-weekly")
    files["dashboard"] = {
        "title": "Days",
        "components": [{"id": "n", "type": "kpi", "title": "Days", "query": "SELECT count(DISTINCT day) AS value FROM gates"}],
    }
    files["report"] = {"title": "Targets", "sections": [{"id": "t", "type": "table", "title": "Targets", "query": "SELECT target FROM gates"}]}
    composed = compose.compose(files, "edit", "x", profile_budget=150).request["messages"][0]["content"][0]["text"]
    heading = composed.split("\n")[0] + "\n"
    assert composed == heading + profile.text(files["profile"], 150 - tokens.estimate(heading), ["gates.day", "gates.target"])
    assert composed != heading + profile.text(files["profile"], 150 - tokens.estimate(heading), ["gates.day"])


def test_the_edit_instructions_describe_the_report_and_its_tool():
    text = compose.BASE_EDIT
    assert "write_report" in text and "schemas/report.schema.json" in text
    kinds = schemas.load_schema("report")["$defs"]["section"]["properties"]["type"]["enum"]
    described = re.findall(r"^  - ([a-z_, ]+?)[:.]", text.split("The report spec", 1)[1], re.M)
    assert sorted(k for line in described for k in line.split(", ")) == sorted(kinds)  # the schema's section kinds, no more
    assert "write_report" not in compose.BASE_QUERY


def test_query_mode_offers_only_run_sql_and_no_dashboard():
    files = files_of("supply-chain-weekly")
    request = compose.compose(files, "query", "Which site missed most?").request
    assert [t["name"] for t in request["tools"]] == ["run_sql"]
    assert request["system"][0]["text"] == compose.BASE_QUERY
    assert [b["text"].split("\n")[0] for b in request["messages"][0]["content"]][-1] == "Which site missed most?"
    assert len(request["messages"][0]["content"]) == 2
    edit_tools = [t["name"] for t in compose.compose(files, "edit", "x").request["tools"]]
    assert edit_tools == ["run_sql", "write_dashboard", "edit_dashboard", "write_report", "edit_report", "propose_rule"]


def test_same_input_gives_the_same_bytes_and_a_new_question_changes_only_the_end():
    first = json.dumps(compose.compose(files_of("gdp-explorer"), "edit", "Add a trend").request, sort_keys=False)
    again = json.dumps(compose.compose(files_of("gdp-explorer"), "edit", "Add a trend").request, sort_keys=False)
    assert first == again
    other = json.dumps(compose.compose(files_of("gdp-explorer"), "edit", "Show the top 10 countries").request)
    shared = os.path.commonprefix([first, other])
    assert len(shared) >= first.rindex('"Add a trend"')  # everything before the message is shared
    assert len(shared) / len(first) > 0.95


def test_tools_are_identical_for_different_workspaces_and_name_no_column():
    supply, gdp = files_of("supply-chain-weekly"), files_of("gdp-explorer")
    for mode in compose.MODES:
        a = compose.compose(supply, mode, "q").request["tools"]
        b = compose.compose(gdp, mode, "q").request["tools"]
        assert json.dumps(a) == json.dumps(b) == json.dumps(agent_tools.tool_schemas(mode))
    tools_text = json.dumps(agent_tools.tool_schemas("edit"))
    schemas_text = json.dumps([t["input_schema"] for t in agent_tools.tool_schemas("edit")])
    columns = {c["name"] for files in (supply, gdp) for t in files["profile"]["tables"] for c in t["columns"]}
    assert len(columns) > 8
    for name in columns:
        assert not re.search(rf"\b{re.escape(name)}\b", schemas_text), name
    tables = {t["name"] for files in (supply, gdp) for t in files["profile"]["tables"]}
    for name in tables:
        assert not re.search(rf"\b{re.escape(name)}\b", tools_text), name


def test_breakdown_estimates_every_part():
    composed = compose.compose(files_of("supply-chain-weekly"), "edit", "Add a trend chart")
    assert list(composed.breakdown) == ["base", "task", "sources", "output", "profile", "dashboard", "report", "message", "tools"]
    assert all(count > 0 for count in composed.breakdown.values())
    assert composed.breakdown["message"] == tokens.estimate("Add a trend chart")
    assert composed.total_tokens == sum(composed.breakdown.values())
    assert "tokens" in compose.summary(composed)


def test_literal_secrets_never_reach_the_prompt():
    files = files_of("supply-chain-weekly")
    files["sources"] = {
        "sources": [
            {"name": "db", "type": "sql", "url": "postgresql://reporter:hunter2-pw@db.local/sales", "password": "hunter2-pw", "table": "orders"},
            {"name": "api", "type": "rest", "url": "https://api.example.com/x", "secret_headers": {"Authorization": "Bearer tok-123"}},
            {"name": "ok", "type": "sql", "url": "postgresql://reporter@db.local/sales", "password": "env:DB_PASSWORD", "table": "t"},
            # A key pasted into a nested secret field (`tls.client_key`), beside a reference that stays.
            {
                "name": "mcp",
                "type": "mcp",
                "url": "https://m/mcp",
                "tool": "t",
                "tls": {"client_cert": "secrets:mcp.cert", "client_key": "-----BEGIN KEY-----pem-456"},
            },
        ]
    }
    text = json.dumps(compose.compose(files, "edit", "x").request)
    assert "hunter2-pw" not in text and "tok-123" not in text and "pem-456" not in text
    assert "env:DB_PASSWORD" in text and "secrets:mcp.cert" in text and "<hidden>" in text


def test_invalid_mode_or_empty_message_is_refused():
    files = files_of("gdp-explorer")
    with pytest.raises(ValueError, match="unknown mode"):
        compose.compose(files, "chat", "x")
    with pytest.raises(ValueError, match="empty"):
        compose.compose(files, "edit", "  ")


def test_composes_without_an_api_key_and_without_importing_anthropic(tmp_path):
    """The compose CLI path and the refresh path never load the SDK; no key is needed to see the prompt."""
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    script = (
        "import json, sys\n"
        "import lib.data.refresh, lib.chat.compose, lib.chat.agent, lib.chat.model\n"
        f"out = lib.chat.compose.compose_cli({str(WORKSPACES / 'gdp-explorer')!r}, 'Add a trend', 'query')\n"
        "shown = json.loads(out)\n"
        "assert list(shown) == ['system', 'tools', 'messages'], list(shown)\n"
        "assert not lib.chat.model.api_key_available()\n"
        "assert 'anthropic' not in sys.modules\n"
        "print('ok', len(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_compose_cli_refuses_a_workspace_that_does_not_validate(tmp_path):
    from lib.core.diagnostics import ValidationFailed

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "workspace.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ValidationFailed):
        compose.compose_cli(folder, "hello")


def test_the_profile_block_marks_declared_joins_and_leaves_out_rejected_candidates():
    files = files_of("supply-chain-weekly")
    files["profile"] = {
        **files["profile"],
        "relationships": [
            {"left": "gates.site", "right": "sites.code", "overlap": 1.0, "evidence": "values"},
            {"left": "gates.gate", "right": "doors.id", "overlap": 0.92, "evidence": "values"},
            {"left": "gates.day", "right": "weeks.day", "overlap": 1.0, "evidence": "name and values"},
        ],
    }
    files["sources"] = {
        **files["sources"],
        "relationships": [{"from": "gates.site", "to": "sites.code"}],
        "rejected_relationships": [{"from": "gates.gate", "to": "doors.id"}],
    }
    text = compose.compose(files, "edit", "Attainment by region").request["messages"][0]["content"][0]["text"]
    joins = text.split("\njoins\n")[1].splitlines()
    assert joins == ["  gates.site -> sites.code (declared, 100% of values match)", "  gates.day -> weeks.day (100% of values match)"]


# --------------------------------------------------------------------------- the workspace's profile budget


@pytest.fixture
def wide_workspace(ws_copy, dataset):
    """The GDP demo with the 41-column NYC 311 sample's profile: a table whose full profile runs to thousands of tokens."""
    import pyarrow.csv as pacsv

    folder = ws_copy("gdp-explorer")
    table = pacsv.read_csv(dataset("nyc311_sample5000.csv"))
    workspace.save(folder, {"profile": profile.build({"requests": table})})
    return folder


def test_compose_always_applies_the_workspace_profile_budget(wide_workspace):
    ws, _ = workspace.load(wide_workspace)
    assert tokens.estimate(profile.text(ws.data["profile"])) > 1500  # unbudgeted, the table alone is over the default
    composed = compose.compose(ws.data, "query", "How many requests per borough?")
    assert composed.profile_budget == 1500 and 1000 < composed.breakdown["profile"] <= 1500
    assert composed.diagnostics == ()
    meta = {**ws.data["workspace"], "policy": {**ws.data["workspace"]["policy"], "profile_budget": 600}}
    smaller = compose.compose({**ws.data, "workspace": meta}, "query", "How many requests per borough?")
    assert smaller.profile_budget == 600 and smaller.breakdown["profile"] <= 600
    assert compose.compose(ws.data, "query", "x", profile_budget=300).breakdown["profile"] <= 300  # a caller's budget wins


def test_a_budget_below_what_the_names_need_warns_on_stderr_and_reports_used_over_budget(wide_workspace, tmp_path):
    text = (wide_workspace / "workspace.yaml").read_text()
    (wide_workspace / "workspace.yaml").write_text(
        text.replace("  require_valid_to_publish: true\n", "  require_valid_to_publish: true\n  profile_budget: 200\n")
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "lib", "compose", str(wide_workspace), "--message", "Requests per borough"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["messages"][0]["content"][0]["text"]
    assert "more columns" in shown  # what the warning is about: columns the model is not shown
    used = re.search(r"profile (\d+)/200 tokens", done.stderr)
    assert used and int(used.group(1)) <= 200
    warning = [line for line in done.stderr.splitlines() if "policy.profile_budget: warning:" in line]
    assert len(warning) == 1 and "workspace.yaml:12:" in warning[0] and "41 column(s)" in warning[0]
    least = re.search(r"at least (\d+)", warning[0])
    assert least, warning[0]
    needed = int(least.group(1))
    ws, _ = workspace.load(wide_workspace)
    enough = compose.compose(ws.data, "query", "x", profile_budget=needed)
    assert enough.diagnostics == () and "more columns" not in enough.request["messages"][0]["content"][0]["text"]
    assert compose.compose(ws.data, "query", "x", profile_budget=needed - 1).diagnostics[0].id == "compose.profile_budget"


def test_the_profile_budget_is_schema_validated(ws_copy):
    folder = ws_copy("gdp-explorer")
    text = (folder / "workspace.yaml").read_text()
    (folder / "workspace.yaml").write_text(text.replace("  require_valid_to_publish: true\n", "  require_valid_to_publish: true\n  profile_budget: 10\n"))
    found = workspace.validate(folder)
    assert [(d.level, d.field, d.line) for d in found] == [("error", "policy.profile_budget", 12)] and "50" in found[0].message


# --------------------------------------------------------------------------- the output cap and the cache breakpoints


def test_the_output_cap_is_the_setting_with_a_default_for_streaming(monkeypatch):
    files = files_of("gdp-explorer")
    monkeypatch.delenv("DASHMEM_CHAT_MAX_TOKENS", raising=False)
    assert compose.compose(files, "edit", "x").request["max_tokens"] == 16_000
    monkeypatch.setenv("DASHMEM_CHAT_MAX_TOKENS", "32000")
    assert compose.compose(files, "edit", "x").request["max_tokens"] == 32_000
    assert compose.compose(files, "edit", "x", max_tokens=2048).request["max_tokens"] == 2048  # a caller's own cap wins
    for bad in ("lots", "100", "500000"):
        monkeypatch.setenv("DASHMEM_CHAT_MAX_TOKENS", bad)
        with pytest.raises(SettingError) as caught:
            compose.compose(files, "edit", "x")
        assert str(caught.value).startswith("DASHMEM_CHAT_MAX_TOKENS ") and "from 1,024 to 128,000" in str(caught.value)


def test_the_minimum_cacheable_length_is_the_models():
    assert compose.cache_minimum("claude-sonnet-5-5") == 1024 == compose.cache_minimum("claude-opus-4-1-20250805")
    assert compose.cache_minimum("claude-haiku-4-5-20251001") == 4096 == compose.cache_minimum("claude-opus-4-5")
    assert compose.cache_minimum("claude-sonnet-4-6") == 2048 and compose.cache_minimum("claude-sonnet-4-5") == 1024
    assert compose.cache_minimum("some-new-model") == compose.CACHE_MINIMUM_FALLBACK


def prefixes(request: dict) -> list[tuple[bool, int]]:
    """(marked, estimated tokens up to and including the block) for every system and user block, in cache order."""
    total = tokens.estimate(json.dumps(request["tools"], ensure_ascii=False))
    out = []
    for block in request["system"] + request["messages"][0]["content"]:
        total += tokens.estimate(block["text"])
        out.append(("cache_control" in block, total))
    return out


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-4-5"])
@pytest.mark.parametrize("mode", compose.MODES)
@pytest.mark.parametrize("slug", ["supply-chain-weekly", "gdp-explorer"])
def test_explicit_breakpoints_go_only_where_the_prefix_is_over_the_models_minimum(slug, mode, model):
    request = compose.compose(files_of(slug), mode, "Which site missed most?", model=model).request
    floor = compose.cache_minimum(model)
    blocks = prefixes(request)
    marked = [size for is_marked, size in blocks if is_marked]
    assert all(size / tokens.SAFETY >= floor for size in marked)  # none wasted on a prefix the API will not cache
    assert len(marked) <= compose.EXPLICIT_BREAKPOINTS and request["cache_control"] == EPHEMERAL
    assert breakpoints(request) == len(marked) + 1 <= compose.MAX_BREAKPOINTS
    assert not blocks[-1][0]  # the message is the automatic breakpoint's
    # The latest candidate over the minimum (the artifacts in edit mode, else the profile) is always marked.
    candidates = [len(request["system"]) - 1, len(request["system"])] + (
        [len(blocks) - 2] if mode == "edit" and len(blocks) > len(request["system"]) + 2 else []
    )
    over = [i for i in candidates if blocks[i][1] / tokens.SAFETY >= floor]
    if over:
        assert blocks[over[-1]][0]


def test_a_short_query_prompt_gets_no_breakpoint_the_model_cannot_cache():
    """Query mode's base instructions and tool come to a few hundred tokens: under every model's minimum."""
    request = compose.compose(files_of("supply-chain-weekly"), "query", "Which site missed most?", model="claude-sonnet-5-5").request
    base = tokens.estimate(json.dumps(request["tools"])) + tokens.estimate(request["system"][0]["text"])
    assert base / tokens.SAFETY < 1024 and "cache_control" not in request["system"][0]
    haiku = compose.compose(files_of("gdp-explorer"), "query", "Which country grew fastest?", model="claude-haiku-4-5").request
    assert breakpoints(haiku) == 1 and haiku["cache_control"] == EPHEMERAL  # the whole prompt is under 4,096: automatic only


def test_place_breakpoints_keeps_the_latest_three_over_the_minimum():
    safe = tokens.SAFETY
    assert compose.place_breakpoints([int(500 * safe), int(2000 * safe), int(3000 * safe), int(5000 * safe)], "claude-sonnet-5-5") == [1, 2, 3]
    assert compose.place_breakpoints([int(1100 * safe), int(2000 * safe), int(3000 * safe), int(5000 * safe)], "claude-sonnet-5-5") == [1, 2, 3]
    assert compose.place_breakpoints([int(1100 * safe), int(2000 * safe), int(3000 * safe), int(5000 * safe)], "claude-haiku-4-5") == [3]
    assert compose.place_breakpoints([100, 200], "claude-sonnet-5-5") == []
