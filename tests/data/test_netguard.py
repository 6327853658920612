"""Sources cannot be steered to the cloud metadata service, or anywhere else the operator did not allow
(issue #13, DESIGN decision 13).

Each spelling that once reached 169.254.169.254 is kept here, directly, behind a 302 from a real
server on 127.0.0.1 and behind a next-page link, for REST and for MCP over streamable HTTP.

Nothing in this module may leave this machine: every socket `connect` is watched, and one to an
address outside loopback fails the test (the connection is not made). Names are resolved by a
stand-in for getaddrinfo, so no DNS query leaves either.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, urlsplit

import anyio
import httpx2
import pytest

from lib.data import netguard
from lib.data.connectors import http
from lib.data.connectors.base import FetchContext, SourceError, fetch
from tests.helpers.netguard import Network, is_loopback

from ..conftest import LocalHTTPServer

# A connect outside loopback, or a real DNS lookup, fails the test (tests/helpers/netguard.py).
pytestmark = pytest.mark.usefixtures("network")

METADATA = ipaddress.ip_address("169.254.169.254")

# Every spelling that reached the metadata service before the fix, then more of the same classes.
ATTACKS = {
    "decimal": "http://2852039166/latest/meta-data/",
    "hex": "http://0xa9fea9fe/latest/meta-data/",
    "two-part": "http://169.254.43518/latest/meta-data/",
    "ipv4-mapped": "http://[::ffff:169.254.169.254]/latest/meta-data/",
    "ipv4-mapped-hex": "http://[::ffff:a9fe:a9fe]/latest/meta-data/",
    "aws-ipv6": "http://[fd00:ec2::254]/latest/meta-data/",
    "plain": "http://169.254.169.254/latest/meta-data/",
    "link-local-ipv6": "http://[fe80::a9fe:a9fe]/",
    "nat64": "http://[64:ff9b::a9fe:a9fe]/",
    "6to4": "http://[2002:a9fe:a9fe::1]/",
    "ipv4-compatible": "http://[::a9fe:a9fe]/",
    "unspecified": "http://0/",
    "unspecified-ipv6": "http://[::]/",
    "alibaba": "http://100.100.100.200/latest/meta-data/",
    "metadata-name": "http://metadata.google.internal/computeMetadata/v1/",
    "name-to-metadata": "http://metadata.attacker.test/",  # a name whose DNS answer is the metadata address
    "trailing-dot": "http://169.254.169.254./",
    "one-bad-address": "http://mixed.attacker.test/",  # resolves to a loopback AND the metadata address
}


@pytest.fixture(autouse=True)
def private_networks_allowed(monkeypatch):
    """The operator's opt-in, so the local servers on 127.0.0.1 can be reached (a test may take it back)."""
    monkeypatch.setenv("DASHMEM_ALLOW_PRIVATE_NETWORKS", "1")
    monkeypatch.delenv("DASHMEM_HTTP_ALLOW_NETWORKS", raising=False)
    monkeypatch.delenv("DASHMEM_HTTP_ALLOW", raising=False)


@pytest.fixture
def ctx(tmp_path):
    return FetchContext(workspace_path=tmp_path)


class Server(LocalHTTPServer):
    """A real HTTP(S) server on 127.0.0.1: /redirect?to=URL (302), /linked?next=URL (a page with a next
    link), /list (records), and a POST to /mcp answered with a redirect to ?to=URL."""

    def __init__(self, tls: ssl.SSLContext | None = None):
        self.requests: list[dict] = []
        self.sni: list[str | None] = []  # the server names TLS clients asked for (tls_server records them)
        super().__init__(tls)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        self.requests.append({"method": handler.command, "path": parts.path, "host": handler.headers.get("Host")})
        status, headers, body = 404, {}, {"error": "unknown route"}
        if parts.path in ("/redirect", "/mcp") and "to" in query:
            status, headers, body = int(query.get("status", 302)), {"Location": query["to"]}, {}
        elif parts.path == "/linked":
            status, body = 200, {"items": [{"id": 1}], "next": query.get("next")}
        elif parts.path == "/list":
            status, body = 200, [{"id": 1}, {"id": 2}]
        text = json.dumps(body).encode()
        handler.send_response(status)
        for key, value in {"Content-Type": "application/json", "Content-Length": str(len(text)), **headers}.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(text)


