"""Every `DASHMEM_*` setting in one registry, and where the app keeps its state.

Each setting is a `Setting`: its name, what values it takes (a parser), its
default, a one-line description, and who sets it. Read one with
`settings.get("DASHMEM_QUERY_MEMORY")`: the environment is read at call time,
never cached at import (tests and operators change it), and the value comes
back parsed (a Path, an int, a tuple...). An empty value counts as unset.
Reading a name that is not registered raises UnknownSetting; a value the parser
refuses raises SettingError, one line naming the variable and what is allowed.

The settings table in docs/settings.md is generated from here (`markdown_table()`,
`python -m lib settings --readme docs/settings.md`), and tests/core/test_settings.py checks
that it has not drifted and that every DASHMEM_ name the code mentions is here.

DASHMEM_QUERY_MEMORY has one default per user of it, on purpose: unset, a query
worker (untrusted SQL) gets 2GB and the process's own in-process DuckDB (profiles,
column types) gets SANDBOX_MEMORY_DEFAULT, 4GB; set, both get the value.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import DashmemError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # lib/ in a checkout; site-packages/dashmem when installed


def checkout_root(package_dir: Path) -> Path | None:
    """The checkout holding the package folder `package_dir` (beside app.py and pyproject.toml), or None
    for an installed package (inside site-packages, or anywhere without the checkout's files beside it)."""
    if any(part in ("site-packages", "dist-packages") for part in package_dir.parts):
        return None
    root = package_dir.parent
    return root if (root / "app.py").is_file() and (root / "pyproject.toml").is_file() else None


# A checkout (the editable install too) keeps its state in .data/ and its templates in workspaces/, as always;
# an installed package keeps its state in the user's folders (XDG) and uses the templates it ships, never
# writing into site-packages. Read at call time by the defaults below (tests stand in for an installed package).
CHECKOUT = checkout_root(PACKAGE_DIR)
# How a person runs the command line, for the hints messages give: `python -m lib` in this checkout; `dashmem`
# (or `python -m dashmem`) where the package is installed (docs/operations.md: Installing the CLI).
COMMAND = "python -m lib" if __name__.partition(".")[0] == "lib" else "dashmem"
PROJECT_ROOT = CHECKOUT or PACKAGE_DIR.parent

# Who sets a setting: whose environment (or which file) the value is read from.
APP = "operator: the app's environment"
APP_OR_SECRETS = "operator: the app's environment, or `[auth] cookie_key` in `.streamlit/secrets.toml`"
APP_AND_CLI = "operator: the environment of the app and of CLI runs"
CLI = "whoever runs the CLI: its environment"
CONFIG_REPO_CI = "config repo admin: a GitHub repository variable, read by the config repo's CI workflow, not by the app"
BENCH = "whoever runs `bench/`: its environment"


class SettingError(DashmemError, ValueError):
    """A setting holds a value its parser refuses; the message is one line naming the variable and what is allowed."""


class UnknownSetting(DashmemError, LookupError):
    """A DASHMEM_ name that is not in the registry."""


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]  # the environment's text -> the value; raises ValueError("is 'x', which is not ...")
    default: Any  # the value when the variable is unset or empty; a `Default` is asked for it at call time
    description: str  # one line, for the docs' settings table
    set_by: str
    kind: str  # what values it takes, in words, for the docs' settings table
    shown_default: str = ""  # the default as the docs show it (when not simply `default`)
    secrets_key: str | None = None  # also read from Streamlit secrets (a dotted key) when the environment leaves it unset
    secret: bool = False  # never shown or echoed

    def raw(self) -> str | None:
        """The variable's text, or None when unset or empty (whitespace only counts as empty)."""
        value = os.environ.get(self.name)
        return value if value is not None and value.strip() else None

    def is_set(self) -> bool:
        return self.raw() is not None

    def value(self) -> Any:
        """The parsed value, read now; the default when unset."""
        text = self.raw()
        if text is None and self.secrets_key:
            found = streamlit_secret(self.secrets_key)
            text = str(found) if found else None
        if text is None:
            return self.default() if isinstance(self.default, Default) else self.default
        try:
            return self.parse(text)
        except ValueError as exc:
            raise SettingError(f"{self.name} {exc}") from None


