"""The `rest` connector against a real HTTP server on 127.0.0.1 whose routes the tests control.

Every fetch goes through `lib.data.connectors.base.fetch`, so the dispatch by `type` is exercised too.
"""

from __future__ import annotations

import json
import ssl
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import pytest

from lib.data.connectors.base import FetchContext, SourceError, fetch, fetch_note

from ..conftest import FlakyProxy, LocalHTTPServer

# A connect outside loopback, or a real DNS lookup, fails the test (tests/helpers/netguard.py).
pytestmark = pytest.mark.usefixtures("network")


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch):
    """The operator's opt-in that lets sources reach the test servers on 127.0.0.1 (refused by default)."""
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", raising=False)


TOKEN = "Bearer s3cret-token-0123456789"
ITEMS = [{"id": n, "name": f"item {n}"} for n in range(1, 8)]  # seven records: pages of 3, 3 and 1
PEOPLE = [
    {"id": 1, "name": "Ada", "address": {"city": "London", "geo": {"lat": 51.5}}, "tags": ["math", "code"]},
    {"id": 2, "name": "Grace", "address": {"city": "Arlington"}},
]


class Server(LocalHTTPServer):
    """A live HTTP server: routes are functions of (path, query, headers, body) -> (status, body text)."""

    def __init__(self, tls: ssl.SSLContext | None = None):
        self.hits: Counter[str] = Counter()
        self.requests: list[dict] = []
        self.routes = {
            "/people": lambda q, h, b: (200, {"data": {"items": PEOPLE}}),
            "/list": lambda q, h, b: (200, ITEMS[:2]),
            "/items": lambda q, h, b: (200, {"items": ITEMS[:2]}),
            "/pages": self.by_page,
            "/offsets": self.by_offset,
            "/cursor": self.by_cursor,
            "/linked": self.by_link,
            "/flaky": self.flaky,
            "/throttled": self.throttled,
            "/broken": lambda q, h, b: (503, "database on fire"),
            "/crashed": lambda q, h, b: (500, "unexpected error"),
            "/slow": self.slow,
            "/malformed": lambda q, h, b: (200, "{'not': json,"),
            "/secure": self.secure,
            "/search": lambda q, h, b: (200, {"results": [{"query": json.loads(b)}]}),
            "/not-found": lambda q, h, b: (404, "no such thing"),
            "/table": lambda q, h, b: (200, {"columns": ["id", "name"], "rows": [[r["id"], r["name"]] for r in ITEMS[:3]], "truncated": False}),
            "/fields": lambda q, h, b: (200, {"meta": {"fields": [{"name": "id"}, {"name": "name"}]}, "data": [[1, "item 1"], [2, "item 2"]]}),
            "/nameless": lambda q, h, b: (200, {"data": [[1, "item 1"], [2, "item 2"]]}),
            "/truncated": lambda q, h, b: (200, {"columns": ["id"], "rows": [[1], [2]], "truncated": True, "warning": "Results limited to 2 rows"}),
            "/headed": self.by_link_header,
        }
        super().__init__(tls)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        self.hits[parts.path] += 1
        self.requests.append({"method": handler.command, "path": parts.path, "query": query, "headers": dict(handler.headers), "body": body})
        route = self.routes.get(parts.path, lambda q, h, b: (404, "unknown route"))
        status, payload, *extra_headers = route(query, handler.headers, body)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        try:
            handler.send_response(status)
            for header, value in extra_headers:
                handler.send_header(header, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(text.encode())))
            handler.end_headers()
            handler.wfile.write(text.encode())
        except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting: what the timeout test wants
            pass

    def by_page(self, query, headers, body):
        page, size = int(query.get("page", 1)), int(query.get("per_page", 3))
        return 200, {"items": ITEMS[(page - 1) * size : page * size]}

    def by_offset(self, query, headers, body):
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 3))
        return 200, {"items": ITEMS[offset : offset + limit]}

    def by_cursor(self, query, headers, body):
        start = int(query.get("after", "c0")[1:])
        following = start + 3 if start + 3 < len(ITEMS) else None
        return 200, {"items": ITEMS[start : start + 3], "meta": {"next": f"c{following}" if following else ""}}

    def by_link(self, query, headers, body):
        page = int(query.get("page", 1))
        # Page 1 links relatively, page 2 absolutely; page 3 is the last and has no link.
        links = {1: {"next": "/linked?page=2"}, 2: {"next": f"{self.url}/linked?page=3"}, 3: {}}[page]
        return 200, {"items": ITEMS[(page - 1) * 3 : page * 3], "links": links}

    def by_link_header(self, query, headers, body):
        """Pages of 3 as a bare list, the next page only in an RFC 8288 Link header (as datasette's `_shape=array`)."""
        page = int(query.get("page", 1))
        link = [("Link", f'<{self.url}/headed?page={page + 1}>; rel="next"')] if page * 3 < len(ITEMS) else []
        return 200, ITEMS[(page - 1) * 3 : page * 3], *link

    def flaky(self, query, headers, body):
        return (503, "try again") if self.hits["/flaky"] <= 2 else (200, ITEMS[:1])

    def throttled(self, query, headers, body):
        return (429, "slow down", ("Retry-After", "0")) if self.hits["/throttled"] == 1 else (200, ITEMS[:2])

    def slow(self, query, headers, body):
        time.sleep(1.0)
        return 200, ITEMS

    def secure(self, query, headers, body):
        # Answers a wrong token by echoing it (without its "Bearer"), as careless APIs do: the error must not show it.
        if headers.get("Authorization") != TOKEN:
            return 401, f"invalid token {headers.get('Authorization', '').split()[-1:]}"
        return 200, {"items": ITEMS[:2], "links": {"next": query.get("next_host", "") and f"{query['next_host']}/items"}}


