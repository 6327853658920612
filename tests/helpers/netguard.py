"""The test network guard (the `network` fixture in tests/conftest.py): every socket `connect` is watched,
and one outside loopback fails the test; names are resolved by a stand-in for getaddrinfo, so no DNS query leaves."""

from __future__ import annotations

import ipaddress
from typing import Callable

# The stand-in DNS: names this module uses, and what they resolve to.
NAMES = {
    "metadata.attacker.test": ["169.254.169.254"],
    "169.254.169.254.": ["169.254.169.254"],
    "mixed.attacker.test": ["127.0.0.1", "169.254.169.254"],
    "api.test": ["127.0.0.1"],
    "private.test": ["10.0.0.1"],
}


def is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


class Network:
    """What this process tried: every connect (made only to loopback) and every name looked up."""

    def __init__(self):
        self.connects: list[str] = []
        self.escapes: list[str] = []  # connects outside loopback: none may happen
        self.lookups: list[str] = []
        self.unknown_names: list[str] = []  # names that would have needed real DNS
        self.answers: dict[str, list[str] | Callable[[], list[str]]] = dict(NAMES)  # addresses, or what gives them at each lookup