def streamlit_secret(dotted: str) -> Any:
    """A value of Streamlit's secrets (`.streamlit/secrets.toml`) by dotted key, or None when there is none.

    In the app (Streamlit loaded) it is `st.secrets`. Elsewhere (the CLI, cron, tests) the files Streamlit reads
    by default are read as TOML, `~/.streamlit/secrets.toml` then `.streamlit/secrets.toml` in the working
    folder, a later file's top-level keys replacing an earlier's as in Streamlit: importing Streamlit only to
    look cost every CLI command that asks for a secret 0.7 s.
    """
    try:
        if "streamlit" in sys.modules:
            import streamlit as st

            node: Any = st.secrets
        else:
            node = _secrets_files()
        for part in dotted.split("."):
            node = node[part]
        return node
    except Exception:  # no secrets file, or no such key: treated as unset
        return None


def _secrets_files() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in (Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml"):
        try:
            with path.open("rb") as handle:
                found.update(tomllib.load(handle))
        except OSError:
            continue
        except tomllib.TOMLDecodeError as exc:
            logging.getLogger(__name__).warning("%s is not valid TOML (%s); its secrets are left out", path, exc)
    return found


@dataclass(frozen=True)
class Default:
    """A default that depends on where the package runs from, asked at call time: `in_checkout(root)`
    in a checkout, else `installed()` (which may read XDG_DATA_HOME, XDG_CACHE_HOME and HOME)."""

    in_checkout: Callable[[Path], Path]
    installed: Callable[[], Path]

    def __call__(self) -> Path:
        return self.in_checkout(CHECKOUT) if CHECKOUT else self.installed()


def user_data_dir() -> Path:
    """`$XDG_DATA_HOME/dashmem` (`~/.local/share/dashmem`): an installed package's config repo and users file."""
    base = os.environ.get("XDG_DATA_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".local" / "share") / "dashmem"


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/dashmem` (`~/.cache/dashmem`): data of workspaces outside the app's config repo, and an installed package's cache."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "dashmem"


REGISTRY: dict[str, Setting] = {}


def register(setting: Setting) -> Setting:
    assert setting.name.startswith("DASHMEM_") and setting.name not in REGISTRY, setting.name
    REGISTRY[setting.name] = setting
    return setting


def setting(name: str) -> Setting:
    """The registered setting `name`; raises UnknownSetting for any other name."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownSetting(f"{name} is not a dashmem setting; register it in lib/core/settings.py") from None


def get(name: str) -> Any:
    """The value of setting `name`, parsed, from the environment as it is now (the default when unset)."""
    return setting(name).value()


# --------------------------------------------------------------------------- parsers
# Each takes the variable's (non-empty) text and returns the value, or raises ValueError
# with the rest of a sentence that starts with the variable's name.


def _text(text: str) -> str:
    return text


def _resolved_path(text: str) -> Path:
    return Path(text).expanduser().resolve()


def _path(text: str) -> Path:
    return Path(text)


def _folder_or_off(text: str) -> Path | None:
    return None if text.strip().lower() in ("off", "0", "no", "false") else Path(text).expanduser().resolve()


def _anything_is_on(text: str) -> bool:
    return True  # any non-empty value, as DASHMEM_DEBUG always worked


def _flag(text: str) -> bool:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"is {text!r}; allowed: 1, true, yes, on (or 0, false, no, off, or unset)")


def _positive_int(text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"is {text!r}, which is not a whole number of at least 1")
    return number


# The output cap of one chat reply: big enough for a whole dashboard.yaml written at once, small enough that a
# streamed reply ends within the session's time limit; the SDK asks for streaming above about 21,000.
CHAT_MAX_TOKENS_DEFAULT = 16_000
OUTPUT_TOKENS_MIN, OUTPUT_TOKENS_MAX = 1_024, 128_000


def _output_tokens(text: str) -> int:
    try:
        number = int(text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        number = 0
    if not OUTPUT_TOKENS_MIN <= number <= OUTPUT_TOKENS_MAX:
        raise ValueError(f"is {text!r}, which is not a whole number of tokens from {OUTPUT_TOKENS_MIN:,} to {OUTPUT_TOKENS_MAX:,}")
    return number


def _seconds(text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError(f"is {text!r}, which is not a whole number of seconds (0 or more)")
    return number


def _positive_seconds(text: str) -> float:
    try:
        number = float(text.strip())
    except ValueError:
        number = 0.0
    if not 0 < number < 86_400:
        raise ValueError(f"is {text!r}, which is not a number of seconds above 0 and under a day")
    return number


def git_remote_url(url: str) -> str:
    """A git remote's URL or path, refused (ValueError) when it could be taken for an option or holds a password;
    a path is made absolute, so it names the same folder whatever folder git runs in."""
    url = url.strip()
    if not url or any(c.isspace() for c in url) or url.startswith("-"):
        raise ValueError("give the remote as one URL or path, for example git@github.com:acme/dashboards-config.git")
    if re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@", url, re.IGNORECASE):
        raise ValueError("the URL holds a password; use an SSH key or a git credential helper on the server instead")
    if not re.match(r"^[a-z][a-z0-9+.-]*://", url, re.IGNORECASE) and not re.match(r"^[^/]+:", url):
        return str(Path(url).expanduser().resolve())
    return url


def _git_remote(text: str) -> str:
    try:
        return git_remote_url(text)
    except ValueError as exc:
        raise ValueError(f"is not usable: {exc}") from None


MEMORY_UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "B": 1}


def _memory_bytes(text: str) -> int:
    """`512MB`, `2GB`, `1.5GB`, `2147483648`: bytes (binary units: 1KB = 1024 bytes)."""
    upper = text.strip().upper()
    try:
        for suffix, factor in MEMORY_UNITS.items():
            if upper.endswith(suffix):
                number = int(float(upper[: -len(suffix)]) * factor)
                break
        else:
            number = int(upper)
    except (ValueError, OverflowError):
        number = 0
    if number < 1:
        raise ValueError(f"is {text!r}, which is not a memory size such as 512MB or 2GB")
    return number


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _host_patterns(text: str) -> tuple[str, ...]:
    return tuple(p.lower() for p in _comma_list(text))


@functools.lru_cache(maxsize=8)
def _folders(text: str) -> tuple[Path, ...]:
    return tuple(Path(p).resolve() for p in text.split(os.pathsep) if p)


def _command_prefixes(text: str) -> list[list[str]]:
    return [entry.split() for entry in text.split(";") if entry.strip()]


@functools.lru_cache(maxsize=8)
def _networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for entry in text.replace(";", ",").split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"lists {entry!r}, which is not a network such as 10.20.0.0/16") from None
    return tuple(networks)


# --------------------------------------------------------------------------- the registry

DEFAULT_MODEL = "claude-sonnet-5-5"
SANDBOX_MEMORY_DEFAULT = "4GB"  # the in-process DuckDB's memory limit while DASHMEM_QUERY_MEMORY is unset

register(
    Setting(
        "DASHMEM_CONFIG_REPO",
        _resolved_path,
        Default(lambda root: root / ".data" / "config-repo", lambda: user_data_dir() / "config-repo"),
        "the git config repo holding the workspaces; created from DASHMEM_TEMPLATES on first start",
        APP_AND_CLI,
        "a folder",
        "`.data/config-repo` in this checkout; installed, `$XDG_DATA_HOME/dashmem/config-repo` (`~/.local/share/dashmem/config-repo`)",
    )
)
register(
    Setting(
        "DASHMEM_CONFIG_REMOTE",
        _git_remote,
        None,
        "a git remote (URL or path of a bare repo) several app servers share: DASHMEM_CONFIG_REPO becomes its replica, "
        "pulled before serving and pushed to on publish (docs/operations.md: Several app servers)",
        APP_AND_CLI,
        "a git URL or path, without a password",
        "none: the config repo is this server's own",
    )
)
register(
    Setting(
        "DASHMEM_CONFIG_PULL_SECONDS",
        _seconds,
        10,
        "with DASHMEM_CONFIG_REMOTE, how often each app process fetches from it (at most once per this many seconds, "
        "before a page run); `0` fetches before every page run",
        APP,
        "a whole number of seconds, at least 0",
    )
)
register(
    Setting(
        "DASHMEM_CACHE_DIR",
        _resolved_path,
        Default(lambda root: root / ".data" / "cache", user_cache_dir),
        "data snapshots, uploads and other caches, never in git",
        APP_AND_CLI,
        "a folder",
        "`.data/cache` in this checkout; installed, and for a workspace outside the app's config repo, `$XDG_CACHE_HOME/dashmem` (`~/.cache/dashmem`)",
    )
)
register(
    Setting(
        "DASHMEM_TEMPLATES",
        _resolved_path,
        Default(lambda root: root / "workspaces", lambda: PACKAGE_DIR / "_templates"),
        "template workspaces for a new config repo and for `create --template`",
        APP_AND_CLI,
        "a folder",
        "`workspaces/` in this checkout; installed, the same workspaces shipped in the package",
    )
)
register(
    Setting(
        "DASHMEM_USERS",
        _path,
        Default(lambda root: root / "demo" / "users.yaml", lambda: user_data_dir() / "users.yaml"),
        "the sign-in credentials (streamlit-authenticator's YAML, bcrypt-hashed passwords), kept outside the config repo",
        APP,
        "a file",
        "`demo/users.yaml` (the demo users) in this checkout; installed, `$XDG_DATA_HOME/dashmem/users.yaml`",
    )
)
register(
    Setting(
        "DASHMEM_COOKIE_KEY",
        _text,
        None,
        "the key that signs sign-in cookies, at least 32 bytes (`make run` writes a random one to `.streamlit/secrets.toml`)",
        APP_OR_SECRETS,
        "a secret of at least 32 bytes",
        "none: the app refuses to start without one",
        secrets_key="auth.cookie_key",
        secret=True,
    )
)
register(
    Setting(
        "DASHMEM_CHROMIUM",
        _path,
        Path("/usr/bin/chromium"),
        "the Chromium (or Chrome) executable that prints reports to PDF (Report page, `python -m lib export --pdf`)",
        APP_AND_CLI,
        "a file path",
        "`/usr/bin/chromium` (Debian's package)",
    )
)
register(
    Setting(
        "DASHMEM_PDF_SECONDS",
        _positive_seconds,
        120.0,
        "how long printing a report to PDF may take, Chromium's start included, before it is stopped (nothing is written)",
        APP_AND_CLI,
        "seconds (decimals allowed)",
        "120",
    )
)
register(
    Setting(
        "DASHMEM_PDF_DRAW_SECONDS",
        _positive_seconds,
        30.0,
        "how long printing a report to PDF waits for its charts to be drawn before it gives up",
        APP_AND_CLI,
        "seconds (decimals allowed)",
        "30",
    )
)
register(
    Setting(
        "DASHMEM_REFRESH_BUDGET_S",
        _positive_seconds,
        900.0,
        "how long `refresh --all` waits for one workspace before it reports that workspace failed (the data served before is kept) "
        "and goes on with the others, so that one source that hangs cannot hold every cron run",
        CLI,
        "seconds (decimals allowed)",
        "900 (15 minutes)",
    )
)
register(
    Setting(
        "DASHMEM_CHAT_MAX_WAIT_S",
        _positive_seconds,
        30.0,
        "the longest a chat session waits before it tries a failed model call again (429, 529, a timeout); when the API asks "
        "for a longer wait (`retry-after`), the session stops at once and says how long, and no wait runs past the session's time limit",
        APP_AND_CLI,
        "seconds (decimals allowed)",
        "30",
    )
)
register(Setting("DASHMEM_MODEL", _text, DEFAULT_MODEL, "the Claude model chat sessions and token counts use", APP_AND_CLI, "a model id"))
register(
    Setting(
        "DASHMEM_CHAT_MAX_TOKENS",
        _output_tokens,
        CHAT_MAX_TOKENS_DEFAULT,
        "the most output tokens one model reply in a chat session may use (the request's max_tokens); replies are streamed, "
        "and a reply that reaches it is cut off",
        APP_AND_CLI,
        f"a whole number of tokens from {OUTPUT_TOKENS_MIN:,} to {OUTPUT_TOKENS_MAX:,}",
        f"{CHAT_MAX_TOKENS_DEFAULT:,}",
    )
)
register(
    Setting(
        "DASHMEM_DATA_DIRS",
        _folders,
        (),
        "folders that file sources (CSV, Excel, Parquet) and SQLite sources may read besides their own workspace folder",
        APP_AND_CLI,
        "folders separated by `:`",
        "none",
    )
)
register(
    Setting(
        "DASHMEM_MCP_COMMANDS",
        _command_prefixes,
        (),
        "stdio MCP servers sources may start, as command prefixes (e.g. `python servers/inventory.py; npx -y @acme/mcp`); unset, no stdio command runs",
        APP_AND_CLI,
        "command prefixes separated by `;`",
        "none",
    )
)
register(
    Setting(
        "DASHMEM_MCP_MAX_MESSAGE_BYTES",
        _memory_bytes,
        256 << 20,
        "the largest single message (a tool's whole answer) an `mcp` source takes from a server over streamable HTTP; "
        "a larger answer fails the source, saying so, and the previous data stays served",
        APP_AND_CLI,
        "a size such as `64MB` or `1GB`, or a number of bytes",
        "`256MB`",
    )
)
register(
    Setting(
        "DASHMEM_SECRET_ALLOW",
        _comma_list,
        (),
        "prefixes (e.g. `SRC_,sources.`) that sources' secret references must start with; unset, any reference but the app's own credentials",
        APP_AND_CLI,
        "prefixes separated by `,`",
        "any",
    )
)
register(
    Setting(
        "DASHMEM_HTTP_ALLOW",
        _host_patterns,
        (),
        "host patterns (e.g. `api.example.com,*.corp.example`) that REST and MCP sources may contact; cloud metadata addresses are refused whatever it says",
        APP_AND_CLI,
        "host patterns separated by `,`",
        "any public host",
    )
)
register(
    Setting(
        "DASHMEM_ALLOW_PRIVATE_NETWORKS",
        _flag,
        False,
        "on, REST and MCP sources may reach loopback (`127.0.0.0/8`, `::1`) and private networks (`10/8`, `172.16/12`, "
        "`192.168/16`, `100.64/10`, `fc00::/7`, other non-public addresses); off, they are refused",
        APP_AND_CLI,
        "`1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`",
        "off",
    )
)
register(
    Setting(
        "DASHMEM_HTTP_ALLOW_NETWORKS",
        _networks,
        (),
        "the same for the listed networks only (e.g. `10.20.0.0/16,127.0.0.1/32`)",
        APP_AND_CLI,
        "CIDR networks separated by `,`",
        "none",
    )
)
register(
    Setting(
        "DASHMEM_UNPACKED_DIR",
        _folder_or_off,
        Path("/dev/shm"),
        "where big snapshot tables are kept decompressed, once for every process and query worker to map "
        "(lib/data/unpacked.py): best in shared memory (tmpfs); `off` reads them as stored",
        APP_AND_CLI,
        "a folder (a `dashmem-<uid>` folder is made in it), or `off`",
        "`/dev/shm`",
    )
)
register(
    Setting(
        "DASHMEM_QUERY_MEMORY",
        _memory_bytes,
        2 << 30,
        "memory one dashboard, model or viewer query may use: DuckDB's limit in the query worker, and past it "
        "(plus 256 MB) the worker is killed; also the limit of the in-process DuckDB that profiles data",
        APP_AND_CLI,
        "a size such as `512MB` or `2GB`, or a number of bytes",
        f"`2GB` per query worker; `{SANDBOX_MEMORY_DEFAULT}` for the in-process DuckDB",
    )
)
register(
    Setting(
        "DASHMEM_QUERY_WORKERS",
        _positive_int,
        4,
        "how many query worker processes may run at once; each runs one query at a time",
        APP_AND_CLI,
        "a whole number, at least 1",
    )
)
register(
    Setting(
        "DASHMEM_UPLOAD_MAX_ROWS",
        _positive_int,
        2_000_000,
        "the most rows a file uploaded in the app may have where a session reads it (a viewer's own file, the Sources page's preview "
        "of an upload); a bigger one is refused from its metadata before its data is read (a refresh reads a source whole)",
        APP,
        "a whole number, at least 1",
        "`2,000,000`",
    )
)
register(
    Setting(
        "DASHMEM_UPLOAD_MAX_BYTES",
        _memory_bytes,
        256 << 20,
        "the most data such a file may decode to (Parquet's columns, an .xlsx unzipped, a CSV's text), "
        "and the most of viewers' own files one session keeps in all",
        APP,
        "a size such as `256MB` or `1GB`, or a number of bytes",
        "`256MB`",
    )
)
register(
    Setting(
        "DASHMEM_DEBUG",
        _anything_is_on,
        False,
        "set (e.g. to `1`), the CLI shows the traceback of an unexpected error instead of one line",
        CLI,
        "any non-empty value turns it on",
        "off",
    )
)
register(
    Setting(
        "DASHMEM_APP_REPO",
        _text,
        None,
        "where the config repo's CI clones this app from (`.github/workflows/validate.yml`)",
        CONFIG_REPO_CI,
        "a git URL",
        "none",
    )
)
register(
    Setting(
        "DASHMEM_VALIDATE_STRICT",
        _flag,
        False,
        "`true` makes the config repo's CI gate strict: `validate` (which reads it) fails when the data checks could not run, "
        "instead of passing with the warning `check.data_not_run`, as `validate --strict` does",
        CONFIG_REPO_CI,
        "true or false (also 1, yes, on; 0, no, off)",
        "`false`",
    )
)
register(
    Setting(
        "DASHMEM_RUN_LOG",
        _resolved_path,
        None,
        "a file the app server appends one JSON line per script run to (session, asked, done), for bench.app's server-side page-load times",
        APP,
        "a file",
        "none (no log)",
    )
)
register(
    Setting(
        "DASHMEM_DATASETS",
        _path,
        Default(lambda root: root.parent / "shared" / "datasets", lambda: user_data_dir() / "datasets"),
        "the public datasets the benchmarks and the evaluation read",
        BENCH,
        "a folder",
        "`../shared/datasets` beside this checkout; installed, `$XDG_DATA_HOME/dashmem/datasets`",
    )
)


# --------------------------------------------------------------------------- delivery: reports by e-mail, alerts


def _port(text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise ValueError(f"is {text!r}, which is not a port (a whole number from 1 to 65535)")
    return number


SMTP_TLS = ("starttls", "tls", "none")


def _smtp_tls(text: str) -> str:
    word = text.strip().lower()
    if word not in SMTP_TLS:
        raise ValueError(f"is {text!r}; allowed: starttls (upgrade the connection, port 587), tls (TLS from the start, port 465) or none")
    return word


def _reference(text: str) -> str:
    if not re.fullmatch(r"env:[A-Za-z_][A-Za-z0-9_]*|secrets:[A-Za-z0-9_][A-Za-z0-9_.-]*", text.strip()):
        raise ValueError("holds a value that is not a reference; write env:NAME or secrets:KEY, never the password itself")
    return text.strip()


register(
    Setting(
        "DASHMEM_SMTP_HOST",
        _text,
        None,
        "the mail server subscriptions and alerts are sent through (`refresh --all --due`, `deliver`); unset, nothing is sent and the run says so",
        CLI,
        "a host name or address",
        "none (no e-mail)",
    )
)
register(
    Setting(
        "DASHMEM_SMTP_PORT",
        _port,
        None,
        "the mail server's port",
        CLI,
        "a port",
        "587 with starttls, 465 with tls, 25 with none",
    )
)
register(Setting("DASHMEM_SMTP_TLS", _smtp_tls, "starttls", "how the connection to the mail server is encrypted", CLI, "starttls, tls or none", "`starttls`"))
register(Setting("DASHMEM_SMTP_USER", _text, None, "the user name to log in to the mail server with; unset, no login", CLI, "a user name", "none"))
register(
    Setting(
        "DASHMEM_SMTP_PASSWORD",
        _reference,
        None,
        "where the mail server's password is: a reference, never the password itself",
        CLI,
        "env:NAME or secrets:KEY",
        "none",
        secret=True,
    )
)
register(
    Setting(
        "DASHMEM_SMTP_FROM",
        _text,
        None,
        "the sender of subscriptions and alerts",
        CLI,
        "an e-mail address",
        "`dashmem@` and this machine's name",
    )
)
register(
    Setting(
        "DASHMEM_SMTP_TIMEOUT_S",
        _positive_seconds,
        20.0,
        "how long one exchange with the mail server may take before that delivery fails with a plain message (the others go on)",
        CLI,
        "seconds (decimals allowed)",
        "20",
    )
)
register(
    Setting(
        "DASHMEM_ALERT_WEBHOOKS",
        _comma_list,
        (),
        "the URLs alerts may post to (an alert's `webhook:` must start with one of them); the address checks of REST sources "
        "apply too, so a loopback or private address also needs DASHMEM_ALLOW_PRIVATE_NETWORKS",
        CLI,
        "comma-separated URL prefixes (e.g. `https://hooks.slack.com/services/`)",
        "none (no webhook is called)",
    )
)
register(
    Setting(
        "DASHMEM_APP_URL",
        _text,
        None,
        "the app's address as its users open it, for the links in e-mails (an alert links to its figure's Explain)",
        CLI,
        "a URL",
        "none (e-mails name the page instead of linking to it)",
    )
)


