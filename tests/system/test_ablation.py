"""The ablation harness (bench/ablation.py) run end to end with the scripted model on gdp.csv.

Each condition's Phase 2 prompt is checked for exactly the memory it should
carry, completion is checked to come from lib.artifacts.checks, and the refresh from
V1 to V2 is checked to make no model call. Also: the exact McNemar test on
known values, and the determinism and bounds of the V2 data.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import httpx2
import pyarrow as pa
import pytest

from bench import ablation
from bench.ablation_conditions import (
    BY_NAME,
    CONDITIONS,
    DASHBOARD,
    EVERYTHING,
    INSTRUCTIONS,
    OUTPUT,
    PROFILE,
    SOURCES,
    SUMMARY,
    TASK,
    TRANSCRIPT,
    SessionClient,
    instructions_file,
    summary_of,
)
from bench.ablation_task import BACKGROUND_RULE, PHASE2_MESSAGE, THRESHOLD_RULE, TRANSCRIPT_MARKER, FormattingSpec, completion, phase1_message, spec_for
from bench.ablation_taskfile import load
from bench.data_versions import SPREAD, measure_columns, updated_version
from bench.mcnemar import discordant, mcnemar_exact
from bench.scripted_analyst import EXPLORE_SQL, ScriptedAnalyst, apply_specification
from lib.artifacts import autodraft
from lib.chat.model import AnthropicClient, ScriptedModel, message, text_block
from lib.data import profile
from lib.data.connectors.base import FetchContext, fetch
from tests.helpers.model import MODEL, FakeAPI, sse_response

from ..conftest import ROOT

GDP = "gdp.csv"

# What each condition's prompt must carry, written out here rather than read from CONDITIONS.
EXPECTED_PARTS = {
    "no_memory": {PROFILE},
    "full_history": {PROFILE},
    "summarized_history": {PROFILE},
    "instructions_file": {PROFILE},
    "selective_memory": set(EVERYTHING),
    "loo_task": {SOURCES, OUTPUT, PROFILE, DASHBOARD},
    "loo_data": {TASK, SOURCES, OUTPUT, DASHBOARD},
    "loo_tools": {TASK, OUTPUT, PROFILE, DASHBOARD},
    "loo_output": {TASK, SOURCES, PROFILE, DASHBOARD},
}
EXPECTED_CONTEXT = {"full_history": TRANSCRIPT, "summarized_history": SUMMARY, "instructions_file": INSTRUCTIONS}

# Text that only the given workspace file puts into a prompt.
PART_PROBES = {
    TASK: f"id: {THRESHOLD_RULE}",  # rule ids appear in task.yaml only; the spec's sentences appear elsewhere too
    SOURCES: "path: data/current.csv",
    OUTPUT: "queries_at_render",
    PROFILE: "# Data profile (profile.yaml",
    DASHBOARD: "# Current dashboard (dashboard.yaml)",
}
CONTEXT_PROBES = {
    TRANSCRIPT: TRANSCRIPT_MARKER,
    SUMMARY: "# Summary of the earlier session",
    INSTRUCTIONS: "# Instructions file (CLAUDE.md)",
}


# The tests that read the study (or its printed output) need the whole scripted study run first (nine conditions on gdp.csv, with
# refreshes; about 9 s here, a benchmark run rather than a unit), so they are in the slow loop. The tests of
# the harness's parts (conditions, completion, McNemar, data versions) stay in the fast loop.
WHOLE_STUDY = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, dataset):
    """`python -m bench.ablation --scripted --datasets gdp.csv --runs 1 --out TMP`, once for the module."""
    dataset(GDP)  # skips when the public dataset is missing
    out = tmp_path_factory.mktemp("results")
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        study = ablation.main(["--scripted", "--datasets", GDP, "--runs", "1", "--out", str(out)])
    return study, printed.getvalue(), out


@pytest.fixture(scope="module")
def study(run):
    return run[0]


def cell(study, condition):
    [found] = [c for c in study.cells if c.condition == condition]
    return found


def prompt_text(study, condition) -> str:
    """What the model saw first in this condition: system and messages, as JSON text."""
    request = cell(study, condition).prompt
    return json.dumps({"system": request["system"], "messages": request["messages"]}, ensure_ascii=False)


def tool_uses(request) -> list[dict]:
    return [b for turn in request["messages"] if turn["role"] == "assistant" for b in turn["content"] if b.get("type") == "tool_use"]


def spec_of(study):
    return study.datasets[0].spec


# --------------------------------------------------------------------------- what each prompt carries


def test_the_conditions_are_the_papers_nine_and_defined_as_expected():
    assert [c.name for c in CONDITIONS] == list(EXPECTED_PARTS)
    for name, parts in EXPECTED_PARTS.items():
        assert set(BY_NAME[name].workspace_parts) == parts, name
        assert BY_NAME[name].context == EXPECTED_CONTEXT.get(name), name


@WHOLE_STUDY
def test_every_condition_ran_and_ends_with_only_the_phase2_message(study):
    assert {c.condition for c in study.cells} == set(EXPECTED_PARTS)
    for c in study.cells:
        last = c.prompt["messages"][-1]
        assert last["role"] == "user" and last["content"][-1]["text"] == PHASE2_MESSAGE, c.condition
        assert c.error is None and c.stopped_reason == "end_turn", c.condition


@WHOLE_STUDY
@pytest.mark.parametrize("condition", list(EXPECTED_PARTS))
def test_each_prompt_has_exactly_its_workspace_parts_and_outside_memory(study, condition):
    text = prompt_text(study, condition)
    for part, probe in PART_PROBES.items():
        assert (probe in text) == (part in EXPECTED_PARTS[condition]), f"{condition}: {part} ({probe!r})"
    for context, probe in CONTEXT_PROBES.items():
        assert (probe in text) == (EXPECTED_CONTEXT.get(condition) == context), f"{condition}: {context} ({probe!r})"


@WHOLE_STUDY
def test_full_history_replays_the_phase1_transcript_before_the_message(study):
    request = cell(study, "full_history").prompt
    first_turn = request["messages"][0]
    assert first_turn["role"] == "user" and first_turn["content"][-1]["text"] == phase1_message(spec_of(study))
    calls = tool_uses(request)
    assert [(c["name"], c["id"]) for c in calls] == [("run_sql", "toolu_scripted_1"), ("write_dashboard", "toolu_scripted_2")]
    assert calls[0]["input"] == {"sql": EXPLORE_SQL}
    results = [b for turn in request["messages"] if turn["role"] == "user" for b in turn["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_scripted_1", "toolu_scripted_2"]
    assert request["messages"][-2]["role"] == "assistant"  # Phase 1's closing answer, then the new message
    assert json.dumps(request).count('"cache_control"') <= 4  # the replay adds no cache breakpoint


@WHOLE_STUDY
def test_selective_memory_has_the_rules_and_the_dashboard_but_not_the_transcript(study):
    text = prompt_text(study, "selective_memory")
    spec = spec_of(study)
    for sentence in spec.sentences:
        assert sentence in text
    assert f"id: {BACKGROUND_RULE}" in text and "# Current dashboard (dashboard.yaml)" in text
    assert TRANSCRIPT_MARKER not in text
    assert tool_uses(cell(study, "selective_memory").prompt) == []


@WHOLE_STUDY
def test_leave_one_out_drops_only_its_category(study):
    spec = spec_of(study)
    loo_task = prompt_text(study, "loo_task")
    assert spec.sentences[1] not in loo_task and f"id: {THRESHOLD_RULE}" not in loo_task
    assert "queries_at_render" in loo_task and f"background: '{spec.background}'" in loo_task  # output.yaml stays ...
    assert "table data (13979 rows)" in loo_task  # ... and so does the profile
    assert "queries_at_render" not in prompt_text(study, "loo_output")
    assert f"id: {THRESHOLD_RULE}" in prompt_text(study, "loo_output")
    loo_data = prompt_text(study, "loo_data")
    assert "table data (13979 rows)" not in loo_data and "No data profile yet" in loo_data
    loo_tools = prompt_text(study, "loo_tools")
    assert "data/current.csv" not in loo_tools and "No sources are connected yet." in loo_tools
    assert "table data (13979 rows)" in loo_tools and f"id: {THRESHOLD_RULE}" in loo_tools


@WHOLE_STUDY
def test_no_memory_has_the_profile_and_nothing_of_the_specification(study):
    text = prompt_text(study, "no_memory")
    spec = spec_of(study)
    assert "table data (13979 rows)" in text
    for remembered in (*spec.sentences, spec.background, spec.threshold_color, TRANSCRIPT_MARKER):
        assert remembered not in text
    assert "No task rules yet." in text and "No output constraints are set." in text
    assert tool_uses(cell(study, "no_memory").prompt) == []


@WHOLE_STUDY
def test_instructions_file_is_in_the_system_prompt_without_workspace_memory(study):
    request = cell(study, "instructions_file").prompt
    spec = spec_of(study)
    assert request["system"][1]["text"] == instructions_file(spec)
    text = prompt_text(study, "instructions_file")
    for sentence in spec.sentences:
        assert sentence in text
    assert "No task rules yet." in text and "No output constraints are set." in text
    assert "No sources are connected yet." in text and "# Current dashboard" not in text


@WHOLE_STUDY
def test_summarized_history_has_the_summary_not_the_transcript(study):
    request = cell(study, "summarized_history").prompt
    phase1 = study.datasets[0].phase1[0]
    summary = summary_of(spec_of(study), phase1)
    assert request["system"][1]["text"] == summary == summary_of(spec_of(study), phase1)  # deterministic
    for component in phase1.outcome.draft_dashboard["components"]:
        assert component["id"] in summary
    text = prompt_text(study, "summarized_history")
    assert TRANSCRIPT_MARKER not in text and tool_uses(request) == []


# --------------------------------------------------------------------------- completion comes from the checks


@WHOLE_STUDY
def test_completion_separates_a_valid_dashboard_from_one_that_honours_the_specification(study):
    assert study.datasets[0].phase1[0].completed
    remembered = cell(study, "selective_memory")
    assert remembered.completed and remembered.dashboard["theme"]["background"] == spec_of(study).background
    forgetful = cell(study, "no_memory")  # the scripted model never saw the specification, so it ignored it
    assert forgetful.completion.checks_pass and not forgetful.completed
    assert forgetful.completion.honoured == {BACKGROUND_RULE: False, THRESHOLD_RULE: False}
    assert "theme" not in forgetful.dashboard


@pytest.fixture(scope="module")
def gdp_data(dataset):
    gdp = dataset(GDP)
    table = fetch({"name": "data", "type": "csv", "path": str(gdp)}, FetchContext(workspace_path=gdp.parent))
    return {"data": table}, profile.build({"data": table})


def test_completion_runs_the_real_checks_with_the_specification_as_task_rules(gdp_data):
    tables, prof = gdp_data
    spec = spec_for(GDP, prof)
    assert (spec.threshold_field, spec.threshold_op) == ("Value", ">=")
    draft = autodraft.draft({"workspace": {"name": GDP}, "profile": prof})
    compliant = apply_specification(draft, spec, {BACKGROUND_RULE, THRESHOLD_RULE})
    assert completion(compliant, spec, tables, "v1").completed

    no_background = {k: v for k, v in compliant.items() if k != "theme"}
    judged = completion(no_background, spec, tables, "v1")
    assert judged.checks_pass and judged.honoured == {BACKGROUND_RULE: False, THRESHOLD_RULE: True}
    themed_workspace = {"data_injection": {"mode": "queries_at_render"}, "theme": {"background": spec.background}}
    assert completion(no_background, spec, tables, "v1", themed_workspace).completed  # rendered in that theme
    clashing = {**compliant, "theme": {"background": "#000000"}}
    assert not completion(clashing, spec, tables, "v1", themed_workspace).completed
    only_background = apply_specification(draft, spec, {BACKGROUND_RULE})
    assert completion(only_background, spec, tables, "v1").honoured == {BACKGROUND_RULE: True, THRESHOLD_RULE: False}

    broken = json.loads(json.dumps(compliant).replace('sum(\\"Value\\")', 'sum(\\"Valeu\\")'))
    judged = completion(broken, spec, tables, "v1")
    assert not judged.checks_pass and not judged.completed
    assert any(d.id == "check.references" for d in judged.diagnostics)


def test_the_scripted_analyst_applies_only_the_specification_it_is_shown(gdp_data):
    tables, prof = gdp_data
    spec = spec_for(GDP, prof)
    analyst = ScriptedAnalyst(spec, prof)
    profile_block = {"type": "text", "text": "# Data profile (profile.yaml, compact)\n..."}

    def asked(words: str) -> dict:
        turn = {"role": "user", "content": [profile_block, {"type": "text", "text": words}]}
        return {"system": [], "tools": [], "messages": [turn]}

    blind = analyst.dashboard_for(asked(PHASE2_MESSAGE))
    told = analyst.dashboard_for(asked(" ".join(spec.sentences)))
    assert blind is not None and told is not None
    assert "theme" not in blind and told["theme"] == {"background": spec.background}
    assert not completion(blind, spec, tables, "v1").completed and completion(told, spec, tables, "v1").completed


@WHOLE_STUDY
def test_the_study_runs_the_same_through_the_anthropic_sdk(study, tmp_path, dataset):
    """The keyed path: AnthropicClient over a fake HTTP transport, with the scripted analyst answering each request."""

    def over_http(spec, prof):
        analyst = ScriptedAnalyst(spec, prof)

        def answer(request: httpx2.Request) -> httpx2.Response:
            body = json.loads(request.content)
            assert body.get("stream") is True  # every model call of the study streams (issue #32, item 8)
            return sse_response(analyst.create(body))

        transport = httpx2.MockTransport(answer)
        return AnthropicClient(api_key="test", max_retries=0, http_client=httpx2.Client(transport=transport))

    again = ablation.run_study([dataset(GDP)], 1, tmp_path, over_http, model=MODEL, scripted=False)
    assert [(c.condition, c.completed) for c in again.cells] == [(c.condition, c.completed) for c in study.cells]
    assert [c.usage for c in again.cells] == [c.usage for c in study.cells]


def test_the_studys_model_calls_stream_so_a_long_reply_is_not_cut_by_a_read_timeout_and_billed_again():
    """SessionClient streams every call through the SDK, even when the loop asks for no streamed text."""
    reply = message(text_block("A long reply."), usage={"input_tokens": 10, "output_tokens": 5}, model=MODEL)
    api = FakeAPI([reply, reply])
    client = SessionClient(api.client())
    request = {"model": MODEL, "max_tokens": 16_000, "messages": [{"role": "user", "content": "hi"}]}
    assert client.create(request)["content"] == reply["content"]
    chunks: list[str] = []
    client.create(request, on_text=chunks.append)
    assert [body.get("stream") for body in api.bodies] == [True, True] and "".join(chunks) == "A long reply."


# --------------------------------------------------------------------------- zero-token refresh


@WHOLE_STUDY
def test_the_refresh_to_v2_switches_with_no_model_client_made_or_called(study):
    measured = study.datasets[0].refresh
    assert measured.switched and measured.seconds > 0
    assert (measured.model_calls, measured.clients_made, measured.client_calls) == (0, 0, 0)


def test_the_refresh_watch_counts_clients_and_calls_and_then_lets_go():
    original = ScriptedModel.__init__
    with ablation.watching_model_clients() as counts:
        scripted = ScriptedModel([{"content": [], "usage": {}}])
        scripted.create({"messages": []})
    assert counts == {"made": 1, "calls": 1}
    ScriptedModel([])
    assert counts == {"made": 1, "calls": 1} and ScriptedModel.__init__ is original


# --------------------------------------------------------------------------- statistics and data


@pytest.mark.parametrize(
    "b, c, p", [(0, 5, 0.0625), (5, 0, 0.0625), (3, 3, 1.0), (0, 0, 1.0), (7, 7, 1.0), (1, 9, 22 / 1024), (0, 1, 1.0), (2, 10, 2 * 79 / 4096)]
)
def test_mcnemar_exact_on_known_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)


def test_discordant_pairs():
    assert discordant([True, True, False, False], [True, False, True, False]) == (1, 1)
    assert discordant([True] * 4, [False] * 4) == (4, 0)
    with pytest.raises(ValueError):
        discordant([True], [True, False])


def small_table() -> pa.Table:
    n = 400
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "year": pa.array([1990 + i % 30 for i in range(n)], pa.int64()),
            "name": pa.array([f"name {i % 7}" for i in range(n)]),
            "amount": pa.array([None if i % 50 == 0 else 10.0 + i * 3.5 for i in range(n)], pa.float64()),
            "units": pa.array([None if i % 60 == 0 else 1 + i * 13 for i in range(n)], pa.int64()),
        }
    )


def test_v2_is_deterministic_keeps_columns_and_moves_measures_within_15_percent():
    v1 = small_table()
    v2 = updated_version(v1, ["amount", "units"])
    assert v2.equals(updated_version(v1, ["amount", "units"]))
    assert not v2.equals(updated_version(v1, ["amount", "units"], seed=1))
    assert v2.schema == v1.schema and v2.num_rows == v1.num_rows
    assert v2.column("id").to_pylist() != v1.column("id").to_pylist()  # rows shuffled
    back = v2.sort_by("id")
    for untouched in ("id", "year", "name"):
        assert back.column(untouched).equals(v1.column(untouched))
    moved = 0
    for name in ("amount", "units"):
        for before, after in zip(v1.column(name).to_pylist(), back.column(name).to_pylist()):
            if before is None:
                assert after is None
                continue
            assert abs(after - before) <= SPREAD * abs(before) + 1e-9
            moved += after != before
    assert moved > v1.num_rows  # most of the 2 x 400 values move (small integers may not)


@WHOLE_STUDY
def test_v2_of_gdp_moves_only_its_measure(study, gdp_data):
    tables, prof = gdp_data
    assert measure_columns(prof) == ["Value"] == study.datasets[0].perturbed
    v1 = tables["data"]
    v2 = updated_version(v1, measure_columns(prof))
    assert v2.schema == v1.schema
    assert sorted(v2.column("Year").to_pylist()) == sorted(v1.column("Year").to_pylist())


# --------------------------------------------------------------------------- what the command prints and writes


@WHOLE_STUDY
def test_the_output_says_first_and_in_the_caption_that_the_model_was_scripted(run):
    study, printed, out = run
    assert study.scripted and printed.splitlines()[0].startswith("SCRIPTED MODEL, NOT CLAUDE")
    assert "Phase 2 per condition (SCRIPTED MODEL, not Claude)" in printed
    for name in EXPECTED_PARTS:
        assert name in printed
    markdown = (out / "ablation-scripted.md").read_text()
    assert "**SCRIPTED MODEL, NOT CLAUDE" in markdown.split("\n\n")[1]
    with open(out / "ablation-scripted.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(EXPECTED_PARTS)
    assert {r["condition"]: r["completed"] for r in rows}["no_memory"] == "False"
    assert all(r["model"].startswith("scripted model") for r in rows)
    assert all(int(r["input_tokens"]) > 0 and r["calls"] == "3" for r in rows)


@WHOLE_STUDY
def test_the_study_runs_on_a_csv_file_of_the_users_own(tmp_path):  # needs no public file
    """`--datasets PATH` takes any CSV file, not only the public ones: the study profiles it, takes its specification
    from its own lead measure, runs every condition on it and refreshes it to V2 without a model call."""
    own = plant_csv(tmp_path)
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        study = ablation.main(["--scripted", "--datasets", str(own), "--runs", "1", "--out", str(tmp_path / "results")])
    [result] = study.datasets
    assert (result.dataset, result.rows, result.columns) == ("Plant_Output.csv", 120, 4)
    assert result.spec.threshold_field in {"output_mwh", "staff", "records"}
    assert {c.condition for c in study.cells} == set(EXPECTED_PARTS) and all(c.error is None for c in study.cells)
    assert result.refresh.switched and result.refresh.client_calls == 0 and result.refresh.clients_made == 0
    assert "Plant_Output.csv" in (tmp_path / "results").joinpath(next(p.name for p in (tmp_path / "results").glob("*.md"))).read_text()


def test_datasets_are_refused_plainly_when_not_csv_unknown_or_named_twice(tmp_path, capsys, dataset):
    dataset(GDP)  # an unknown name is looked up among the public files: skips when they are missing
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "sales_2026.csv").write_text("x\n1\n")
    (tmp_path / "notes.txt").write_text("x\n1\n")
    cases = {
        str(tmp_path / "notes.txt"): "notes.txt: not a .csv file",
        "no-such-file.csv": "unknown dataset(s) no-such-file.csv: neither a CSV file nor one of the public files",
        f"{tmp_path / 'a' / 'sales_2026.csv'} {tmp_path / 'b' / 'sales_2026.csv'}": "two datasets named sales-2026",
    }
    for given, said in cases.items():
        with pytest.raises(SystemExit) as stopped:
            ablation.main(["--scripted", "--datasets", *given.split(" "), "--out", str(tmp_path / "out")])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err


def plant_csv(folder: Path) -> Path:
    own = folder / "Plant_Output.csv"
    lines = ["day,plant,output_mwh,staff"] + [f"2026-01-{d % 28 + 1:02d},{'ABC'[d % 3]},{100 + 7 * d % 53},{3 + d % 4}" for d in range(120)]
    own.write_text("\n".join(lines) + "\n")
    return own


@WHOLE_STUDY
def test_a_task_file_gives_the_study_its_own_specification_and_messages(tmp_path):
    """`--datasets TASK.yaml`: the CSV it names, with its own request, background, threshold and Phase 2 message;
    what it leaves out keeps the study's own."""
    (tmp_path / "data").mkdir()
    plant_csv(tmp_path / "data")
    task = tmp_path / "plant.task.yaml"
    task.write_text(
        "dataset: data/Plant_Output.csv\n"
        "request: Show the output per plant and day, and who staffed it.\n"
        "background: '#eef2f7'\n"
        "threshold: {field: staff, op: '>=', value: 5, color: '#7b3294'}\n"
        "phase2: Rebuild the plant dashboard on this week's numbers.\n"
    )
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        study = ablation.main(["--scripted", "--datasets", str(task), "--runs", "1", "--out", str(tmp_path / "results")])
    [result] = study.datasets
    spec = result.spec
    assert result.dataset == "Plant_Output.csv" and (spec.background, spec.threshold_field, spec.threshold_value, spec.threshold_color) == (
        "#eef2f7",
        "staff",
        5,
        "#7b3294",
    )
    [phase1] = result.phase1
    assert "Show the output per plant and day, and who staffed it." in phase1.message and "#7b3294" in phase1.message
    assert {c.condition for c in study.cells} == set(EXPECTED_PARTS) and all(c.error is None for c in study.cells)
    for c in study.cells:
        assert c.prompt is not None and c.prompt["messages"][-1]["content"][-1]["text"] == "Rebuild the plant dashboard on this week's numbers.", c.condition
    remembered = cell(study, "selective_memory")
    assert remembered.completed and remembered.dashboard is not None and remembered.dashboard["theme"]["background"] == "#eef2f7"
    staffed = [t for comp in remembered.dashboard["components"] for t in comp.get("thresholds") or []]
    staffed += [t for comp in remembered.dashboard["components"] for conf in (comp.get("columns") or {}).values() for t in conf.get("thresholds") or []]
    assert {"op": ">=", "value": 5, "color": "#7b3294"} in staffed
    assert not cell(study, "no_memory").completed  # the file's specification, not the study's, is what memory must carry
    markdown = next((tmp_path / "results").glob("*.md")).read_text()
    assert "Rebuild the plant dashboard on this week's numbers." in markdown and "staff >= 5" in markdown


