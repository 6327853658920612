"""A mail inbox for aiosmtpd's SMTP server, which the delivery tests start on loopback and read back."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage


class Inbox:
    """aiosmtpd's handler: every message the server accepts, parsed, with its envelope's recipients."""

    def __init__(self):
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self.refuse: set[str] = set()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), parsed))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[EmailMessage]:
        return [m for rcpt, m in self.messages if address in rcpt]