@pytest.fixture
def server():
    live = Server()
    yield live
    live.stop()


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path)


def rest(url: str, **settings) -> dict:
    return {"name": "tickets", "type": "rest", "url": url, **settings}


# --- records ----------------------------------------------------------------------------------------


def test_nested_records_are_flattened_into_columns(server, ctx):
    table = fetch(rest(f"{server.url}/people", records_path="data.items"), ctx)
    assert table.column_names == ["id", "name", "address_city", "address_geo_lat", "tags"]
    assert table.to_pylist() == [
        {"id": 1, "name": "Ada", "address_city": "London", "address_geo_lat": 51.5, "tags": '["math", "code"]'},
        {"id": 2, "name": "Grace", "address_city": "Arlington", "address_geo_lat": None, "tags": None},
    ]


def test_a_response_that_is_the_list_needs_no_records_path(server, ctx):
    assert fetch(rest(f"{server.url}/list", params={"status": "open", "all": True}), ctx).num_rows == 2
    assert server.requests[0]["query"] == {"status": "open", "all": "true"}


def test_params_join_the_query_already_in_the_url(server, ctx):
    paging = {"style": "page", "param": "page", "max_pages": 1}
    fetch(rest(f"{server.url}/pages?per_page=10&region=eu", records_path="items", params={"status": "open"}, pagination=paging), ctx)
    assert server.requests[0]["query"] == {"per_page": "10", "region": "eu", "status": "open", "page": "1"}


def test_plain_headers_are_sent(server, ctx):
    fetch(rest(f"{server.url}/list", headers={"Accept": "application/json", "X-Client": "dashmem-tests"}), ctx)
    assert server.requests[0]["headers"]["X-Client"] == "dashmem-tests"


def test_post_sends_the_json_body(server, ctx):
    body = {"filter": {"status": "open"}, "limit": 5}
    table = fetch(rest(f"{server.url}/search", method="POST", body=body, records_path="results"), ctx)
    assert server.requests[0]["method"] == "POST" and json.loads(server.requests[0]["body"]) == body
    assert table.to_pylist() == [{"query_filter_status": "open", "query_limit": 5}]


