"""The settings registry (lib/core/settings.py): every DASHMEM_ name the code mentions is registered and read
through it at call time, defaults, parsing errors, and the table in docs/settings.md generated from it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from lib.core import settings
from lib.core.settings import SettingError, UnknownSetting
from lib.data import netguard

from ..conftest import ROOT

NAME = re.compile(r"\bDASHMEM_[A-Z0-9_]*[A-Z0-9]")
# Where the product, its pages, the benchmarks and the docs may mention a setting.
MENTIONS = [
    ROOT / "app.py",
    ROOT / "Makefile",
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "lib").rglob("*.py")),
    *sorted((ROOT / "app_pages").rglob("*.py")),
    *sorted((ROOT / "bench").rglob("*.py")),
]
# Reading the environment directly, bypassing the registry (writing it, as the benchmarks do, is fine).
DIRECT_READ = re.compile(r"""(environ\.get\(|getenv\(|environ\[)\s*["']DASHMEM_\w*["']\s*(?!\]\s*=[^=])|["']env:DASHMEM_""")


@pytest.fixture
def clean(monkeypatch):
    """No DASHMEM_ variable set, and no Streamlit secrets."""
    for name in settings.REGISTRY:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings, "streamlit_secret", lambda key: None)
    return monkeypatch


def test_every_dashmem_name_the_code_and_docs_mention_is_registered():
    mentioned = {}
    for path in MENTIONS:
        for name in NAME.findall(path.read_text(encoding="utf-8")):
            mentioned.setdefault(name, str(path.relative_to(ROOT)))
    unknown = {name: where for name, where in mentioned.items() if name not in settings.REGISTRY}
    assert not unknown, f"DASHMEM_ names not in lib/core/settings.py's registry: {unknown}"
    assert len(mentioned) >= 15


def test_only_the_registry_reads_dashmem_variables():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in MENTIONS
        if path.suffix == ".py" and path != ROOT / "lib" / "settings.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DIRECT_READ.search(line)
    ]
    assert not offenders, "read DASHMEM_ settings with settings.get(NAME):\n" + "\n".join(offenders)


def test_the_settings_page_table_is_the_generated_one():
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert settings.readme_table(page) == settings.markdown_table(), (
        "the settings table in docs/settings.md has drifted: run `python -m lib settings --readme docs/settings.md`"
    )
    assert settings.with_table(page) == page


def test_the_cli_prints_the_table(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "lib", "settings"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout == settings.markdown_table(), proc.stderr
    stale = tmp_path / "settings.md"  # --readme takes any file with the table's markers
    stale.write_text(f"# x\n\n{settings.TABLE_BEGIN}\n| old |\n{settings.TABLE_END}\n\nafter\n")
    proc = subprocess.run([sys.executable, "-m", "lib", "settings", "--readme", str(stale)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert stale.read_text() == f"# x\n\n{settings.TABLE_BEGIN}\n{settings.markdown_table()}{settings.TABLE_END}\n\nafter\n"


def test_every_setting_is_documented_in_one_line():
    assert len(settings.REGISTRY) >= 15
    for s in settings.REGISTRY.values():
        for text in (s.description, s.set_by, s.kind):
            assert text and "\n" not in text, s.name


def test_a_checkout_is_told_from_an_installed_package(tmp_path):
    checkout = tmp_path / "clone"
    (checkout / "lib").mkdir(parents=True)
    (checkout / "app.py").touch()
    (checkout / "pyproject.toml").touch()
    assert settings.checkout_root(checkout / "lib") == checkout
    assert settings.checkout_root(checkout.parent / "elsewhere" / "lib") is None
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "dashmem").mkdir(parents=True)
    assert settings.checkout_root(site / "dashmem") is None
    # Inside site-packages it is installed, whatever else lies beside it.
    (site / "app.py").touch()
    (site / "pyproject.toml").touch()
    assert settings.checkout_root(site / "dashmem") is None
    target = tmp_path / "target"  # `pip install --target`
    (target / "dashmem").mkdir(parents=True)
    assert settings.checkout_root(target / "dashmem") is None
    # These tests run in a checkout: its state folders are the checkout's, as always.
    assert settings.CHECKOUT == settings.PROJECT_ROOT == ROOT


def test_an_installed_package_keeps_its_state_in_the_users_folders(clean, monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "CHECKOUT", None)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert settings.get("DASHMEM_CONFIG_REPO") == tmp_path / "data" / "dashmem" / "config-repo"
    assert settings.get("DASHMEM_CACHE_DIR") == tmp_path / "cache" / "dashmem"
    assert settings.get("DASHMEM_USERS") == tmp_path / "data" / "dashmem" / "users.yaml"
    assert settings.get("DASHMEM_DATASETS") == tmp_path / "data" / "dashmem" / "datasets"
    # The templates are the ones shipped inside the package.
    assert settings.get("DASHMEM_TEMPLATES") == settings.PACKAGE_DIR / "_templates"
    # Read at call time, and the XDG defaults when the variables are unset.
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert settings.get("DASHMEM_CONFIG_REPO") == tmp_path / "home" / ".local" / "share" / "dashmem" / "config-repo"
    assert settings.get("DASHMEM_CACHE_DIR") == tmp_path / "home" / ".cache" / "dashmem"
    # A setting still wins over the default.
    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "repo"))
    assert settings.get("DASHMEM_CONFIG_REPO") == (tmp_path / "repo").resolve()


def test_an_unregistered_name_is_an_error():
    with pytest.raises(UnknownSetting, match="DASHMEM_NO_SUCH_THING is not a dashmem setting"):
        settings.get("DASHMEM_NO_SUCH_THING")


def test_defaults(clean):
    assert settings.get("DASHMEM_CONFIG_REPO") == settings.PROJECT_ROOT / ".data" / "config-repo"
    assert settings.get("DASHMEM_CACHE_DIR") == settings.PROJECT_ROOT / ".data" / "cache"
    assert settings.get("DASHMEM_TEMPLATES") == settings.PROJECT_ROOT / "workspaces"
    assert settings.get("DASHMEM_USERS") == settings.PROJECT_ROOT / "demo" / "users.yaml"
    assert settings.get("DASHMEM_COOKIE_KEY") is None
    assert settings.get("DASHMEM_MODEL") == settings.DEFAULT_MODEL == "claude-sonnet-5-5"
    assert settings.get("DASHMEM_DATA_DIRS") == ()
    assert settings.get("DASHMEM_MCP_COMMANDS") == ()
    assert settings.get("DASHMEM_SECRET_ALLOW") == ()
    assert settings.get("DASHMEM_HTTP_ALLOW") == ()
    assert settings.get("DASHMEM_HTTP_ALLOW_NETWORKS") == ()
    assert settings.get("DASHMEM_ALLOW_PRIVATE_NETWORKS") is False
    assert settings.get("DASHMEM_QUERY_WORKERS") == 4
    assert settings.get("DASHMEM_DEBUG") is False
    # Two defaults for the memory limit, on purpose: a query worker 2GB, the in-process DuckDB 4GB.
    assert settings.get("DASHMEM_QUERY_MEMORY") == 2 << 30
    assert settings.sandbox_memory_limit() == "4GB"


def test_empty_counts_as_unset(clean):
    clean.setenv("DASHMEM_MODEL", "")
    clean.setenv("DASHMEM_QUERY_MEMORY", " ")
    assert settings.get("DASHMEM_MODEL") == settings.DEFAULT_MODEL
    assert settings.get("DASHMEM_QUERY_MEMORY") == 2 << 30 and settings.sandbox_memory_limit() == "4GB"


def test_values_are_read_at_call_time(clean):
    clean.setenv("DASHMEM_QUERY_WORKERS", "2")
    assert settings.get("DASHMEM_QUERY_WORKERS") == 2
    clean.setenv("DASHMEM_QUERY_WORKERS", "7")
    assert settings.get("DASHMEM_QUERY_WORKERS") == 7
    clean.delenv("DASHMEM_QUERY_WORKERS")
    assert settings.get("DASHMEM_QUERY_WORKERS") == 4


def test_parsed_values(clean, tmp_path):
    clean.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "repo"))
    clean.setenv("DASHMEM_DATA_DIRS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    clean.setenv("DASHMEM_MCP_COMMANDS", "python servers/inventory.py; npx -y @acme/mcp ;")
    clean.setenv("DASHMEM_SECRET_ALLOW", "SRC_, sources.,")
    clean.setenv("DASHMEM_HTTP_ALLOW", "API.example.com, *.corp.example")
    clean.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "10.0.0.0/8; 127.0.0.1")
    assert settings.config_repo_path() == tmp_path / "repo"
    assert settings.get("DASHMEM_DATA_DIRS") == (tmp_path / "a", tmp_path / "b")
    assert settings.get("DASHMEM_MCP_COMMANDS") == [["python", "servers/inventory.py"], ["npx", "-y", "@acme/mcp"]]
    assert settings.get("DASHMEM_SECRET_ALLOW") == ("SRC_", "sources.")
    assert settings.get("DASHMEM_HTTP_ALLOW") == ("api.example.com", "*.corp.example")
    assert [str(n) for n in settings.get("DASHMEM_HTTP_ALLOW_NETWORKS")] == ["10.0.0.0/8", "127.0.0.1/32"]
    for word, value in [("1", True), ("YES", True), (" on ", True), ("true", True), ("0", False), ("off", False), ("no", False)]:
        clean.setenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", word)
        assert settings.get("DASHMEM_ALLOW_PRIVATE_NETWORKS") is value, word
    clean.setenv("DASHMEM_DEBUG", "1")
    assert settings.get("DASHMEM_DEBUG") is True


@pytest.mark.parametrize(
    "text, size, sandbox",
    [
        ("512MB", 512 << 20, "512MB"),
        (" 2gb ", 2 << 30, "2gb"),
        ("1.5GB", 3 << 29, "1.5GB"),
        ("2147483648", 2 << 30, "2147483648B"),
        ("64KB", 64 << 10, "64KB"),
    ],
)
def test_memory_sizes(clean, text, size, sandbox):
    """Query workers get bytes (binary units); the in-process DuckDB gets the text, which DuckDB reads itself."""
    clean.setenv("DASHMEM_QUERY_MEMORY", text)
    assert settings.get("DASHMEM_QUERY_MEMORY") == size
    from lib.data import query_worker

    assert query_worker.memory_cap_bytes() == size
    assert settings.sandbox_memory_limit() == sandbox


@pytest.mark.parametrize(
    "name, text, allowed",
    [
        ("DASHMEM_QUERY_MEMORY", "lots", "which is not a memory size such as 512MB or 2GB"),
        ("DASHMEM_QUERY_MEMORY", "0", "which is not a memory size such as 512MB or 2GB"),
        ("DASHMEM_QUERY_MEMORY", "-1GB", "which is not a memory size such as 512MB or 2GB"),
        ("DASHMEM_QUERY_MEMORY", "2GiB", "which is not a memory size such as 512MB or 2GB"),
        ("DASHMEM_QUERY_MEMORY", "nanGB", "which is not a memory size such as 512MB or 2GB"),
        ("DASHMEM_QUERY_WORKERS", "four", "which is not a whole number of at least 1"),
        ("DASHMEM_QUERY_WORKERS", "0", "which is not a whole number of at least 1"),
        ("DASHMEM_ALLOW_PRIVATE_NETWORKS", "maybe", "allowed: 1, true, yes, on (or 0, false, no, off, or unset)"),
        ("DASHMEM_HTTP_ALLOW_NETWORKS", "10.0.0.0/8,localnet", "lists 'localnet', which is not a network such as 10.20.0.0/16"),
    ],
)
def test_a_value_that_is_not_allowed_is_one_line_naming_the_variable(clean, name, text, allowed):
    clean.setenv(name, text)
    with pytest.raises(SettingError) as caught:
        settings.get(name)
    message = str(caught.value)
    assert message.startswith(f"{name} ") and allowed in message and "\n" not in message


def test_the_sandbox_refuses_a_memory_limit_that_is_not_a_size(clean):
    clean.setenv("DASHMEM_QUERY_MEMORY", "lots")
    with pytest.raises(SettingError, match="DASHMEM_QUERY_MEMORY is 'lots'"):
        settings.sandbox_memory_limit()


def test_a_mistyped_network_opt_in_refuses_the_connection_and_says_why(clean):
    clean.setenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", "maybe")
    reason = None
    try:
        reason = netguard.refused_address("localhost", "127.0.0.1")
    except netguard.Refused as exc:
        reason = str(exc)
    assert reason == "DASHMEM_ALLOW_PRIVATE_NETWORKS is 'maybe'; allowed: 1, true, yes, on (or 0, false, no, off, or unset)"


def test_the_cookie_key_comes_from_the_environment_or_else_streamlit_secrets(clean):
    clean.setattr(settings, "streamlit_secret", lambda key: "s" * 40 if key == "auth.cookie_key" else None)
    assert settings.get("DASHMEM_COOKIE_KEY") == "s" * 40
    clean.setenv("DASHMEM_COOKIE_KEY", "e" * 40)
    assert settings.get("DASHMEM_COOKIE_KEY") == "e" * 40
    from lib.roles import auth

    assert auth.cookie_key() == "e" * 40


def test_the_cli_names_a_bad_setting_in_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache"), "DASHMEM_QUERY_WORKERS": "many"}
    proc = subprocess.run([sys.executable, "-m", "lib", "refresh", "workspaces/gdp-explorer"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "DASHMEM_QUERY_WORKERS is 'many', which is not a whole number of at least 1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
