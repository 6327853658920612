"""The one retry and timeout policy (lib/data/connectors/policy.py): its schema, its waits and when it gives up.

Each connector's use of it, against real failing servers, is tested with the connector
(test_rest_source.py, test_sql_source.py, test_mcp_source.py).
"""

from __future__ import annotations

import json

import pytest

from lib.data.connectors.base import FetchContext, SourceError
from lib.data.connectors.policy import DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_S, DEFAULT_MAX_BACKOFF_S, RetryPolicy, Transient
from lib.memory import schemas
from lib.memory.yamlio import parse

from ..conftest import ROOT


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path)


class Attempts:
    """An attempt that fails with the given exceptions in turn, then returns "rows"; it counts its calls."""

    def __init__(self, *failures: Exception):
        self.failures = list(failures)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "rows"


def test_the_schema_states_the_defaults_the_code_uses():
    retry = json.loads((ROOT / "schemas" / "sources.schema.json").read_text())["$defs"]["retry"]["properties"]
    assert (retry["attempts"]["default"], retry["backoff_s"]["default"], retry["max_backoff_s"]["default"]) == (
        DEFAULT_ATTEMPTS,
        DEFAULT_BACKOFF_S,
        DEFAULT_MAX_BACKOFF_S,
    )
    assert RetryPolicy.of({}, default_timeout_s=30) == RetryPolicy(30.0, DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_S, DEFAULT_MAX_BACKOFF_S)


def test_a_transient_failure_is_retried_with_doubling_waits_until_it_passes(ctx):
    waits: list[float] = []
    attempt = Attempts(Transient("cannot reach x"), Transient("cannot reach x"), Transient("cannot reach x"))
    policy = RetryPolicy.of({"timeout_s": 5, "retry": {"attempts": 4, "backoff_s": 0.25, "max_backoff_s": 0.75}}, 30)
    assert policy.run(attempt, "s", ctx, sleep=waits.append, draw=lambda: 1.0) == "rows"
    assert attempt.calls == 4 and waits == [0.25, 0.5, 0.75]  # the third wait is capped


def test_waits_are_jittered_between_half_and_all_of_the_backoff(ctx):
    policy = RetryPolicy(timeout_s=5, attempts=4, backoff_s=0.25, max_backoff_s=0.75)
    halves: list[float] = []
    policy.run(Attempts(Transient("x"), Transient("x"), Transient("x")), "s", ctx, sleep=halves.append, draw=lambda: 0.0)
    assert halves == [0.125, 0.25, 0.375]
    drawn: list[float] = []
    for _ in range(20):  # the default draw: fresh random numbers, each wait within its bounds
        policy.run(Attempts(Transient("x"), Transient("x"), Transient("x")), "s", ctx, sleep=drawn.append)
    bounds = [(0.125, 0.25), (0.25, 0.5), (0.375, 0.75)] * 20
    assert all(low <= wait <= high for wait, (low, high) in zip(drawn, bounds))
    assert len(set(drawn)) > 3  # not the same few numbers every time: sessions that failed together spread out
    assert policy.worst_case_s() == 4 * 5 + 0.25 + 0.5 + 0.75  # bounded by the longest waits


def test_anything_not_transient_fails_at_once(ctx):
    waits: list[float] = []
    attempt = Attempts(SourceError("s", "HTTP 404 from x"))
    with pytest.raises(SourceError, match="HTTP 404 from x"):
        RetryPolicy(timeout_s=5, attempts=5).run(attempt, "s", ctx, sleep=waits.append)
    assert attempt.calls == 1 and waits == []


