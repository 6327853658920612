"""The SMTP server the delivery tests send to: aiosmtpd's, started in the test's process on a free loopback port."""

from __future__ import annotations

import pytest

from tests.helpers.browser import free_port
from tests.helpers.mail import Inbox


@pytest.fixture
def smtp():
    """(the inbox, the server's port)."""
    controller_module = pytest.importorskip("aiosmtpd.controller", reason="aiosmtpd (requirements-dev.txt) runs the SMTP server these tests send to")
    inbox = Inbox()
    controller = controller_module.Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield inbox, controller.port
    controller.stop()
