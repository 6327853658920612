"""Secret references: resolved at fetch time, the app's own credentials out of reach, values redacted."""
from __future__ import annotations

import pytest

from lib import secrets
from lib.connectors.base import FetchContext, SourceError


def test_env_reference_resolves(monkeypatch):
    monkeypatch.setenv("SALES_DB_PASSWORD", "pw-123")
    assert secrets.resolve("env:SALES_DB_PASSWORD") == "pw-123"


def test_missing_reference_names_the_reference_only(monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(secrets.SecretMissing, match="env:NOT_SET_ANYWHERE is not set"):
        secrets.resolve("env:NOT_SET_ANYWHERE")


def test_a_literal_value_is_never_repeated():
    with pytest.raises(secrets.SecretMissing) as info:
        secrets.resolve("hunter2-literal")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("ref", ["env:DASHMEM_COOKIE_KEY", "env:ANTHROPIC_API_KEY", "env:dashmem_anything",
                                 "secrets:auth.cookie_key", "secrets:anthropic.api_key", "secrets:ANTHROPIC_API_KEY"])
def test_the_apps_own_credentials_are_out_of_reach_of_sources(ref, monkeypatch):
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "cookie-signing-key-value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-value")
    ctx = FetchContext(workspace_path=".")
    with pytest.raises(SourceError, match="belongs to the app itself") as info:
        ctx.secret("leaky", ref)
    assert "cookie-signing-key-value" not in str(info.value) and "sk-ant-value" not in str(info.value)


def test_an_operator_can_narrow_references_to_prefixes(monkeypatch):
    monkeypatch.setenv("DASHMEM_SECRET_ALLOW", "SRC_")
    monkeypatch.setenv("SRC_TOKEN", "ok")
    monkeypatch.setenv("OTHER_TOKEN", "no")
    assert secrets.resolve("env:SRC_TOKEN") == "ok"
    with pytest.raises(secrets.SecretMissing, match="DASHMEM_SECRET_ALLOW"):
        secrets.resolve("env:OTHER_TOKEN")


def test_redact_replaces_every_resolved_value():
    assert secrets.redact("login for bob:pw-123 failed (pw-123)", ["pw-123"]) == "login for bob:*** failed (***)"


@pytest.mark.parametrize("url", ["postgresql://u:p@ssw0rdTAIL@host/db", "postgresql://u:pass word SECRETTAIL@host/db"])
def test_url_masking_hides_passwords_with_at_signs_and_spaces(url):
    masked = secrets.redact_url(url)
    assert "TAIL" not in masked and masked.endswith("@host/db")
    assert secrets.redact_url("postgresql://reporting@h:5432/db") == "postgresql://reporting@h:5432/db"
