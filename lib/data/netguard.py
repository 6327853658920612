"""Where REST and MCP sources may connect (DESIGN decision 13).

Stewards write sources, so a source's URL, its redirects and its next-page
links are untrusted. Comparing how a host is spelled is not enough
(`2852039166`, `0xa9fea9fe`, `[::ffff:a9fe:a9fe]` are all 169.254.169.254), so
the check is made where the connection is opened, on every connection:

1. the host name itself: cloud metadata names and, when the operator set
   DASHMEM_HTTP_ALLOW, host patterns;
2. every address the host resolves to (getaddrinfo), including the IPv4
   address inside an IPv4-mapped, IPv4-compatible, NAT64, 6to4 or Teredo
   IPv6 address. Link-local (cloud metadata), unspecified, multicast, broadcast
   and reserved addresses are never reachable; loopback, private and other
   non-public addresses only with the operator's opt-in
   (DASHMEM_ALLOW_PRIVATE_NETWORKS=1, or their network listed in
   DASHMEM_HTTP_ALLOW_NETWORKS);
3. the socket connects to one of the addresses just checked, never to the
   name, so a DNS answer that changes between check and connect (DNS
   rebinding) cannot slip in. One client resolves each host once and keeps
   the checked addresses for its lifetime (one fetch).

The checks run in an httpcore network backend under the httpx transport
(`lib.data.connectors.http`; this module loads no HTTP client), so a
redirect hop or a pagination link to another host opens a new connection and
is checked like the first request. TLS still verifies the certificate against
the URL's host name (httpcore sends it as SNI and checks it), and the Host
header is the URL's. Environment proxies (HTTP_PROXY...) are not used for
sources: behind a proxy the check could not see where the proxy connects.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from typing import Any, Iterable

from ..core import settings
from ..core.errors import DashmemError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

PRIVATE_SETTING = "DASHMEM_ALLOW_PRIVATE_NETWORKS"
NETWORKS_SETTING = "DASHMEM_HTTP_ALLOW_NETWORKS"
HOSTS_SETTING = "DASHMEM_HTTP_ALLOW"

# Names of metadata services, refused before they are ever looked up.
METADATA_HOSTS = {
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.tencentyun.com",
}

LINK_LOCAL = "a link-local/cloud-metadata address"

# Never reachable, whatever the operator allows.
NEVER = [
    (ipaddress.ip_network(net), what)
    for net, what in [
        ("169.254.0.0/16", LINK_LOCAL),  # 169.254.169.254: AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack
        ("fe80::/10", LINK_LOCAL),
        ("fd00:ec2::254/128", "a cloud-metadata address (AWS over IPv6)"),
        ("100.100.100.200/32", "a cloud-metadata address (Alibaba Cloud)"),
        ("168.63.129.16/32", "a cloud host-agent address (Azure)"),
        ("0.0.0.0/8", "an unspecified address"),
        ("::/128", "an unspecified address"),
        ("255.255.255.255/32", "the broadcast address"),
        ("224.0.0.0/4", "a multicast address"),
        ("ff00::/8", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        # Local-use NAT64 prefixes put the IPv4 address at a place this check cannot know.
        ("64:ff9b:1::/48", "a local-use NAT64 address (its IPv4 target cannot be checked)"),
    ]
]

# Reachable only with the operator's opt-in; any other non-public address is too.
OPT_IN = [
    (ipaddress.ip_network(net), what)
    for net, what in [
        ("127.0.0.0/8", "a loopback address"),
        ("::1/128", "a loopback address"),
        ("10.0.0.0/8", "a private address"),
        ("172.16.0.0/12", "a private address"),
        ("192.168.0.0/16", "a private address"),
        ("fc00::/7", "a private (unique local) address"),
        ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ]
]

NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

OPT_IN_HINT = (
    f"sources reach loopback and private networks only when the server's operator allows it ({PRIVATE_SETTING}=1, or the network listed in {NETWORKS_SETTING})"
)


class Refused(DashmemError):
    """A source tried to reach a host or an address this server does not let sources reach.

    The message is one line for the person who configured the source, e.g.
    "2852039166 resolves to 169.254.169.254, a link-local/cloud-metadata address; refused".
    """


# --- the checks ---------------------------------------------------------------------------------


def refused_name(host: str) -> str | None:
    """Why a source may not contact `host` by its name alone, or None (its addresses are checked later).

    A literal address is checked here too, so that one that could never be
    looked up (a link-local address with a zone, `fe80::1%eth0`) is still named.
    """
    name = _bare(host)
    if name.rstrip(".") in METADATA_HOSTS:
        return f"{name} is a cloud metadata host; refused"
    literal = _literal(name)
    if literal is not None:
        reason = refused_address(name, literal)
        if reason:
            return reason
    allowed = settings.get(HOSTS_SETTING)
    if allowed and not any(fnmatch.fnmatch(name, pattern) for pattern in allowed):
        return f"host {name} is not among the hosts this server lets sources reach ({HOSTS_SETTING})"
    return None


def refused_address(host: str, address: IPAddress | str) -> str | None:
    """Why a source may not connect to `address`, which `host` resolved to, or None."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    verdict = _judge(ip)
    if verdict is None:
        return None
    kind, what, judged = verdict
    if kind == "opt-in" and _operator_allows(judged):
        return None
    name = _bare(host)
    if _literal(name) == ip:
        lead = f"{name} stands for {judged}," if judged != ip else f"{name} is"
    else:
        lead = f"{name} resolves to {ip}" + (f", which stands for {judged}" if judged != ip else "") + ","
    if kind == "never":
        return f"{lead} {what}; refused"
    return f"{lead} {what}; refused: {OPT_IN_HINT}"