def test_rows_that_are_arrays_are_zipped_with_the_columns_beside_them(server, ctx):
    table = fetch(rest(f"{server.url}/table"), ctx)  # {"columns": [...], "rows": [[...]]}: found without records_path
    assert table.to_pylist() == [{"id": r["id"], "name": r["name"]} for r in ITEMS[:3]]


def test_columns_path_names_array_rows_whose_columns_are_elsewhere(server, ctx):
    table = fetch(rest(f"{server.url}/fields", records_path="data", columns_path="meta.fields"), ctx)
    assert table.to_pylist() == [{"id": 1, "name": "item 1"}, {"id": 2, "name": "item 2"}]
    with pytest.raises(SourceError, match="columns_path 'meta.nothing' in the response from .* is not a list of column names"):
        fetch(rest(f"{server.url}/fields", records_path="data", columns_path="meta.nothing"), ctx)


def test_array_rows_without_column_names_fail_rather_than_become_a_column_of_arrays(server, ctx):
    with pytest.raises(SourceError, match="row 1 is an array of values and no column names came with it; set columns_path"):
        fetch(rest(f"{server.url}/nameless", records_path="data"), ctx)


def test_an_answer_that_says_it_is_truncated_fails_the_source_with_what_it_said(server, ctx):
    with pytest.raises(SourceError) as caught:
        fetch(rest(f"{server.url}/truncated"), ctx)
    message = str(caught.value)
    assert f"the response from {server.url}/truncated says it is truncated (truncated: true, 'Results limited to 2 rows')" in message
    assert "allow_truncated: true" in message


def test_allow_truncated_loads_it_with_a_warning_for_the_refresh_report(server, ctx):
    table = fetch(rest(f"{server.url}/truncated", allow_truncated=True), ctx)
    assert table.column("id").to_pylist() == [1, 2]
    note = fetch_note(table)
    assert note is not None and note.startswith("warning: ") and "'Results limited to 2 rows'" in note and "loaded the 2 rows it gave" in note


# --- pagination -------------------------------------------------------------------------------------


def fetched_ids(table) -> list[int]:
    return table.column("id").to_pylist()


def test_page_numbers_until_an_empty_page(server, ctx):
    paging = {"style": "page", "param": "page", "size_param": "per_page", "size": 3}
    table = fetch(rest(f"{server.url}/pages", records_path="items", pagination=paging), ctx)
    assert fetched_ids(table) == list(range(1, 8))
    assert [(r["query"]["page"], r["query"]["per_page"]) for r in server.requests] == [("1", "3"), ("2", "3"), ("3", "3"), ("4", "3")]


def test_page_numbers_from_a_chosen_start(server, ctx):
    paging = {"style": "page", "param": "page", "start": 2}
    fetch(rest(f"{server.url}/pages", records_path="items", pagination=paging), ctx)
    assert [r["query"]["page"] for r in server.requests] == ["2", "3", "4"]


def test_offsets_stop_at_a_short_page(server, ctx):
    paging = {"style": "offset", "param": "offset", "size_param": "limit", "size": 3}
    table = fetch(rest(f"{server.url}/offsets", records_path="items", pagination=paging), ctx)
    assert fetched_ids(table) == list(range(1, 8))
    assert [r["query"]["offset"] for r in server.requests] == ["0", "3", "6"]  # 1 record at 6 < 3: no fourth request


def test_offsets_without_a_size_stop_at_an_empty_page(server, ctx):
    paging = {"style": "offset", "param": "offset"}
    assert fetched_ids(fetch(rest(f"{server.url}/offsets", records_path="items", pagination=paging), ctx)) == list(range(1, 8))
    assert [r["query"]["offset"] for r in server.requests] == ["0", "3", "6", "7"]