# --------------------------------------------------------------------------- the docs' settings table

TABLE_BEGIN = "<!-- settings table: generated by `python -m lib settings --readme docs/settings.md`; edit lib/core/settings.py -->"
TABLE_END = "<!-- end of settings table -->"


def _shown_default(s: Setting) -> str:
    if s.shown_default:
        return s.shown_default
    return f"`{s.default}`"


def markdown_table() -> str:
    """The README's table of every setting, from the registry."""
    lines = ["| setting | what it does | value | default | set by |", "|---|---|---|---|---|"]
    for s in REGISTRY.values():
        cells = [f"`{s.name}`", s.description, s.kind, _shown_default(s), s.set_by]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def readme_table(text: str) -> str:
    """The table between the markers in a README's `text`."""
    if TABLE_BEGIN not in text or TABLE_END not in text:
        raise ValueError("no settings table markers in the README")
    return text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip("\n") + "\n"


def with_table(text: str) -> str:
    """A README's `text` with the table between the markers replaced by the generated one."""
    readme_table(text)  # the markers are there
    head, rest = text.split(TABLE_BEGIN, 1)
    tail = rest.split(TABLE_END, 1)[1]
    return f"{head}{TABLE_BEGIN}\n{markdown_table()}{TABLE_END}{tail}"