@pytest.fixture
def server():
    live = Server()
    yield live
    live.stop()


def rest(url: str, **settings) -> dict:
    return {"name": "meta", "type": "rest", "url": url, "retry": {"attempts": 1}, "timeout_s": 5, **settings}


def mcp(url: str, **settings) -> dict:
    return {"name": "meta", "type": "mcp", "url": url, "tool": "list_stock", "arguments": {"warehouse": "north"}, "timeout_s": 10, **settings}


def refusal(ctx, source: dict) -> str:
    with pytest.raises(SourceError) as caught:
        fetch(source, ctx)
    message = str(caught.value)
    assert message.startswith(f"source {source['name']!r}: ") and "\n" not in message and "Traceback" not in message
    return message


def assert_refused_as_metadata(message: str) -> None:
    assert message.endswith("refused"), message
    assert any(word in message for word in ("metadata", "link-local", "unspecified")), message


def assert_never_connected_beyond_loopback(network: Network) -> None:
    assert all(is_loopback(host) for host in network.connects), network.connects


# --- the spellings, directly ----------------------------------------------------------------------


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_rest_refuses_every_spelling(url, ctx, network):
    assert_refused_as_metadata(refusal(ctx, rest(url)))
    assert network.connects == []


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_mcp_refuses_every_spelling(url, ctx, network):
    assert_refused_as_metadata(refusal(ctx, mcp(url + "mcp")))
    assert network.connects == []


def test_the_message_names_the_source_the_spelling_and_the_address(ctx):
    assert refusal(ctx, rest(ATTACKS["decimal"])) == ("source 'meta': 2852039166 resolves to 169.254.169.254, a link-local/cloud-metadata address; refused")
    assert refusal(ctx, rest(ATTACKS["ipv4-mapped-hex"])) == (
        "source 'meta': ::ffff:a9fe:a9fe stands for 169.254.169.254, a link-local/cloud-metadata address; refused"
    )


# --- behind a redirect from a real server on 127.0.0.1 ---------------------------------------------


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_rest_refuses_a_302_to_every_spelling(url, server, ctx, network):
    assert_refused_as_metadata(refusal(ctx, rest(f"{server.url}/redirect?to={quote(url, safe='')}")))
    assert [r["path"] for r in server.requests] == ["/redirect"]  # the first hop was allowed, the second never made
    assert_never_connected_beyond_loopback(network)


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_rest_refuses_every_kind_of_redirect(status, server, ctx, network):
    message = refusal(ctx, rest(f"{server.url}/redirect?status={status}&to={quote(ATTACKS['hex'], safe='')}"))
    assert "169.254.169.254" in message
    assert_never_connected_beyond_loopback(network)


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_mcp_never_follows_a_302_to_any_spelling(url, server, ctx, network):
    # The MCP SDK follows only redirects within the endpoint's origin, and the connection is checked anyway.
    with pytest.raises(SourceError, match="^source 'meta': "):
        fetch(mcp(f"{server.url}/mcp?to={quote(url, safe='')}"), ctx)
    assert server.requests and {r["path"] for r in server.requests} == {"/mcp"}
    assert_never_connected_beyond_loopback(network)


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_the_mcp_http_client_refuses_even_a_redirect_it_would_follow(url, server, network):
    """The client the MCP connector hands the SDK: were the SDK to follow any redirect, the hop is still checked."""

    async def follow():
        async with httpx2.AsyncClient(transport=http.async_http_transport(), follow_redirects=True) as client:
            await client.post(f"{server.url}/mcp?status=307&to={quote(url, safe='')}", json={})

    with pytest.raises(netguard.Refused, match="refused$"):
        anyio.run(follow)
    assert_never_connected_beyond_loopback(network)


# --- behind a next-page link ----------------------------------------------------------------------


@pytest.mark.parametrize("url", ATTACKS.values(), ids=ATTACKS.keys())
def test_rest_refuses_a_next_link_to_every_spelling(url, server, ctx, network):
    paging = {"style": "next_link", "next_path": "next"}
    message = refusal(ctx, rest(f"{server.url}/linked?next={quote(url, safe='')}", records_path="items", pagination=paging))
    assert_refused_as_metadata(message)
    assert [r["path"] for r in server.requests] == ["/linked"]
    assert_never_connected_beyond_loopback(network)


