"""Shared fixtures: real git repos in temporary folders, the shipped workspaces, the public datasets,
Streamlit's secrets stood in for, real local servers (HTTP, MCP over streamable HTTP), the app (AppTest
and `streamlit run` in Chromium), the network guard, and the markers each test gets by its fixtures.

Helpers the modules share are plain functions in tests/helpers/; no test module imports another."""

from __future__ import annotations

import inspect
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import types
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from lib.chat import model as chat_model
from tests.helpers import ROOT, WORKSPACES, listening, stop
from tests.helpers import browser as _browser
from tests.helpers.databases import SERVERS, server_engine  # noqa: F401  (imported from here by the SQL tests)
from tests.helpers.model import FakeAPI
from tests.helpers.netguard import Network, is_loopback

# The real public CSVs, outside this repository; DASHMEM_DATASETS points elsewhere (as for bench/).
# Tests reach them through the `datasets` and `dataset` fixtures, which skip when they are missing.
DATASETS = Path(os.environ.get("DASHMEM_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture(autouse=True)
def _user_cache(tmp_path_factory, monkeypatch):
    """The user's cache folder (where the CLI caches data of workspaces outside the app's
    config repo) is a temporary one, so tests never write into the home folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))


@pytest.fixture(scope="session")
def datasets() -> Path:
    """The folder of public datasets; the test is skipped, saying where it looked, when it is missing."""
    if not DATASETS.is_dir():
        pytest.skip(f"public datasets folder {DATASETS} not found (set DASHMEM_DATASETS)")
    return DATASETS


@pytest.fixture(scope="session")
def dataset(datasets):
    """One public dataset by file name: dataset('gdp.csv') -> Path; skips the test when that file is missing."""

    def path(name: str) -> Path:
        found = datasets / name
        if not found.exists():
            pytest.skip(f"public dataset {name} not found in {datasets}")
        return found

    return path


@pytest.fixture
def ws_copy(tmp_path):
    """A writable copy of a shipped demo workspace: ws_copy('gdp-explorer') -> Path."""

    def make(slug: str) -> Path:
        target = tmp_path / "copies" / slug
        shutil.copytree(WORKSPACES / slug, target)
        return target

    return make


@pytest.fixture
def config_repo(tmp_path, monkeypatch):
    """A fresh config repo created from the shipped templates, plus a bare remote named origin."""
    from lib.repo.configrepo import ConfigRepo

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = ConfigRepo.open_or_create(tmp_path / "config-repo", WORKSPACES)
    import git

    git.Repo.init(tmp_path / "remote.git", bare=True, initial_branch="main")
    repo.repo.create_remote("origin", str(tmp_path / "remote.git"))
    return repo


@pytest.fixture
def streamlit_secrets(monkeypatch) -> dict:
    """No .streamlit/secrets.toml, whatever the machine has: the dict returned stands in for Streamlit's secrets."""
    from lib.core import settings

    store: dict = {}

    def lookup(dotted: str):
        node = store
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    monkeypatch.setattr(settings, "streamlit_secret", lookup)
    return store


# --- local servers --------------------------------------------------------------------------------

MCP_SERVER = ROOT / "tests" / "mcp_server.py"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def mcp_http_server(log_folder: Path, *options: str, transport: str = "--http"):
    """tests/mcp_server.py over streamable HTTP (or `transport="--sse"`, the legacy HTTP+SSE one) on a free port of
    127.0.0.1 (plus `options`); yields the port."""
    port = free_port()
    log_path = log_folder / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, str(MCP_SERVER), transport, str(port), *options], stdout=log, stderr=subprocess.STDOUT)
    try:
        listening(server, port, log_path, within_s=20)
        yield port
    finally:
        stop(server)


@pytest.fixture(scope="module")
def mcp_http_url(tmp_path_factory):
    """URL of the test MCP server (tests/mcp_server.py) over streamable HTTP on 127.0.0.1, one per test module."""
    with mcp_http_server(tmp_path_factory.mktemp("mcp-http")) as port:
        yield f"http://127.0.0.1:{port}/mcp"


