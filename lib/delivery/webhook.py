"""An alert posted to a webhook: JSON to a URL the operator allows (DASHMEM_ALERT_WEBHOOKS), through the
address checks of REST sources (lib.data.netguard), within DASHMEM_SMTP_TIMEOUT_S, never following a redirect."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

from ..core import settings
from ..core.errors import DashmemError
from ..data.connectors.http import http_transport
from ..data.netguard import Refused

_log = logging.getLogger(__name__)


class WebhookError(DashmemError, RuntimeError):
    """A webhook that is not allowed, cannot be reached, or did not take the alert; the message says which."""


def allowed(url: str) -> bool:
    """Whether `url` starts with one of the operator's DASHMEM_ALERT_WEBHOOKS."""
    return any(url.startswith(prefix) for prefix in settings.get("DASHMEM_ALERT_WEBHOOKS"))


def post(url: str, payload: Mapping[str, Any]) -> None:
    """POST `payload` as JSON to `url`; WebhookError unless it answered 2xx."""
    if not allowed(url):
        raise WebhookError(f"the webhook {url} is not one DASHMEM_ALERT_WEBHOOKS allows; the operator lists the URLs alerts may post to")
    timeout = settings.get("DASHMEM_SMTP_TIMEOUT_S")
    try:
        with httpx.Client(transport=http_transport(), timeout=timeout, follow_redirects=False) as client:
            answer = client.post(url, json=dict(payload))
    except Refused as exc:
        raise WebhookError(f"the webhook {url} may not be reached: {exc}") from None
    except httpx.TimeoutException:
        raise WebhookError(f"the webhook {url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        _log.warning("webhook %s failed", url, exc_info=True)
        raise WebhookError(f"the webhook {url} could not be reached: {type(exc).__name__}") from None
    if not 200 <= answer.status_code < 300:
        raise WebhookError(f"the webhook {url} answered {answer.status_code} {answer.reason_phrase}")
