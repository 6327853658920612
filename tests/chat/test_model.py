"""The model client: the real anthropic SDK over a fake HTTP transport (httpx2.MockTransport), and ScriptedModel.

`FakeAPI` is a scripted Anthropic API: each request gets the next reply (a
Messages response dict, an httpx2.Response, or a function of the request, for
example one that raises a timeout) and is recorded as sent over the wire.
A streaming request (`"stream": true`) gets the reply as server-sent events.
"""

from __future__ import annotations

import logging

import httpx2
import pytest

from lib.chat import compose, model
from lib.chat.model import AnthropicClient, ModelError, ScriptedModel, message, text_block, tool_use_block
from lib.memory import workspace
from tests.helpers.model import MODEL, FakeAPI, error_response, raises

from ..conftest import WORKSPACES

USAGE = {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 500}


def composed_request(mode="edit") -> dict:
    ws, _ = workspace.load(WORKSPACES / "supply-chain-weekly")
    return compose.compose(ws.data, mode, "Which site missed its target?", model=MODEL).request


def test_the_composed_request_goes_over_the_wire_unchanged():
    api = FakeAPI([message(text_block("Lyon."), usage=USAGE, model=MODEL)])
    request = composed_request()
    response = api.client().create(request)

    [sent] = api.requests
    assert sent.method == "POST" and sent.url.path == "/v1/messages"
    assert sent.headers["authorization"] == "Bearer test" and sent.headers["anthropic-version"]  # this SDK sends the key as a bearer token
    assert sent.headers["content-type"] == "application/json"
    body = api.bodies[0]
    assert body == request  # model, max_tokens, system, tools, messages exactly as composed
    assert body["cache_control"] == {"type": "ephemeral"}  # the automatic breakpoint, a top-level field this SDK sends
    assert [b.get("cache_control") for b in body["system"]] == [None, None, None, {"type": "ephemeral"}]
    assert body["system"][1]["text"].startswith("Workspace: Supply chain weekly")
    assert body["messages"][0]["content"][0]["text"].startswith("# Data profile")
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in body["tools"]] == ["run_sql", "write_dashboard", "edit_dashboard", "write_report", "edit_report", "propose_rule"]
    assert response["content"] == [{"type": "text", "text": "Lyon."}]
    assert response["usage"] == USAGE and response["stop_reason"] == "end_turn"


def test_the_client_model_overrides_the_request_model():
    api = FakeAPI([message(text_block("ok"), usage=USAGE, model=MODEL)])
    api.client(model="claude-haiku-4-5").create(composed_request("query"))
    assert api.bodies[0]["model"] == "claude-haiku-4-5"


def test_streaming_text_arrives_through_on_text_and_the_final_message_is_whole():
    reply = message(text_block("Looking at the gates first."), tool_use_block("toolu_1", "run_sql", {"sql": "SELECT 1 AS one"}), usage=USAGE, model=MODEL)
    api = FakeAPI([reply])
    chunks: list[str] = []
    response = api.client().create(composed_request(), on_text=chunks.append)
    assert api.bodies[0]["stream"] is True
    assert chunks == ["Looking at th", "e gates first."]
    assert response["content"] == reply["content"]
    assert response["stop_reason"] == "tool_use"
    assert response["usage"] == USAGE  # message_start's cache counts plus message_delta's output tokens


@pytest.mark.parametrize(
    "reply, kind, words",
    [
        (error_response(429, "rate_limit_error", {"retry-after": "7"}), "rate_limit", ["rate limited (429)", "try again in a moment", "7 s"]),
        (error_response(500, "api_error"), "server", ["returned 500"]),
        (error_response(529, "overloaded_error"), "server", ["returned 529", "overloaded_error"]),
        (error_response(401, "authentication_error"), "auth", ["authentication failed", "ANTHROPIC_API_KEY"]),
        (error_response(400, "invalid_request_error"), "request", ["refused the request (400)"]),
        (raises(httpx2.ReadTimeout), "timeout", ["timed out after 5 s"]),
        (raises(httpx2.ConnectError), "connection", ["cannot reach the Anthropic API"]),
    ],
)
def test_api_failures_become_clear_model_errors(reply, kind, words):
    api = FakeAPI([reply])
    with pytest.raises(ModelError) as caught:
        api.client(timeout=5).create(composed_request())
    assert caught.value.kind == kind
    for word in words:
        assert word in str(caught.value)


def test_a_failure_while_streaming_is_a_model_error_too():
    api = FakeAPI([error_response(529, "overloaded_error")])
    with pytest.raises(ModelError, match="returned 529"):
        api.client().create(composed_request(), on_text=lambda text: None)


def test_no_api_key_means_no_client_and_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .streamlit/secrets.toml here
    assert model.api_key_available() is False
    with pytest.raises(ModelError) as caught:
        AnthropicClient()
    assert caught.value.kind == "no_key" and "ANTHROPIC_API_KEY" in str(caught.value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert model.api_key_available() is True
    assert model.resolve_api_key("explicit") == "explicit"


def test_request_bodies_are_never_logged_even_at_debug(caplog):
    caplog.set_level(logging.DEBUG)
    api = FakeAPI([message(text_block("ok"), usage=USAGE, model=MODEL)])
    request = composed_request()
    request["messages"][0]["content"][-1]["text"] = "secret plan ORCA-5521"
    api.client().create(request)
    assert caplog.records  # the SDK did log (URLs, status, retries) ...
    assert "ORCA-5521" not in caplog.text  # ... but never the prompt


def test_scripted_model_replays_records_and_streams():
    replies = [
        message(tool_use_block("t1", "run_sql", {"sql": "SELECT 1"})),
        message(text_block("two words")),
        ModelError("rate_limit", "rate limited (429) — try again in a moment"),
    ]
    scripted = ScriptedModel(replies)
    request = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    assert scripted.create(request)["stop_reason"] == "tool_use"
    request["messages"].append({"role": "assistant", "content": "changed later"})
    chunks: list[str] = []
    assert scripted.create(request, on_text=chunks.append)["content"][0]["text"] == "two words"
    assert "".join(chunks).strip() == "two words"
    assert len(scripted.requests[0]["messages"]) == 1 and len(scripted.requests[1]["messages"]) == 2
    with pytest.raises(ModelError, match="rate limited"):
        scripted.create(request)
    with pytest.raises(ModelError, match="no response left"):
        scripted.create(request)