class LocalHTTPServer:
    """A real HTTP(S) server on 127.0.0.1 in a thread; a subclass answers each GET and POST in `answer`."""

    def __init__(self, tls: ssl.SSLContext | None = None):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.answer(self)

            do_POST = do_GET

            def log_message(self, format, *args):  # keep pytest output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_port
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        # A short poll keeps shutdown() quick; the default 0.5 s would be paid by every test.
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def import_each_alone(modules: list[str]) -> None:
    """Import each module first thing in a fresh interpreter; fails naming the ones that cannot.

    The interpreters start together: each import is a second or two of pyarrow and DuckDB,
    and one after another they were among the slowest tests of the fast loop.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = {m: subprocess.Popen([sys.executable, "-c", f"import {m}"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) for m in modules}
    failed = {}
    for module, proc in started.items():
        _, stderr = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failed[module] = stderr.strip().splitlines()[-1:]
    assert not failed, f"these modules do not import on their own: {failed}"


# --------------------------------------------------------------------------- the local database servers (SQL sources)

# SERVERS and server_engine: tests/helpers/databases.py (a database of its own per xdist worker).


@contextmanager
def statements_sent():
    """Every statement any SQLAlchemy engine sends, with its parameters."""
    sent: list[tuple[str, Any]] = []  # each statement, and its parameters as the driver takes them (a dict, tuple or list)

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))

    event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(sa.engine.Engine, "before_cursor_execute", record)


# --------------------------------------------------------------------------- a misbehaving network in front of a real server


class FlakyProxy:
    """A TCP proxy on 127.0.0.1 in front of a real server that misbehaves for its first `failures` connections.

    `mode` says how: "reset" accepts and resets the connection at once (a server restarting, a load balancer
    without a backend), "silent" accepts and never sends a byte (a hung server), "http503" answers
    `HTTP/1.1 503` and closes (a gateway whose backend is down). Later connections are forwarded both ways.
    `target` may be None for a server that is never there: every connection misbehaves.
    `silence()` (or a client sending bytes that contain `silent_on`) makes the forwarding connections go
    silent from then on, both ways, with every socket kept open: a server or load balancer that hangs mid-query.
    """

    def __init__(self, target: tuple[str, int] | None, failures: int = 0, mode: str = "reset", silent_on: bytes | None = None):
        assert mode in ("reset", "silent", "http503")
        self.target, self.failures, self.mode, self.silent_on = target, failures, mode, silent_on
        self.silenced = threading.Event()
        self.connections = 0  # connections accepted so far, misbehaved ones included
        self.held: list[socket.socket] = []  # everything to close on stop
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:  # the listener was closed by stop()
                return
            self.connections += 1
            self.held.append(client)
            if self.target is None or self.connections <= self.failures:
                self._misbehave(client)
            else:
                threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _misbehave(self, client: socket.socket) -> None:
        if self.mode == "reset":
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # linger 0: RST
            client.close()
        elif self.mode == "http503":
            try:
                client.recv(65536)
                body = b"backend is restarting"
                client.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(body), body)
                )
            except OSError:
                pass
            client.close()
        # "silent": kept open, unanswered, until stop()

    def _forward(self, client: socket.socket) -> None:
        assert self.target is not None
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self.held.append(upstream)

        def pump(source: socket.socket, sink: socket.socket) -> None:
            try:
                while data := source.recv(65536):
                    if self.silent_on is not None and source is client and self.silent_on in data:
                        self.silenced.set()
                    if not self.silenced.is_set():
                        sink.sendall(data)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def silence(self) -> None:
        self.silenced.set()

    def cut(self) -> None:
        """The server gone from behind the proxy: every open connection reset, every new one reset at once."""
        self.target, self.mode = None, "reset"
        for held in self.held:
            try:
                held.shutdown(socket.SHUT_RDWR)  # wakes the forwarding threads blocked on it; close() alone would not
                held.close()
            except OSError:
                pass

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        for held in self.held:
            try:
                held.close()
            except OSError:
                pass


# --------------------------------------------------------------------------- markers by fixture

# Each test gets the markers of what it uses, found in its code and its fixtures' (and the code of the tests/ helpers
# and classes they call), so a new test is marked without anyone remembering to. pytest.ini describes them.
MARKERS = ("browser", "db", "network")
DB_NAMES = {"server_engine", "SERVERS", "PG_URL", "MARIADB_URL"}
BROWSER_NAMES = {"sync_playwright"}
NETWORK_NAMES = {
    "serve",
    "wait_until_serving",
    "LocalHTTPServer",
    "FlakyProxy",
    "mcp_http_server",
    "mcp_http_url",
    "free_port",
    "create_server",
    "ThreadingHTTPServer",
}


def _code_names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def _names_used(functions: list, seen: set) -> set[str]:
    """Global names the functions use, and those of the tests/ functions and classes they name, transitively."""
    names: set[str] = set()
    while functions:
        function = inspect.unwrap(functions.pop())
        code = getattr(function, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        for name in _code_names(code):
            names.add(name)
            found = getattr(function, "__globals__", {}).get(name)
            if getattr(found, "__module__", "").startswith("tests."):
                if inspect.isclass(found):
                    names.update(c.__name__ for c in found.__mro__)
                    functions.extend(v for v in vars(found).values() if inspect.isfunction(v))
                elif inspect.isfunction(found):
                    functions.append(found)
    return names


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        functions = [getattr(item, "obj", None)]
        info = getattr(item, "_fixtureinfo", None)
        shared = False
        for name in getattr(item, "fixturenames", ()):
            defs = info.name2fixturedefs.get(name) if info else None
            if defs:
                functions.append(defs[-1].func)
                shared = shared or defs[-1].scope in ("module", "class", "package")
        if shared:
            # A module's costly fixture (a `streamlit run`, a 5M-row table) is made once, on one worker:
            # `make test` runs with --dist loadgroup, which keeps a group on one worker.
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        names = _names_used([f for f in functions if f is not None], set())
        params = getattr(getattr(item, "callspec", None), "params", {})
        if names & DB_NAMES and "sqlite" not in params.values():
            item.add_marker("db")
        chromium = any("chromium" in str(m.kwargs.get("reason", "")).lower() for m in item.iter_markers("skipif"))
        if names & BROWSER_NAMES or chromium:
            item.add_marker("browser")
        if names & NETWORK_NAMES:
            item.add_marker("network")


# --------------------------------------------------------------------------- --cpu-report: what each test costs

# `pytest --cpu-report [-n 4]` prints the modules and tests that cost the most CPU: user+sys of the test process and of
# the child processes it reaped (a `streamlit run`, Chromium, a CLI subprocess), from its setup to its teardown, so a
# module-scoped fixture counts where it is made and where it is ended. Each worker writes one JSON line per test to a
# folder the controller reads at the end. docs/contributing.md#what-the-suite-costs says how to read it.
CPU_REPORT_DIR = "DASHMEM_TEST_CPU_REPORT_DIR"


def pytest_addoption(parser):
    parser.addoption("--cpu-report", action="store_true", help="print the tests and modules that cost the most CPU (incl. child processes)")


def pytest_configure(config):
    if config.getoption("--cpu-report") and not hasattr(config, "workerinput"):
        import tempfile

        os.environ[CPU_REPORT_DIR] = tempfile.mkdtemp(prefix="cpu-report-")  # the workers inherit it


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get(CPU_REPORT_DIR) if item.config.getoption("--cpu-report") else None
    if not folder:
        yield
        return
    import json
    import time

    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    line = {"id": item.nodeid, "cpu": _cpu_seconds() - cpu, "wall": time.monotonic() - wall}
    with open(Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a") as out:
        out.write(json.dumps(line) + "\n")


def pytest_terminal_summary(terminalreporter, config):
    folder = os.environ.get(CPU_REPORT_DIR)
    if not config.getoption("--cpu-report") or hasattr(config, "workerinput") or not folder:
        return
    import json
    from collections import defaultdict

    tests = [json.loads(line) for path in sorted(Path(folder).glob("*.jsonl")) for line in path.read_text().splitlines()]
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for test in tests:
        module = modules[test["id"].split("::")[0]]
        module[0] += test["cpu"]
        module[1] += test["wall"]
        module[2] += 1
    write = terminalreporter.write_line
    terminalreporter.section("CPU report (user+sys, incl. reaped child processes)")
    write(f"{len(tests)} tests: {sum(t['cpu'] for t in tests):.0f} s CPU, {sum(t['wall'] for t in tests):.0f} s wall summed over workers")
    write("modules by CPU:   cpu s   wall s  tests")
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:15]:
        write(f"  {cpu:8.1f} {wall:8.1f} {count:6d}  {name}")
    write("tests by CPU:     cpu s   wall s")
    for test in sorted(tests, key=lambda t: -t["cpu"])[:15]:
        write(f"  {test['cpu']:8.1f} {test['wall']:8.1f}  {test['id']}")
    shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- the app through AppTest (tests/helpers/app.py)


@pytest.fixture
def env(tmp_path, monkeypatch):
    import streamlit as st

    monkeypatch.setenv("DASHMEM_CONFIG_REPO", str(tmp_path / "config-repo"))
    monkeypatch.setenv("DASHMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "k" * 40)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    return tmp_path


@pytest.fixture
def claude(env, monkeypatch):
    """A key is set and every client the Chat page makes talks to a scripted Anthropic API (tests/helpers/model.py's
    FakeAPI) through the real SDK over a fake HTTP transport; append replies to `claude.replies`."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    api = FakeAPI([])
    monkeypatch.setattr(chat_model, "AnthropicClient", lambda *a, **k: api.client())
    return api