def test_a_next_link_redirecting_to_metadata_is_refused(server, ctx, network):
    hop = f"{server.url}/redirect?to={quote(ATTACKS['two-part'], safe='')}"
    paging = {"style": "next_link", "next_path": "next"}
    message = refusal(ctx, rest(f"{server.url}/linked?next={quote(hop, safe='')}", records_path="items", pagination=paging))
    assert "169.254.169.254" in message
    assert [r["path"] for r in server.requests] == ["/linked", "/redirect"]
    assert_never_connected_beyond_loopback(network)


# --- DNS rebinding: the connection goes to the address that was checked ----------------------------


def flipping(first: list[str], then: list[str]):
    """A DNS answer that is `first` once and `then` ever after, as a rebinding attacker's server gives."""
    answers = iter([first])
    return lambda: next(answers, then)


def test_rest_connects_to_the_checked_address_and_refuses_the_rebound_one(server, ctx, network):
    network.answers["rebind.test"] = flipping(["127.0.0.1"], ["169.254.169.254"])
    origin = f"http://rebind.test:{server.port}"
    # Three requests to the rebinding name within one fetch: a redirect, the page it leads to, and a next-page link.
    first = f"{origin}/redirect?to=" + quote(f"{origin}/linked?next=" + quote(f"{origin}/linked", safe=""), safe="")
    table = fetch(rest(first, records_path="items", pagination={"style": "next_link", "next_path": "next"}), ctx)
    assert table.num_rows == 2 and [r["path"] for r in server.requests] == ["/redirect", "/linked", "/linked"]
    # The server closes each connection (HTTP/1.0), so three connections; one lookup, checked, pinned for the fetch.
    assert network.connects == ["127.0.0.1"] * 3 and network.lookups.count("rebind.test") == 1
    assert {r["host"] for r in server.requests} == {f"rebind.test:{server.port}"}  # the Host header is the URL's

    # The next fetch resolves again: the name now points at the metadata service and is refused.
    message = refusal(ctx, rest(f"{origin}/list"))
    assert message == "source 'meta': rebind.test resolves to 169.254.169.254, a link-local/cloud-metadata address; refused"
    assert_never_connected_beyond_loopback(network)


@pytest.mark.slow  # starts an MCP server process (mcp_http_url)
def test_mcp_connects_to_the_checked_address_and_refuses_the_rebound_one(mcp_http_url, ctx, network):
    # The test server accepts only localhost Host headers (the SDK's own rebinding protection), so the
    # attacker's name here is `localhost`, answered first with 127.0.0.1 and then with the metadata address.
    network.answers["localhost"] = flipping(["127.0.0.1"], ["169.254.169.254"])
    url = mcp_http_url.replace("127.0.0.1", "localhost")
    table = fetch(mcp(url), ctx)  # a session: several requests, and connections, to the name
    assert table.num_rows == 3
    assert network.lookups.count("localhost") == 1
    assert network.connects and set(network.connects) == {"127.0.0.1"}

    message = refusal(ctx, mcp(url))
    assert message == "source 'meta': localhost resolves to 169.254.169.254, a link-local/cloud-metadata address; refused"
    assert_never_connected_beyond_loopback(network)


def test_a_name_with_any_forbidden_address_is_refused_whatever_the_others(server, ctx, network):
    network.answers["rebind.test"] = ["127.0.0.1", "169.254.169.254"]
    assert "169.254.169.254" in refusal(ctx, rest(f"http://rebind.test:{server.port}/list"))
    assert network.connects == [] and server.requests == []


# --- loopback and private networks need the operator's opt-in -------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.1", "private.test", "[::1]", "192.168.1.10", "100.64.0.1", "[fd12::1]"])
def test_without_the_opt_in_loopback_and_private_addresses_are_refused(host, ctx, monkeypatch, network):
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS")
    for source in (rest(f"http://{host}:8080/x"), mcp(f"http://{host}:8080/mcp")):
        message = refusal(ctx, source)
        assert message.endswith(
            "refused: sources reach loopback and private networks only when the server's operator "
            "allows it (DASHMEM_ALLOW_PRIVATE_NETWORKS=1, or the network listed in DASHMEM_HTTP_ALLOW_NETWORKS)"
        )
    assert network.connects == []