# --------------------------------------------------------------------------- where the app keeps its state


def config_repo_path() -> Path:
    return get("DASHMEM_CONFIG_REPO")


def cache_dir() -> Path:
    """The app's cache: snapshots of the config repo's workspaces and drafts, and uploads."""
    return get("DASHMEM_CACHE_DIR")


def cache_dir_for(ws_path: Path) -> Path:
    """Where the data of the workspace at `ws_path` is cached.

    DASHMEM_CACHE_DIR when set. Otherwise the app's cache for a workspace of the
    app's config repo (or of one of its drafts), so the app and a CLI run on it
    share data; and for a workspace anywhere else (a clone of a config repo,
    CI), the user's cache folder, so the CLI never writes into the app's checkout.
    """
    if setting("DASHMEM_CACHE_DIR").is_set():
        return cache_dir()
    ws_path = Path(ws_path).resolve()
    repo = config_repo_path()
    for root in (repo, repo.with_name(repo.name + ".drafts")):
        if ws_path.is_relative_to(root):
            return cache_dir()
    return user_cache_dir()


def templates_dir() -> Path:
    return get("DASHMEM_TEMPLATES")


def model_id() -> str:
    """The Claude model sessions use (DASHMEM_MODEL), defaulting to a current Sonnet."""
    return get("DASHMEM_MODEL")


def chat_max_tokens() -> int:
    """The output cap of one model reply in a chat session (DASHMEM_CHAT_MAX_TOKENS)."""
    return get("DASHMEM_CHAT_MAX_TOKENS")


def sandbox_memory_limit() -> str:
    """DuckDB's memory_limit for the process's in-process sandbox (profiles, column types).

    DASHMEM_QUERY_MEMORY as written when set (checked first; a plain number of bytes
    gets DuckDB's `B` unit, which DuckDB needs), else SANDBOX_MEMORY_DEFAULT. DuckDB
    reads KB, MB, GB as powers of 1000, the query workers' cap (`get("DASHMEM_QUERY_MEMORY")`)
    as powers of 1024, as before this registry.
    """
    memory = setting("DASHMEM_QUERY_MEMORY")
    if not memory.is_set():
        return SANDBOX_MEMORY_DEFAULT
    size = memory.value()  # refuses a value that is not a size
    text = (memory.raw() or "").strip()  # set, so never None
    return f"{size}B" if text.isdigit() else text


def uploads_dir(slug: str) -> Path:
    """Files uploaded for a workspace's file sources (`upload:NAME`): per workspace, shared by
    its published version and every draft, outside git."""
    return cache_dir() / "uploads" / slug
