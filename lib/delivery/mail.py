"""The mail server: one connection per message, each exchange bounded by DASHMEM_SMTP_TIMEOUT_S.

Settings: DASHMEM_SMTP_HOST (unset: no mail), DASHMEM_SMTP_PORT (587 with starttls, 465 with tls, 25 with none),
DASHMEM_SMTP_TLS, DASHMEM_SMTP_USER, DASHMEM_SMTP_PASSWORD (a reference: env:NAME or secrets:KEY),
DASHMEM_SMTP_FROM. A refused connection, a refused login, a refused recipient and a server that stalls each
raise MailError with a sentence for the person running cron; the details go to the log.
"""

from __future__ import annotations

import logging
import smtplib
import socket
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import make_msgid

from ..core import settings
from ..core.errors import DashmemError
from ..memory import secrets

_log = logging.getLogger(__name__)

PORTS = {"starttls": 587, "tls": 465, "none": 25}


class MailError(DashmemError, RuntimeError):
    """A message could not be handed to the mail server; the message says why, in words."""


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    tls: str
    user: str | None
    password_ref: str | None
    sender: str
    timeout_s: float

    @classmethod
    def from_settings(cls) -> Server | None:
        """The mail server the settings name; None when DASHMEM_SMTP_HOST is unset (no mail is sent)."""
        host = settings.get("DASHMEM_SMTP_HOST")
        if not host:
            return None
        tls = settings.get("DASHMEM_SMTP_TLS")
        port = settings.get("DASHMEM_SMTP_PORT") or PORTS[tls]
        sender = settings.get("DASHMEM_SMTP_FROM") or f"dashmem@{socket.getfqdn() or 'localhost'}"
        return cls(host, port, tls, settings.get("DASHMEM_SMTP_USER"), settings.get("DASHMEM_SMTP_PASSWORD"), sender, settings.get("DASHMEM_SMTP_TIMEOUT_S"))

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def send(self, message: EmailMessage) -> None:
        """Hand `message` (its To: set) to the server; MailError when it is not accepted for every recipient."""
        if "From" not in message:
            message["From"] = self.sender
        if "Message-ID" not in message:
            message["Message-ID"] = make_msgid(domain="dashmem")
        to = message.get_all("To") or []
        try:
            with self._connect() as smtp:
                if self.user:
                    smtp.login(self.user, self._password())
                refused = smtp.send_message(message)
        except MailError:
            raise
        except smtplib.SMTPAuthenticationError as exc:
            _log.warning("mail: login of %s at %s refused: %s", self.user, self.where, exc)
            raise MailError(
                f"the mail server {self.where} refused the login of {self.user} ({exc.smtp_code}); check DASHMEM_SMTP_USER and DASHMEM_SMTP_PASSWORD"
            ) from None
        except smtplib.SMTPRecipientsRefused as exc:
            who = ", ".join(sorted(exc.recipients))
            _log.warning("mail: %s refused %s: %s", self.where, who, exc.recipients)
            raise MailError(f"the mail server {self.where} refused the recipient {who}") from None
        except smtplib.SMTPSenderRefused as exc:
            raise MailError(f"the mail server {self.where} refused the sender {exc.sender} ({exc.smtp_code}); check DASHMEM_SMTP_FROM") from None
        except smtplib.SMTPNotSupportedError:
            raise MailError(f"the mail server {self.where} does not offer STARTTLS; set DASHMEM_SMTP_TLS to tls or none") from None
        except smtplib.SMTPServerDisconnected as exc:
            if "timed out" not in str(exc):
                raise MailError(f"the mail server {self.where} closed the connection: {_plain(exc)}") from None
            raise MailError(f"the mail server {self.where} did not answer within {self.timeout_s:g} s (DASHMEM_SMTP_TIMEOUT_S)") from None
        except (TimeoutError, socket.timeout):
            raise MailError(f"the mail server {self.where} did not answer within {self.timeout_s:g} s (DASHMEM_SMTP_TIMEOUT_S)") from None
        except ssl.SSLError as exc:
            _log.warning("mail: TLS with %s failed: %s", self.where, exc)
            raise MailError(f"the TLS handshake with the mail server {self.where} failed ({exc.reason or exc}); check DASHMEM_SMTP_TLS") from None
        except ConnectionRefusedError:
            raise MailError(f"the mail server {self.where} refused the connection: is DASHMEM_SMTP_HOST/PORT right, and the server up?") from None
        except (OSError, smtplib.SMTPException) as exc:
            _log.warning("mail: sending to %s through %s failed", to, self.where, exc_info=True)
            raise MailError(f"the mail server {self.where} did not take the message: {_plain(exc)}") from None
        if refused:
            raise MailError(f"the mail server {self.where} refused the recipient {', '.join(sorted(refused))}")

    def _connect(self) -> smtplib.SMTP:
        context = ssl.create_default_context()
        if self.tls == "tls":
            return smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout_s, context=context)
        smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout_s)
        try:
            if self.tls == "starttls":
                smtp.starttls(context=context)
        except BaseException:
            smtp.close()
            raise
        return smtp

    def _password(self) -> str:
        if not self.password_ref:
            raise MailError("DASHMEM_SMTP_USER is set but DASHMEM_SMTP_PASSWORD is not: set it to env:NAME or secrets:KEY")
        try:
            return secrets.lookup(self.password_ref)
        except secrets.SecretMissing as exc:
            raise MailError(f"DASHMEM_SMTP_PASSWORD: {exc}") from None


def _plain(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return f"{exc.smtp_code} {text}".strip()
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