def test_cursor_is_followed_until_it_is_empty(server, ctx):
    paging = {"style": "cursor", "param": "after", "cursor_path": "meta.next"}
    table = fetch(rest(f"{server.url}/cursor", records_path="items", pagination=paging), ctx)
    assert fetched_ids(table) == list(range(1, 8))
    assert [r["query"].get("after") for r in server.requests] == [None, "c3", "c6"]


def test_next_links_relative_and_absolute_until_none(server, ctx):
    paging = {"style": "next_link", "next_path": "links.next"}
    table = fetch(rest(f"{server.url}/linked", records_path="items", pagination=paging), ctx)
    assert fetched_ids(table) == list(range(1, 8))
    assert [r["query"].get("page") for r in server.requests] == [None, "2", "3"]


def test_next_links_in_the_link_header(server, ctx):
    table = fetch(rest(f"{server.url}/headed", pagination={"style": "next_link"}), ctx)
    assert fetched_ids(table) == list(range(1, 8))
    assert [r["query"].get("page") for r in server.requests] == [None, "2", "3"]


def test_a_next_page_offered_to_a_source_without_pagination_fails_rather_than_load_the_first(server, ctx):
    with pytest.raises(SourceError, match=r'links a next page \(Link header, rel="next"\) but the source has no pagination'):
        fetch(rest(f"{server.url}/headed"), ctx)


@pytest.mark.parametrize(
    ("route", "paging"),
    [
        ("/pages", {"style": "page", "param": "page", "size_param": "per_page", "size": 3}),
        ("/offsets", {"style": "offset", "param": "offset", "size_param": "limit", "size": 3}),
        ("/cursor", {"style": "cursor", "param": "after", "cursor_path": "meta.next"}),
        ("/linked", {"style": "next_link", "next_path": "links.next"}),
        ("/headed", {"style": "next_link"}),
    ],
)
def test_reaching_max_pages_while_the_server_offers_more_fails_naming_the_setting(server, ctx, route, paging):
    with pytest.raises(
        SourceError, match=r"stopped at pagination.max_pages \(2 pages, 6 rows\) while the server still offers a next page.*Raise pagination.max_pages"
    ):
        fetch(rest(f"{server.url}{route}", records_path="" if route == "/headed" else "items", pagination={**paging, "max_pages": 2}), ctx)
    # The page and offset styles ask for one page more to know; the others know from the second page.
    assert server.hits[route] == (3 if paging["style"] in ("page", "offset") else 2)


@pytest.mark.parametrize(
    ("route", "paging"),
    [
        ("/pages", {"style": "page", "param": "page", "size_param": "per_page", "size": 3, "max_pages": 3}),  # the probe finds page 4 empty
        ("/linked", {"style": "next_link", "next_path": "links.next", "max_pages": 3}),
        ("/headed", {"style": "next_link", "max_pages": 3}),
    ],
)
def test_max_pages_that_are_just_enough_load_everything(server, ctx, route, paging):
    assert fetched_ids(fetch(rest(f"{server.url}{route}", records_path="" if route == "/headed" else "items", pagination=paging), ctx)) == list(range(1, 8))


def test_pagination_missing_its_settings_is_explained(server, ctx):
    with pytest.raises(SourceError, match="pagination style 'cursor' needs param and cursor_path"):
        fetch(rest(f"{server.url}/cursor", pagination={"style": "cursor"}), ctx)
    assert server.hits["/cursor"] == 0


# --- retries and failures ---------------------------------------------------------------------------


QUICK = {"attempts": 3, "backoff_s": 0.05, "max_backoff_s": 0.1}  # the waits of these tests, kept short


def test_a_server_answering_503_twice_then_200_is_retried_until_it_answers(server, ctx):
    table = fetch(rest(f"{server.url}/flaky", retry=QUICK), ctx)
    assert table.num_rows == 1 and server.hits["/flaky"] == 3


def test_a_429_is_retried(server, ctx):
    assert fetch(rest(f"{server.url}/throttled", retry=QUICK), ctx).num_rows == 2
    assert server.hits["/throttled"] == 2