def test_the_opt_in_message_says_what_the_address_is(ctx, monkeypatch):
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS")
    assert refusal(ctx, rest("http://127.0.0.1:8080/x")).startswith("source 'meta': 127.0.0.1 is a loopback address; refused: ")
    assert refusal(ctx, rest("http://private.test/x")).startswith("source 'meta': private.test resolves to 10.0.0.1, a private address; refused: ")


def test_a_redirect_from_an_allowed_host_to_loopback_needs_the_opt_in_too(server, ctx, monkeypatch, network):
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS")
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "127.0.0.1/32")  # only the test server's address
    assert fetch(rest(f"{server.url}/list"), ctx).num_rows == 2
    message = refusal(ctx, rest(f"{server.url}/redirect?to={quote('http://10.0.0.1/', safe='')}"))
    assert "10.0.0.1 is a private address; refused" in message
    assert_never_connected_beyond_loopback(network)


def test_listed_networks_open_only_themselves(server, ctx, monkeypatch):
    monkeypatch.delenv("DASHMEM_ALLOW_PRIVATE_NETWORKS")
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "10.0.0.0/8, 127.0.0.0/8")
    assert fetch(rest(f"{server.url}/list"), ctx).num_rows == 2
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "10.0.0.0/8")
    assert "127.0.0.1 is a loopback address; refused" in refusal(ctx, rest(f"{server.url}/list"))
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "169.254.0.0/16,0.0.0.0/0")  # never opens metadata
    assert_refused_as_metadata(refusal(ctx, rest(ATTACKS["plain"])))
    monkeypatch.setenv("DASHMEM_HTTP_ALLOW_NETWORKS", "localnet")
    assert "DASHMEM_HTTP_ALLOW_NETWORKS lists 'localnet', which is not a network" in refusal(ctx, rest(f"{server.url}/list"))


def test_the_opt_in_never_opens_the_metadata_service(ctx):
    # private_networks_allowed is in effect here.
    for url in ATTACKS.values():
        assert_refused_as_metadata(refusal(ctx, rest(url)))


def test_unix_sockets_and_unresolvable_names_are_reported_plainly(ctx, network):
    with pytest.raises(netguard.Refused):
        http._GuardedBackend().connect_unix_socket("/var/run/docker.sock")
    network.answers["nowhere.test"] = []
    assert "cannot reach http://nowhere.test/x after 1 attempt: cannot resolve nowhere.test" in refusal(ctx, rest("http://nowhere.test/x"))


# --- TLS still verifies the URL's host name ---------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """An HTTPS server on 127.0.0.1 whose certificate, from a CA made here, names api.test only."""
    pytest.importorskip("cryptography")
    from datetime import datetime, timedelta, timezone

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(timezone.utc)

    def certificate(subject, issuer, key, signer, san=None, ca=False):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=1))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        else:
            assert san is not None  # a leaf names its host
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
            builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dashmem test CA")])
    ca = certificate(ca_name, ca_name, ca_key, ca_key, ca=True)
    leaf = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api.test")]), ca_name, leaf_key, ca_key, san="api.test")
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(pem) + leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "leaf.pem")
    live = Server(tls=context)
    context.sni_callback = lambda sock, name, ctx_: live.sni.append(name)
    yield live
    live.stop()


def test_https_verifies_the_certificate_against_the_url_host_not_the_address(tls_server, ctx, network):
    table = fetch(rest(f"https://api.test:{tls_server.port}/list"), ctx)
    assert table.num_rows == 2
    assert set(network.connects) == {"127.0.0.1"} and tls_server.sni == ["api.test"]
    assert tls_server.requests[0]["host"] == f"api.test:{tls_server.port}"
    # The same server by its address: the certificate does not name it, and verification says so.
    message = refusal(ctx, rest(f"https://127.0.0.1:{tls_server.port}/list"))
    assert "its TLS certificate is for another host" in message and "not valid for '127.0.0.1'" in message
    assert "attempts" not in message  # a setting to fix, not a passing fault: not retried