# --------------------------------------------------------------------------- the app in Chromium (tests/helpers/browser.py)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from _browser.serve(tmp_path_factory.mktemp("browser"))


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    _browser.ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_browser.CHROMIUM, args=_browser.ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        yield context.new_page()
        browser.close()


# --------------------------------------------------------------------------- a refreshed copy of the supply-chain demo


@pytest.fixture
def supply(tmp_path):
    """A copy of the supply-chain demo workspace, refreshed into its own warehouse: (folder, warehouse)."""
    from lib.data.refresh import refresh
    from lib.data.snapshots import Warehouse
    from lib.roles.access import OPERATOR

    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    wh = Warehouse(tmp_path / "cache")
    assert refresh(folder, wh, user=OPERATOR).ok
    return folder, wh


# --------------------------------------------------------------------------- the network guard (tests/helpers/netguard.py)


@pytest.fixture
def network(monkeypatch):
    net = Network()
    real_connect, real_connect_ex, real_getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def watched(real):
        def connect(sock, address):
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                host = str(address[0])
                net.connects.append(host)
                if not is_loopback(host):
                    net.escapes.append(host)
                    raise ConnectionRefusedError(f"test network guard: connection to {host} blocked")
            return real(sock, address)

        return connect

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else str(host)
        net.lookups.append(name)
        answer = net.answers.get(name.lower())
        if callable(answer):
            answer = answer()
        if answer is not None:
            return [real_getaddrinfo(a, port, family, type, proto, flags | socket.AI_NUMERICHOST)[0] for a in answer]
        try:
            return real_getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            net.unknown_names.append(name)
            raise

    monkeypatch.setattr(socket.socket, "connect", watched(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", watched(real_connect_ex))
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield net
    assert net.escapes == [], f"tried to connect outside loopback: {net.escapes}"
    assert net.unknown_names == [], f"looked up names with real DNS: {net.unknown_names}"
