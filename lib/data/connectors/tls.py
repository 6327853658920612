"""TLS for a source's HTTPS connections: a client certificate (mutual TLS) and the CAs to trust.

Settings (`tls:` of an `mcp` or `rest` source) are secret references whose values are PEM text,
never file paths, so neither a key nor where one lies is ever in the config repo:

    tls:
      client_cert: secrets:mcp.client_cert   # PEM certificate, intermediates may follow
      client_key: secrets:mcp.client_key     # PEM private key
      client_key_password: env:MCP_KEY_PASS  # only for an encrypted key
      ca_bundle: env:MCP_CA_PEM              # PEM CAs that replace the public ones

Python's ssl module loads a certificate chain from files only; the PEM text goes to an
anonymous in-memory file (memfd) where the OS has one, otherwise to a file only this
user can read, removed as soon as it is loaded.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from contextlib import contextmanager
from typing import Iterator

from .. import netguard
from .base import FetchContext


def client_context(name: str, tls: dict, ctx: FetchContext) -> ssl.SSLContext:
    """An SSL context that verifies the server (against `ca_bundle`, or the public CAs) and presents
    the client certificate, if any. Raises SourceError naming the setting, never its value."""
    import httpx2  # the MCP SDK's HTTP client: its default context trusts certifi's CAs

    if tls.get("ca_bundle"):
        try:
            context = ssl.create_default_context(cadata=ctx.secret(name, tls["ca_bundle"]))
        except (ssl.SSLError, ValueError):
            raise ctx.error(name, f"tls.ca_bundle ({tls['ca_bundle']}) holds no PEM certificate") from None
    else:
        context = httpx2.create_ssl_context()
    if tls.get("client_cert") or tls.get("client_key"):
        if not (tls.get("client_cert") and tls.get("client_key")):
            raise ctx.error(name, "tls.client_cert and tls.client_key go together: give both")
        cert = ctx.secret(name, tls["client_cert"])
        key = ctx.secret(name, tls["client_key"])
        password = ctx.secret(name, tls["client_key_password"]) if tls.get("client_key_password") else None
        try:
            with _pem_file(key.strip() + "\n" + cert.strip() + "\n") as path:
                context.load_cert_chain(path, password=password)
        except (ssl.SSLError, ValueError):
            raise ctx.error(
                name,
                f"tls.client_cert and tls.client_key ({tls['client_cert']}, {tls['client_key']}) must be a PEM certificate and its PEM private key"
                + (" (check tls.client_key_password)" if password else ""),
            ) from None
    return context


@contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """A path from which `text` can be read, for as long as the block runs."""
    data = text.encode()
    if hasattr(os, "memfd_create"):  # Linux: the key never touches a disk
        fd = os.memfd_create("dashmem-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    folder = tempfile.mkdtemp(prefix="dashmem-tls-")  # mode 0700
    path = os.path.join(folder, "client.pem")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(data)
        yield path
    finally:
        try:
            os.remove(path)
        finally:
            os.rmdir(folder)


# TLS alerts by which a server says it will not take the client certificate it was given.
CLIENT_CERT_REFUSED = ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "ACCESS_DENIED", "CERTIFICATE_REVOKED", "CERTIFICATE_EXPIRED")

# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH: trusted, but not for this host.
HOST_MISMATCH = (62, 64)

CLOSED = "it closed the connection after the TLS handshake without answering"


def refusal(url: str, context: ssl.SSLContext, timeout_s: float) -> ssl.SSLError | str | None:
    """Why the HTTPS server at `url` refuses a TLS session from `context`: its TLS error, CLOSED, or None.

    Under TLS 1.3 a server checks the client certificate after the client's side of the handshake is
    done, so its refusal reaches an HTTP client as a broken pipe or a closed connection, and some
    servers (Python's asyncio, so uvicorn) send no alert at all, only close. This opens one connection
    (to an address lib/data/netguard.py allows), completes the handshake and sends a request: a TLS error,
    or a close without a byte of answer, is a refusal; an answer, or no connection at all, is not.
    """
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    try:
        addresses = netguard.check(host, port)
        with socket.create_connection((addresses[0], port), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host) as session:
                try:
                    session.sendall(b"HEAD / HTTP/1.1\r\nHost: " + host.encode("idna") + b"\r\nConnection: close\r\n\r\n")
                    answered = session.recv(1)
                except ssl.SSLError:
                    raise
                except OSError:  # reset or broken pipe right after the handshake: refused
                    return CLOSED
                return None if answered else CLOSED
    except ssl.SSLError as exc:
        return exc
    except (OSError, netguard.Refused):  # not even a handshake: the network, not TLS
        return None


def ssl_error_in(exc: BaseException | None) -> ssl.SSLError | None:
    """The TLS failure behind an HTTP client's error, if that is what it was."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ssl.SSLError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def problem(error: ssl.SSLError | str, where: str, sent_certificate: bool) -> str:
    """What a TLS failure means for the person configuring the source: trust, or the client certificate."""
    if isinstance(error, str):  # the server hung up on the handshake's heels, naming nothing
        if sent_certificate:
            return f"{where} refused the TLS client certificate ({error}); check that tls.client_cert is signed by a CA the server trusts"
        return f"{where} requires a TLS client certificate ({error}); set tls.client_cert and tls.client_key"
    reason = (error.reason or "").upper() if isinstance(error.reason, str) else ""
    shown = error.verify_message if isinstance(error, ssl.SSLCertVerificationError) else (error.reason or str(error))
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_code in HOST_MISMATCH:
        return f"{where}: its TLS certificate is for another host ({shown}); use a url with the host name the certificate names"
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"{where}: its TLS certificate is not trusted ({shown}); set tls.ca_bundle to the CA that signed it"
    if "CERTIFICATE_REQUIRED" in reason:
        return f"{where} requires a TLS client certificate; set tls.client_cert and tls.client_key"
    if any(alert in reason for alert in CLIENT_CERT_REFUSED):
        return f"{where} refused the TLS client certificate ({shown}); check that tls.client_cert is signed by a CA the server trusts"
    return f"TLS with {where} failed: {shown}"
