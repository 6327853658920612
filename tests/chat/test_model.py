"""The model client: the real anthropic SDK over a fake HTTP transport (httpx2.MockTransport), and ScriptedModel.

`FakeAPI` is a scripted Anthropic API: each request gets the next reply (a
Messages response dict, an httpx2.Response, or a function of the request, for
example one that raises a timeout) and is recorded as sent over the wire.
A streaming request (`"stream": true`) gets the reply as server-sent events.
"""

from __future__ import annotations

import logging
import time

import httpx2
import pytest

from lib.chat import compose, model
from lib.chat.model import AnthropicClient, ModelError, ScriptedModel, message, text_block, tool_use_block
from lib.memory import workspace
from tests.helpers.model import MODEL, FakeAPI, broken_stream, error_event, error_response, raises

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
        (error_response(500, "api_error"), "server", ["had an internal error (500)"]),
        (error_response(529, "overloaded_error"), "server", ["is overloaded (529)"]),
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
    with pytest.raises(ModelError, match=r"is overloaded \(529\)"):
        api.client().create(composed_request(), on_text=lambda text: None)


# --------------------------------------------------------------------------- issue #32: failures mid-stream, waits


def streamed_reply() -> dict:
    return message(text_block("The weakest site is Lyon, at 91 % of its target."), usage=USAGE, model=MODEL)


@pytest.mark.parametrize(
    "exc_type, kind, words",
    [
        (httpx2.RemoteProtocolError, "connection", "the connection to the Anthropic API broke in the middle of its reply"),
        (httpx2.ReadTimeout, "timeout", "the Anthropic API stopped sending in the middle of its reply (nothing for 5 s)"),
        (httpx2.ReadError, "connection", "broke in the middle of its reply"),
    ],
)
def test_a_stream_that_breaks_mid_body_is_a_model_error_and_is_not_sent_again(exc_type, kind, words):
    """The SDK lets httpx2's own error out of a stream that broke after it began; the client turns it into a ModelError,
    and does not send the request again (its text has been shown, and it may have been billed)."""
    api = FakeAPI([broken_stream(streamed_reply(), exc_type), streamed_reply()])
    chunks: list[str] = []
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2, timeout=5).create(composed_request(), on_text=chunks.append)
    assert caught.value.kind == kind and words in caught.value.message, caught.value.message
    assert "".join(chunks) == "The weakest site is Lyon, at 91 % of its target."  # what arrived before the break
    assert len(api.requests) == 1


def test_an_error_event_mid_stream_reads_overloaded_not_a_status_of_200():
    api = FakeAPI([error_event(streamed_reply(), "overloaded_error")])
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2).create(composed_request(), on_text=lambda text: None)
    text = caught.value.message
    assert caught.value.kind == "server" and "the Anthropic API is overloaded" in text and "middle of its reply" in text, text
    assert "200" not in text and "overloaded_error" not in text and len(api.requests) == 1


def test_retry_after_600_is_not_waited_for_and_the_message_says_how_long(monkeypatch):
    """The SDK would sleep 600 s twice; the client stops at once, past DASHMEM_CHAT_MAX_WAIT_S, and says when to try."""
    api = FakeAPI([error_response(429, "rate_limit_error", {"retry-after": "600"}), streamed_reply()])
    waits: list[tuple[str, int]] = []
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2).create(composed_request(), on_text=lambda text: None, on_wait=lambda *w: waits.append(w))
    assert time.monotonic() - started < 5 and len(api.requests) == 1 and waits == []
    text = caught.value.message
    assert caught.value.kind == "rate_limit" and text.startswith("rate limited (429)"), text
    assert "asks to wait 10 minutes" in text and "30 s, DASHMEM_CHAT_MAX_WAIT_S" in text, text
    monkeypatch.setenv("DASHMEM_CHAT_MAX_WAIT_S", "900")  # a cap above the wait: the session's time limit still bounds it
    api = FakeAPI([error_response(429, "rate_limit_error", {"retry-after": "600"}), streamed_reply()])
    with pytest.raises(ModelError, match="would pass the session's time limit"):
        api.client(max_retries=2).create(composed_request(), deadline=time.monotonic() + 120)
    assert len(api.requests) == 1


def test_a_short_retry_after_is_waited_for_visibly_and_the_next_try_answers():
    api = FakeAPI([error_response(429, "rate_limit_error", {"retry-after": "2"}), streamed_reply()])
    waits: list[tuple[str, int]] = []
    started = time.monotonic()
    response = api.client(max_retries=2).create(
        composed_request(), on_text=lambda text: None, on_wait=lambda *w: waits.append(w), deadline=time.monotonic() + 120
    )
    assert 1.9 <= time.monotonic() - started < 10
    assert response["content"] == streamed_reply()["content"] and len(api.requests) == 2
    assert waits[0] == ("rate limited", 2) and ("rate limited", 1) in waits  # counted down, a second at a time
    assert model.waiting_text(*waits[0]) == "waiting for the API (rate limited), 2 s"


def test_529_is_tried_again_and_the_message_counts_the_attempts():
    api = FakeAPI([error_response(529, "overloaded_error")] * 3)
    waits: list[tuple[str, int]] = []
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2).create(composed_request(), on_text=lambda text: None, on_wait=lambda *w: waits.append(w))
    assert len(api.requests) == 3 and {reason for reason, _ in waits} == {"overloaded"}
    assert caught.value.message.startswith("the Anthropic API is overloaded (529) after 3 attempts"), caught.value.message
    assert caught.value.attempts == 3


def test_the_time_out_message_counts_the_attempts():
    api = FakeAPI([raises(httpx2.ReadTimeout)] * 3)
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2, timeout=5).create(composed_request(), on_text=lambda text: None)
    assert len(api.requests) == 3
    assert caught.value.kind == "timeout" and "timed out after 3 attempts of 5 s" in caught.value.message, caught.value.message


def test_no_attempt_outlives_the_sessions_time_limit():
    """Each attempt's read time-out is held to what the session has left, and the message says so."""
    read_limits: list[float] = []

    def times_out(request):
        read_limits.append(request.extensions["timeout"]["read"])
        raise httpx2.ReadTimeout("simulated", request=request)

    api = FakeAPI([times_out] * 3)
    with pytest.raises(ModelError) as caught:
        api.client(max_retries=2, timeout=60).create(composed_request(), deadline=time.monotonic() + 3)
    assert read_limits[0] <= 3 and all(limit <= 3 for limit in read_limits), read_limits
    assert caught.value.kind == "timeout" and "timed out after" in caught.value.message
    assert "time limit" in caught.value.message, caught.value.message


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
