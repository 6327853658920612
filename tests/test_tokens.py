"""Token counts (lib/tokens.py): the offline estimate, and the count_tokens API when a key is set.

No test reaches the network: without a key nothing but arithmetic runs, and with
one the real `anthropic` SDK sends its request to a fake HTTP transport.
"""
from __future__ import annotations

import json
import math

import anthropic
import httpx2
import pytest

from lib import secrets, tokens


@pytest.fixture
def secret_store(monkeypatch):
    """No API key anywhere: not in the environment, and a dict in place of Streamlit's secrets file."""
    store: dict = {}

    def lookup(dotted: str):
        node = store
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    monkeypatch.setattr(secrets, "_streamlit_secret", lookup)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return store


@pytest.fixture
def api(monkeypatch):
    """The Anthropic API behind a fake transport: records each request, answers count_tokens with 1234."""
    sent: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={"input_tokens": 1234})

    real = anthropic.Anthropic

    class OverFakeTransport(real):
        def __init__(self, **kwargs):
            kwargs.pop("http_client", None)  # the app's client passes its own; this one answers instead
            kwargs.pop("max_retries", None)
            super().__init__(http_client=httpx2.Client(transport=httpx2.MockTransport(answer)), max_retries=0, **kwargs)

    monkeypatch.setattr(anthropic, "Anthropic", OverFakeTransport)
    return sent


@pytest.mark.parametrize("n", [0, 1, 3, 4, 31, 32, 33, 320, 1001])
def test_the_estimate_is_characters_over_3_2_rounded_up(n):
    estimate = tokens.estimate("x" * n)
    assert estimate == math.ceil(n / 3.2)
    assert estimate * 3.2 >= n > (estimate - 1) * 3.2  # the smallest whole count that covers the text


def test_the_estimate_counts_characters_not_bytes():
    assert tokens.estimate("é" * 32) == tokens.estimate("e" * 32) == 10


def test_the_estimate_is_above_claudes_average_on_prose():
    """The docstring's promise: at ~3.5 characters per token, an estimate never undercounts prose."""
    prose = "Green at 95 percent attainment or more, amber below that, red below eighty. " * 20
    assert tokens.estimate(prose) >= len(prose) / 3.5


def test_without_a_key_count_is_the_offline_estimate_and_builds_no_client(secret_store, monkeypatch):
    def no_client(**kwargs):
        raise AssertionError("an Anthropic client was created without a key")

    monkeypatch.setattr(anthropic, "Anthropic", no_client)
    text = "a profile " * 50
    assert tokens.count(text) == (tokens.estimate(text), tokens.ESTIMATE_METHOD)
    assert "offline estimate" in tokens.ESTIMATE_METHOD and "3.2" in tokens.ESTIMATE_METHOD


def test_with_a_key_in_the_environment_count_asks_the_count_tokens_api(secret_store, api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-env")
    monkeypatch.setenv("DASHMEM_MODEL", "claude-test-model")
    assert tokens.count("How many tokens?") == (1234, "Anthropic count_tokens API")
    [request] = api
    assert request.method == "POST" and request.url.path == "/v1/messages/count_tokens"
    assert request.headers["authorization"] == "Bearer sk-test-env"  # this SDK sends the key as a bearer token
    assert json.loads(request.content) == {"model": "claude-test-model",
                                           "messages": [{"role": "user", "content": "How many tokens?"}]}


def test_a_key_in_streamlit_secrets_is_used_too(secret_store, api):
    secret_store["anthropic"] = {"api_key": "sk-test-secrets"}
    assert tokens.count("x")[1] == "Anthropic count_tokens API"
    assert api[0].headers["authorization"] == "Bearer sk-test-secrets"


def test_an_empty_key_counts_as_no_key(secret_store, api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    assert tokens.count("abc") == (1, tokens.ESTIMATE_METHOD)
    assert api == []