def test_a_permanent_503_fails_after_the_attempts(server, ctx):
    with pytest.raises(SourceError) as caught:
        fetch(rest(f"{server.url}/broken?page=1&key=abc", retry=QUICK), ctx)
    message = str(caught.value)
    assert message == f"source 'tickets': HTTP 503 from {server.url}/broken after 3 attempts: database on fire"
    assert server.hits["/broken"] == 3


@pytest.mark.parametrize(("route", "status", "body"), [("/not-found", 404, "no such thing"), ("/crashed", 500, "unexpected error")])
def test_a_4xx_or_a_500_fails_at_once_without_retrying(server, ctx, route, status, body):
    with pytest.raises(SourceError, match=f"HTTP {status} from {server.url}{route}: {body}$"):
        fetch(rest(f"{server.url}{route}", retry=QUICK), ctx)
    assert server.hits[route] == 1


def test_connections_reset_by_the_network_are_retried_until_one_gets_through(server, ctx):
    proxy = FlakyProxy(("127.0.0.1", server.port), failures=2, mode="reset")
    try:
        table = fetch(rest(f"http://127.0.0.1:{proxy.port}/list", retry=QUICK), ctx)
    finally:
        proxy.stop()
    assert table.num_rows == 2 and proxy.connections == 3 and server.hits["/list"] == 1


def test_a_server_that_accepts_and_never_answers_times_out_on_every_attempt(ctx):
    proxy = FlakyProxy(None, mode="silent")
    try:
        with pytest.raises(SourceError) as caught:
            fetch(rest(f"http://127.0.0.1:{proxy.port}/list", timeout_s=0.3, retry={"attempts": 2, "backoff_s": 0}), ctx)
    finally:
        proxy.stop()
    assert str(caught.value) == f"source 'tickets': request to http://127.0.0.1:{proxy.port}/list timed out after 2 attempts (0.3 s each)"
    assert proxy.connections == 2


def test_timeouts_are_retried_then_reported(server, ctx):
    # /slow answers after 1 s, so an error that says "timed out" proves the 0.3 s limit cut each attempt
    # (a wall-clock bound here failed on a loaded CI machine).
    with pytest.raises(SourceError, match=rf"request to {server.url}/slow timed out after 2 attempts \(0.3 s each\)"):
        fetch(rest(f"{server.url}/slow", timeout_s=0.3, retry={"attempts": 2, "backoff_s": 0}), ctx)
    assert server.hits["/slow"] == 2


def test_an_unreachable_host_is_reported(ctx):
    with pytest.raises(SourceError, match="cannot reach http://127.0.0.1:1/x after 1 attempt: "):
        fetch(rest("http://127.0.0.1:1/x", retry={"attempts": 1}), ctx)


def test_malformed_json_is_reported(server, ctx):
    with pytest.raises(SourceError, match=f"response is not valid JSON: .*from {server.url}/malformed"):
        fetch(rest(f"{server.url}/malformed"), ctx)


def test_records_path_not_found_or_not_a_list(server, ctx):
    with pytest.raises(SourceError, match="records_path 'data.rows' not found in the response"):
        fetch(rest(f"{server.url}/people", records_path="data.rows"), ctx)
    with pytest.raises(SourceError, match=f"the response from {server.url}/people is an object with keys data, not a list of records; set records_path"):
        fetch(rest(f"{server.url}/people"), ctx)


# --- secret headers ---------------------------------------------------------------------------------


def test_secret_header_is_resolved_and_sent(server, ctx, monkeypatch):
    monkeypatch.setenv("DM_TEST_API_TOKEN", TOKEN)
    table = fetch(rest(f"{server.url}/secure", records_path="items", secret_headers={"Authorization": "env:DM_TEST_API_TOKEN"}), ctx)
    assert table.num_rows == 2 and server.requests[0]["headers"]["Authorization"] == TOKEN