def test_giving_up_names_the_last_failure_and_the_attempts(ctx):
    waits: list[float] = []
    attempt = Attempts(Transient("HTTP 502 from x", ": bad gateway"), Transient("HTTP 503 from x", ": restarting"))
    with pytest.raises(SourceError) as caught:
        RetryPolicy(timeout_s=5, attempts=2).run(attempt, "tickets", ctx, sleep=waits.append)
    assert str(caught.value) == "source 'tickets': HTTP 503 from x after 2 attempts: restarting"
    assert len(waits) == 1 and DEFAULT_BACKOFF_S / 2 <= waits[0] <= DEFAULT_BACKOFF_S
    with pytest.raises(SourceError, match="^source 'tickets': cannot reach x after 1 attempt$"):
        RetryPolicy(timeout_s=5, attempts=1).run(Attempts(Transient("cannot reach x")), "tickets", ctx, sleep=waits.append)


def test_the_servers_retry_after_is_honoured_within_the_cap(ctx):
    waits: list[float] = []
    attempt = Attempts(Transient("HTTP 429", retry_after_s=3), Transient("HTTP 429", retry_after_s=3600))
    policy = RetryPolicy(timeout_s=5, attempts=3, backoff_s=0.5, max_backoff_s=10)
    assert policy.run(attempt, "s", ctx, sleep=waits.append) == "rows"
    assert waits == [3, 10]


def test_a_secret_in_the_last_failure_is_scrubbed(ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_POLICY_TOKEN", "tok-0123456789")
    ctx.secret("s", "env:DM_TEST_POLICY_TOKEN")
    with pytest.raises(SourceError) as caught:
        RetryPolicy(timeout_s=1, attempts=1).run(Attempts(Transient("HTTP 503", ": bad token tok-0123456789")), "s", ctx)
    assert "tok-0123456789" not in str(caught.value) and "***" in str(caught.value)


def test_the_overall_time_is_bounded():
    policy = RetryPolicy(timeout_s=10, attempts=4, backoff_s=1, max_backoff_s=3)
    assert policy.worst_case_s() == 4 * 10 + 1 + 2 + 3
    # The schema's largest settings still give a bound (10 attempts of 600 s, 9 waits of at most 60 s).
    assert RetryPolicy(timeout_s=600, attempts=10, backoff_s=60, max_backoff_s=60).worst_case_s() == 6000 + 9 * 60


SOURCES = """\
sources:
  - name: orders
    type: sql
    url: postgresql://reporting@db.internal/sales
    table: orders
    timeout_s: 5
    retry: {attempts: 4, backoff_s: 1, max_backoff_s: 10}
  - name: tickets
    type: rest
    url: https://api.example.com/tickets
    retry: {attempts: 2}
  - name: stock
    type: mcp
    url: https://mcp.example.com/mcp
    tool: list_stock
    retry: {attempts: 1}
"""


def errors(text: str):
    return schemas.validate_document("sources", parse(text), "ws/sources.yaml")


def test_one_shape_is_valid_for_sql_rest_and_mcp():
    assert errors(SOURCES) == []


@pytest.mark.parametrize(
    ("change", "field", "allowed"),
    [
        ("attempts: 4,", "sources[0].retry.attempts", "1"),  # attempts: 0
        ("backoff_s: 1,", "sources[0].retry.backoff_s", "60"),  # backoff_s: 120
        ("max_backoff_s: 10}", "sources[0].retry", "attempts"),  # an unknown key
    ],
)
def test_a_bad_retry_setting_names_the_field_and_what_is_allowed(change, field, allowed):
    bad = {"attempts: 4,": "attempts: 0,", "backoff_s: 1,": "backoff_s: 120,", "max_backoff_s: 10}": "max_backoff_s: 10, jitter: true}"}[change]
    found = errors(SOURCES.replace(change, bad))
    assert len(found) == 1, [e.format() for e in found]
    assert found[0].line == 7 and (found[0].field or "").startswith(field) and allowed in (found[0].allowed or found[0].message)


def test_the_old_rest_retries_setting_points_at_retry():
    found = errors(SOURCES.replace("    retry: {attempts: 2}\n", "    retries: 2\n"))
    assert len(found) == 1 and found[0].field == "sources[1].retries"
    assert "did you mean 'retry'?" in found[0].message