def check(host: str, port: int | None = None) -> list[str]:
    """The addresses `host` resolves to, every one of them allowed; raises Refused otherwise.

    A name that does not resolve raises socket.gaierror.
    """
    reason = refused_name(host)
    if reason:
        raise Refused(reason)
    return checked_addresses(host, resolve(host, port))


def checked_addresses(host: str, answers: Iterable[Any]) -> list[str]:
    """The distinct addresses in getaddrinfo's `answers` for `host`, if every one is allowed; raises Refused otherwise."""
    addresses = _addresses(answers)
    if not addresses:
        raise socket.gaierror(socket.EAI_NONAME, f"{_bare(host)} resolves to no address")
    for address in addresses:  # every one: the OS, or a retry, may pick any of them
        reason = refused_address(host, address)
        if reason:
            raise Refused(reason)
    return addresses


def resolve(host: str, port: int | None) -> list:
    """getaddrinfo for `host`, looked up on the socket module at call time (tests stand in for it)."""
    return socket.getaddrinfo(_bare(host), port, type=socket.SOCK_STREAM)


def _judge(ip: IPAddress) -> tuple[str, str, IPAddress] | None:
    """("never" or "opt-in", what the address is, the address judged), or None for a public address."""
    for network, what in NEVER:
        if ip.version == network.version and ip in network:
            return "never", what, ip
    if ip.version == 6:
        inner, replaces = _embedded_ipv4(ip)
        if inner is not None:
            verdict = _judge(inner)
            # IPv4-mapped, -compatible and NAT64 addresses are their IPv4 address;
            # 6to4 and Teredo are judged as both and the worse verdict wins.
            if replaces or (verdict is not None):
                return verdict
    for network, what in OPT_IN:
        if ip.version == network.version and ip in network:
            return "opt-in", what, ip
    if not ip.is_global:
        return "opt-in", "a non-public address", ip
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address | None, bool]:
    """The IPv4 address an IPv6 address carries, and whether the IPv6 address is just that IPv4 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, True
    if ip in NAT64_WELL_KNOWN or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), True
    if ip.sixtofour is not None:
        return ip.sixtofour, False
    if ip.teredo is not None:
        return ip.teredo[1], False
    return None, False


def _operator_allows(ip: IPAddress) -> bool:
    try:
        if settings.get(PRIVATE_SETTING):
            return True
        networks = settings.get(NETWORKS_SETTING)
    except settings.SettingError as exc:  # a setting the operator mistyped refuses, saying which
        raise Refused(str(exc)) from None
    return any(ip.version == network.version and ip in network for network in networks)


def _bare(host: str) -> str:
    return (host or "").strip().strip("[]").lower()


def _literal(name: str) -> IPAddress | None:
    """`name` as an IP address if it is written as one (a zone, `%eth0` or `%25eth0`, is dropped)."""
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None


def _addresses(answers: Iterable[Any]) -> list[str]:
    """The distinct addresses of getaddrinfo's answers, in its order, without IPv6 zones."""
    seen: dict[str, None] = {}
    for family, _type, _proto, _name, sockaddr in answers:
        if family in (socket.AF_INET, socket.AF_INET6):
            seen.setdefault(str(sockaddr[0]).split("%", 1)[0], None)
    return list(seen)