def test_a_rejected_secret_never_appears_in_the_error(server, ctx, monkeypatch):
    wrong = "Bearer wrong-token-9876543210"
    monkeypatch.setenv("DM_TEST_API_TOKEN", wrong)
    with pytest.raises(SourceError) as caught:
        fetch(rest(f"{server.url}/secure", secret_headers={"Authorization": "env:DM_TEST_API_TOKEN"}), ctx)
    message = str(caught.value)
    assert message.startswith(f"source 'tickets': HTTP 401 from {server.url}/secure")
    assert "wrong-token" not in message and "***" in message  # the server echoed it; the connector scrubbed it
    assert server.hits["/secure"] == 1


def test_secret_headers_stay_with_the_configured_host(server, ctx, monkeypatch):
    other = Server()
    try:
        monkeypatch.setenv("DM_TEST_API_TOKEN", TOKEN)
        paging = {"style": "next_link", "next_path": "links.next"}
        source = rest(
            f"{server.url}/secure?next_host={other.url}", records_path="items", pagination=paging, secret_headers={"Authorization": "env:DM_TEST_API_TOKEN"}
        )
        assert fetch(source, ctx).num_rows == 2 + 2
        assert other.hits["/items"] == 1 and "Authorization" not in other.requests[0]["headers"]
    finally:
        other.stop()


def test_missing_secret_names_the_reference(server, ctx, monkeypatch):
    monkeypatch.delenv("DM_TEST_UNSET_TOKEN", raising=False)
    with pytest.raises(SourceError, match="secret env:DM_TEST_UNSET_TOKEN is not set"):
        fetch(rest(f"{server.url}/secure", secret_headers={"Authorization": "env:DM_TEST_UNSET_TOKEN"}), ctx)
    assert server.hits["/secure"] == 0


def test_a_secret_pasted_as_a_header_value_is_refused_without_echo(server, ctx):
    with pytest.raises(SourceError, match="secret header Authorization must be a secret reference") as caught:
        fetch(rest(f"{server.url}/secure", secret_headers={"Authorization": TOKEN}), ctx)
    assert "s3cret" not in str(caught.value)


def test_cloud_metadata_and_hosts_outside_the_allow_list_are_never_contacted(monkeypatch, tmp_path, network):
    ctx = FetchContext(workspace_path=tmp_path)
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x", "http://metadata.google.internal/computeMetadata/v1/"):
        with pytest.raises(SourceError, match="metadata"):
            fetch({"name": "meta", "type": "rest", "url": url, "retry": {"attempts": 1}, "timeout_s": 1}, ctx)
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW", "api.example.com")
    with pytest.raises(SourceError, match="DASHMEM_HTTP_ALLOW"):
        fetch({"name": "other", "type": "rest", "url": "http://127.0.0.1:9/x", "retry": {"attempts": 1}, "timeout_s": 1}, ctx)
    assert network.connects == []


def test_loopback_needs_the_operators_opt_in(server, ctx, monkeypatch, network):
    monkeypatch.delenv("DASHMEM_HTTP_ALLOW_NETWORKS")
    with pytest.raises(SourceError, match=r"127.0.0.1 is a loopback address; refused: .*DASHMEM_ALLOW_PRIVATE_NETWORKS=1"):
        fetch(rest(f"{server.url}/list"), ctx)
    assert server.requests == [] and network.connects == []


# --------------------------------------------------------------------------- HTTPS with client certificates (mutual TLS)


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    """This module's server over HTTPS, requiring a client certificate signed by its client CA (certificates by trustme)."""
    import trustme

    server_ca, client_ca, stranger_ca = trustme.CA(), trustme.CA(), trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ca.issue_cert("127.0.0.1").configure_cert(context)
    client_ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    client, stranger = client_ca.issue_cert("dashmem@example.com"), stranger_ca.issue_cert("dashmem@example.com")
    live = Server(tls=context)
    yield {
        "server": live,
        "ca": server_ca.cert_pem.bytes().decode(),
        "cert": client.cert_chain_pems[0].bytes().decode(),
        "key": client.private_key_pem.bytes().decode(),
        "stranger_ca": stranger_ca.cert_pem.bytes().decode(),
        "stranger_cert": stranger.cert_chain_pems[0].bytes().decode(),
        "stranger_key": stranger.private_key_pem.bytes().decode(),
    }
    live.stop()


