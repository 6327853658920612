"""Secret references: resolved at fetch time, the app's own credentials out of reach, values redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.data.connectors.base import FetchContext, SourceError
from lib.memory import credentials, secrets


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


@pytest.mark.parametrize(
    "ref",
    [
        "env:DASHMEM_COOKIE_KEY",
        "env:ANTHROPIC_API_KEY",
        "env:dashmem_anything",
        "secrets:auth.cookie_key",
        "secrets:anthropic.api_key",
        "secrets:ANTHROPIC_API_KEY",
    ],
)
def test_the_apps_own_credentials_are_out_of_reach_of_sources(ref, monkeypatch):
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "cookie-signing-key-value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-value")
    ctx = FetchContext(workspace_path=Path("."))
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
    assert credentials.redact("login for bob:pw-123 failed (pw-123)", ["pw-123"]) == "login for bob:*** failed (***)"


@pytest.mark.parametrize("url", ["postgresql://u:p@ssw0rdTAIL@host/db", "postgresql://u:pass word SECRETTAIL@host/db"])
def test_url_masking_hides_passwords_with_at_signs_and_spaces(url):
    masked = credentials.redact_url(url)
    assert "TAIL" not in masked and masked.endswith("@host/db")
    assert credentials.redact_url("postgresql://reporting@h:5432/db") == "postgresql://reporting@h:5432/db"


def test_url_masking_hides_every_credential_looking_query_parameter():
    masked = credentials.redact_url("https://h/v1?page=2&access_token=T0K&api_key=K3Y&key=K&sort=key&max_tokens=5#token=F")
    assert masked == "https://h/v1?page=2&access_token=***&api_key=***&key=***&sort=key&max_tokens=5#token=***"


@pytest.mark.parametrize(
    "name, secret",
    [
        ("X-Auth-Token", True),
        ("Private-Token", True),
        ("X-API-Key", True),
        ("Cookie", True),
        ("Proxy-Authorization", True),
        ("access_token", True),
        ("apiKey", True),
        ("key", True),
        ("client_secret", True),
        ("sslpassword", True),
        ("Accept", False),
        ("max_tokens", False),
        ("sort_key", False),
        ("author", False),
        ("keyword", False),
        ("sslkey", False),
    ],
)
def test_credential_names(name, secret):
    assert credentials.is_secret_name(name) is secret


def test_every_header_the_schema_refuses_is_a_credential_name():
    """The schema refuses some credential headers by name; the Python check must know them too."""
    import re

    from lib.memory.schemas import load_schema

    pattern = load_schema("sources")["$defs"]["rest"]["properties"]["headers"]["propertyNames"]["not"]["pattern"]
    alternatives = re.fullmatch(r"\(\?i\)\^\((.*)\)\$", pattern)
    assert alternatives, pattern
    names = alternatives.group(1).split("|")
    assert names and all(credentials.is_secret_name(n) for n in names)


def test_the_apps_own_references_are_reserved_whatever_the_allow_list(monkeypatch):
    monkeypatch.setenv("DASHMEM_SECRET_ALLOW", "DASHMEM_,auth.")
    assert secrets.reserved("env", "DASHMEM_COOKIE_KEY") and secrets.reserved("secrets", "auth.cookie_key")
    assert secrets.reserved("env", "SALES_DB_PASSWORD") is None


SECRETS_IN_A_CLI = r"""
import json, sys
from lib.memory import secrets
print(json.dumps({"value": secrets.resolve("secrets:warehouse.password"), "global": secrets.lookup("secrets:only_global"),
                  "streamlit": "streamlit" in sys.modules}))
"""


def test_a_cli_reads_the_secrets_files_streamlit_reads_without_loading_streamlit(tmp_path):
    """cron and the CLI resolve `secrets:KEY` from `.streamlit/secrets.toml` (the working folder's over the home
    folder's, as Streamlit does) without importing Streamlit, which cost each command 0.7 s."""
    import json
    import os
    import subprocess
    import sys

    from ..conftest import ROOT

    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".streamlit").mkdir(parents=True)
    (work / ".streamlit").mkdir(parents=True)
    (home / ".streamlit" / "secrets.toml").write_text('only_global = "g"\n[warehouse]\npassword = "from-home"\n')
    (work / ".streamlit" / "secrets.toml").write_text('[warehouse]\npassword = "from-work"\n')
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SECRETS_IN_A_CLI], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"value": "from-work", "global": "g", "streamlit": False}
    (work / ".streamlit" / "secrets.toml").write_text("[warehouse\n")  # damaged: treated as absent, the home one still counts
    out = subprocess.run([sys.executable, "-c", SECRETS_IN_A_CLI], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["value"] == "from-home"