def test_a_task_file_with_problems_is_refused_with_each_problem_at_its_line(tmp_path, capsys):
    plant_csv(tmp_path)
    task = tmp_path / "bad.task.yaml"
    task.write_text("dataset: Plant_Output.csv\nbackground: blue\nthreshold:\n  field: megawatts\n  op: '=>'\n  value: lots\nphase3: again\n")
    with pytest.raises(SystemExit) as stopped:
        ablation.main(["--scripted", "--datasets", str(task), "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{task} cannot be used:" in err
    name = str(task)
    for line, field, said in (
        (2, "background", "'blue' is not a colour (allowed: #rrggbb)"),
        (4, "threshold.field", "'megawatts' is not a column of Plant_Output.csv (allowed: day, plant, output_mwh, staff, records)"),
        (5, "threshold.op", "'=>' is not a comparison (allowed: >= > <= < ==)"),
        (6, "threshold.value", "'lots' is not a number"),
        (7, "phase3", "unknown field 'phase3' (allowed: dataset, request, background, threshold, phase2)"),
    ):
        assert f"{name}:{line}: {field}: error: {said}" in err, (field, err)
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written
    task.write_text("dataset: missing.csv\n")
    with pytest.raises(SystemExit):
        ablation.main(["--scripted", "--datasets", str(task), "--out", str(tmp_path / "out")])
    assert f"{name}:1: dataset: error: there is no file {tmp_path / 'missing.csv'}" in capsys.readouterr().err


def test_the_task_file_in_the_evaluation_page_is_one_the_study_takes(tmp_path):
    page = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "plant_output.csv").write_text("day,plant,output_mwh,staff\n2026-01-01,A,120,3\n")
    (tmp_path / "plant.task.yaml").write_text(example)
    task = load(tmp_path / "plant.task.yaml")
    assert task.csv == (tmp_path / "plant_output.csv").resolve() and set(task.values) == {"request", "background", "threshold", "phase2"}
    spec = task.applied(FormattingSpec("plant_output.csv", "staff", 1))
    assert (spec.threshold_field, spec.threshold_value, spec.phase2_message) == ("output_mwh", 120, "Regenerate the dashboard with this week's output.")