TLS_REFS = {"client_cert": "env:DM_TEST_REST_CERT", "client_key": "env:DM_TEST_REST_KEY", "ca_bundle": "env:DM_TEST_REST_CA"}


def tls_rest(mtls, monkeypatch, cert="cert", key="key", ca="ca", refs=TLS_REFS) -> dict:
    monkeypatch.setenv("DM_TEST_REST_CERT", mtls[cert])
    monkeypatch.setenv("DM_TEST_REST_KEY", mtls[key])
    monkeypatch.setenv("DM_TEST_REST_CA", mtls[ca])
    return rest(f"{mtls['server'].url}/items", records_path="items", tls=dict(refs), retry=QUICK)


def test_the_right_client_certificate_is_accepted(mtls, ctx, monkeypatch):
    before = mtls["server"].hits["/items"]
    table = fetch(tls_rest(mtls, monkeypatch), ctx)
    assert table.column("name").to_pylist() == ["item 1", "item 2"]
    assert mtls["server"].hits["/items"] == before + 1


def test_a_client_certificate_from_another_ca_is_refused_at_once_with_a_plain_message(mtls, ctx, monkeypatch):
    before = mtls["server"].hits["/items"]
    with pytest.raises(SourceError) as caught:
        fetch(tls_rest(mtls, monkeypatch, cert="stranger_cert", key="stranger_key"), ctx)
    message = str(caught.value)
    assert message.startswith(f"source 'tickets': the server at {mtls['server'].url}/items refused the TLS client certificate"), message
    assert "tls.client_cert" in message and "attempt" not in message and "BEGIN" not in message
    assert mtls["server"].hits["/items"] == before  # no request got through


def test_no_client_certificate_is_refused_with_a_plain_message(mtls, ctx, monkeypatch):
    with pytest.raises(SourceError) as caught:
        fetch(tls_rest(mtls, monkeypatch, refs={"ca_bundle": "env:DM_TEST_REST_CA"}), ctx)
    message = str(caught.value)
    assert message.startswith(f"source 'tickets': the server at {mtls['server'].url}/items requires a TLS client certificate"), message
    assert "set tls.client_cert and tls.client_key" in message and "attempt" not in message


def test_a_server_certificate_from_an_unknown_ca_is_not_trusted(mtls, ctx, monkeypatch):
    with pytest.raises(SourceError, match=r"the server at https://127\.0\.0\.1:\d+/items: its TLS certificate is not trusted .*set tls\.ca_bundle") as caught:
        fetch(tls_rest(mtls, monkeypatch, ca="stranger_ca"), ctx)
    assert "attempt" not in str(caught.value)
    with pytest.raises(SourceError, match="its TLS certificate is not trusted"):  # nor by the public CAs, without tls
        fetch(rest(f"{mtls['server'].url}/items", retry=QUICK), ctx)


def test_tls_settings_of_a_rest_source_need_an_https_url_and_valid_pem(ctx, monkeypatch):
    with pytest.raises(SourceError, match="tls needs an https:// url"):
        fetch(rest("http://127.0.0.1:1/items", tls=dict(TLS_REFS)), ctx)
    monkeypatch.setenv("DM_TEST_REST_CERT", "garbage-cert-0123456789")
    monkeypatch.setenv("DM_TEST_REST_KEY", "garbage-key-0123456789")
    refs = {k: v for k, v in TLS_REFS.items() if k != "ca_bundle"}
    with pytest.raises(SourceError, match="tls.client_cert and tls.client_key .*PEM") as caught:
        fetch(rest("https://127.0.0.1:1/items", tls=refs), ctx)
    assert "garbage" not in str(caught.value)
