"""The model client interface: the official Anthropic SDK, or a scripted stand-in.

`ModelClient.create(request, on_text=None, on_wait=None, deadline=None)` sends
one Messages API request (as `lib.chat.compose` builds it) and returns the
response as a plain dict: {"content": [...blocks...], "stop_reason": ...,
"usage": {...}, ...}. With `on_text`, text is streamed to it as it arrives.

`AnthropicClient` wraps `anthropic.Anthropic` (and is the only place that
makes one: `lib.core.tokens` counts through it too); every failure becomes a
`ModelError` with a kind and a message a person can act on, a stream that
breaks in the middle of its body included. `anthropic` is imported only when a
client is made, so the refresh path never loads it.

Retries are the client's own, not the SDK's (whose `retry-after` has no cap):
a failure before the reply starts (429, 5xx, 529, a timeout, no connection)
is tried again up to `max_retries` times, after the wait the API asks for or
a short backoff. No wait is longer than DASHMEM_CHAT_MAX_WAIT_S, no wait and
no attempt runs past the session's `deadline` (the call gives up at once with
a plain message instead, or holds the attempt's time-out to it), and
`on_wait(reason, seconds_left)` hears each second of a wait, so a page can say
"waiting for the API (rate limited), 7 s". A reply that fails once
it has started streaming is not sent again: its text has been shown, and it
may have been billed.

Session content is never logged: the SDK's own debug log of request options
(which would hold the prompt) is filtered out, and OpenTelemetry spans are
pinned to metadata only, whatever ANTHROPIC_OPEN_TELEMETRY_* says.

`ScriptedModel` returns given responses in order and records the requests;
tests and the evaluation harness use it where no API is reachable.
"""

from __future__ import annotations

import copy
import email.utils
import logging
import math
import time
from typing import Any, Callable, Iterable, Protocol

from ..core import settings, tokens
from ..core.errors import DashmemError
from ..core.settings import model_id
from ..memory.secrets import first_set

TextCallback = Callable[[str], None]
WaitCallback = Callable[[str, int], None]  # (why: "rate limited", "overloaded", ...; whole seconds left to wait)

log = logging.getLogger(__name__)

NO_KEY = "no Anthropic API key: set ANTHROPIC_API_KEY, or add anthropic.api_key to .streamlit/secrets.toml (everything except the model call works without one)"


class ModelError(DashmemError):
    """A model call failed; `kind` is one of: no_key, auth, rate_limit, server, timeout, connection, request, script."""

    def __init__(self, kind: str, message: str, attempts: int = 1):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts  # how many times the request was sent


class ModelClient(Protocol):
    def create(
        self, request: dict[str, Any], on_text: TextCallback | None = None, on_wait: WaitCallback | None = None, deadline: float | None = None
    ) -> dict[str, Any]: ...


def waiting_text(reason: str, seconds: int) -> str:
    """What a page shows while a call waits to be tried again."""
    return f"waiting for the API ({reason}), {seconds} s"


# --------------------------------------------------------------------------- API key


def resolve_api_key(explicit: str | None = None) -> str | None:
    """The API key: the argument, else ANTHROPIC_API_KEY, else Streamlit secrets anthropic.api_key or ANTHROPIC_API_KEY."""
    if explicit:
        return explicit

    return first_set("env:ANTHROPIC_API_KEY", "secrets:anthropic.api_key", "secrets:ANTHROPIC_API_KEY")


def count_tokens(text: str) -> tuple[int, str]:
    """(tokens, method): the count_tokens API when an API key is set (environment or Streamlit secrets),
    else the offline estimate (`lib.core.tokens.estimate`)."""
    if not resolve_api_key():
        return tokens.estimate(text), tokens.ESTIMATE_METHOD
    return AnthropicClient().count_tokens(text), "Anthropic count_tokens API"


def api_key_available() -> bool:
    return resolve_api_key() is not None


# --------------------------------------------------------------------------- the SDK


class _DropRequestBodies(logging.Filter):
    """The SDK logs "Request options: {...}" (the whole prompt) at DEBUG; sessions are never logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Request options")


_BODY_FILTER = _DropRequestBodies()


class AnthropicClient:
    """Messages API calls through the official SDK, with bounded retries and every failure mapped to `ModelError`."""

    def __init__(self, api_key: str | None = None, model: str | None = None, http_client: Any = None, max_retries: int = 2, timeout: float = 60):
        key = resolve_api_key(api_key)
        if key is None:
            raise ModelError("no_key", NO_KEY)
        import anthropic
        import httpx2

        sdk_log = logging.getLogger("anthropic._base_client")
        if _BODY_FILTER not in sdk_log.filters:
            sdk_log.addFilter(_BODY_FILTER)
        self.model = model  # when set, overrides the request's model
        self.timeout = timeout
        self.max_retries = max_retries  # tries after the first; this client's, the SDK itself never retries
        self._anthropic = anthropic
        self._httpx = httpx2
        self._client = anthropic.Anthropic(
            api_key=key,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
            open_telemetry={"traces": {"content_mode": "metadata_only"}},
        )

    def create(
        self, request: dict[str, Any], on_text: TextCallback | None = None, on_wait: WaitCallback | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        params = dict(request)
        if self.model:
            params["model"] = self.model

        def send(client: Any, started: list[bool]) -> Any:
            if on_text is None:
                return client.messages.create(**params)
            with client.messages.stream(**params) as stream:
                started.append(True)  # the reply has begun: from here on, a failure is not sent again
                for text in stream.text_stream:
                    on_text(text)
                return stream.get_final_message()

        message = self._with_retries(send, on_wait, deadline)
        return message.model_dump(mode="json", exclude_none=True)

    def count_tokens(self, text: str) -> int:
        """Input tokens of `text` as one user message, by the count_tokens API (no model call, nothing generated)."""
        model = self.model or model_id()
        result = self._with_retries(lambda client, started: client.messages.count_tokens(model=model, messages=[{"role": "user", "content": text}]))
        return result.input_tokens

    # ---- retries

    def _with_retries(self, send: Callable[[Any, list[bool]], Any], on_wait: WaitCallback | None = None, deadline: float | None = None) -> Any:
        limits: list[float] = []  # each attempt's time-out: `timeout`, or less so as to end by the deadline
        while True:
            limit = self.timeout if deadline is None else max(1.0, min(self.timeout, deadline - time.monotonic()))
            limits.append(limit)
            attempts = len(limits)
            started: list[bool] = []
            try:
                return send(self._client if limit == self.timeout else self._client.with_options(timeout=limit), started)
            except Exception as exc:  # the SDK's errors, httpx2's from a broken stream, and anything else: never raw to a page
                error = self._explain(exc, attempts, mid_reply=bool(started), limits=limits)
                wait = None if started or attempts > self.max_retries else self._retry_wait(exc, attempts)
            if wait is None:
                raise error
            reason, seconds = wait
            head = error.message.split(" — ")[0]  # what failed, without the advice to try again
            cap = settings.get("DASHMEM_CHAT_MAX_WAIT_S")
            if seconds > cap:
                raise ModelError(
                    error.kind,
                    f"{head} — the API asks to wait {_duration(seconds)} before another try, longer than the chat waits "
                    f"({cap:g} s, DASHMEM_CHAT_MAX_WAIT_S); try again after that",
                    attempts,
                )
            if deadline is not None and time.monotonic() + seconds >= deadline:
                raise ModelError(
                    error.kind, f"{head} — stopped there: waiting {_duration(seconds)} for another try would pass the session's time limit", attempts
                )
            _pause(seconds, reason, on_wait)

    def _retry_wait(self, exc: Exception, attempts: int) -> tuple[str, float] | None:
        """(why, seconds to wait) when another try may get past `exc`, a failure before the reply started; else None."""
        a = self._anthropic
        backoff = min(0.5 * 2 ** (attempts - 1), 8.0)
        if isinstance(exc, a.APITimeoutError):
            return "timed out", backoff
        if isinstance(exc, a.APIConnectionError):
            return "no connection", backoff
        if not isinstance(exc, a.APIStatusError):
            return None
        headers, status = exc.response.headers, exc.status_code
        told = headers.get("x-should-retry")
        if told == "false" or (told != "true" and status not in (408, 409, 429) and status < 500):
            return None
        reason = "rate limited" if status == 429 else "overloaded" if status == 529 or _error_type(exc) == "overloaded_error" else "server error"
        asked = _retry_after(headers)
        return reason, asked if asked is not None and asked > 0 else backoff

    def _explain(self, exc: Any, attempts: int = 1, mid_reply: bool = False, limits: list[float] | None = None) -> ModelError:
        a, h = self._anthropic, self._httpx
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        limits = limits or [self.timeout]
        if isinstance(exc, (a.APITimeoutError, h.TimeoutException)):
            if mid_reply:
                return ModelError(
                    "timeout", f"the Anthropic API stopped sending in the middle of its reply (nothing for {limits[-1]:g} s) — try again", attempts
                )
            if len(set(limits)) == 1:
                waited = f"{attempts} attempts of {limits[0]:g} s" if attempts > 1 else f"{limits[0]:g} s"
            else:  # attempts held to end within the session's time limit
                waited = f"{attempts} attempts ({', '.join(f'{t:.0f} s' for t in limits)}: each held to end within the session's time limit)"
            return ModelError("timeout", f"timed out after {waited} waiting for the Anthropic API — try again, or ask for a smaller change", attempts)
        if isinstance(exc, (a.APIConnectionError, h.TransportError)):
            if mid_reply:
                return ModelError("connection", "the connection to the Anthropic API broke in the middle of its reply — try again", attempts)
            return ModelError(
                "connection",
                f"cannot reach the Anthropic API{tries} — check the network connection (and any proxy or ANTHROPIC_BASE_URL setting)",
                attempts,
            )
        if isinstance(exc, a.APIStatusError):
            status, kind = exc.status_code, _error_type(exc)
            # An `error` event in a stream that began well comes with the stream's 200: the event's type says what happened.
            code = "in the middle of its reply" if mid_reply or status < 400 else str(status)
            if status in (401, 403) or kind in ("authentication_error", "permission_error"):
                return ModelError("auth", f"authentication failed ({code}) — check ANTHROPIC_API_KEY", attempts)
            if status == 429 or kind == "rate_limit_error":
                wait = exc.response.headers.get("retry-after")
                hint = f" (the API asks to wait {wait} s)" if wait and not mid_reply else ""
                return ModelError("rate_limit", f"rate limited ({code}){tries} — try again in a moment{hint}", attempts)
            if status == 529 or kind == "overloaded_error":
                return ModelError("server", f"the Anthropic API is overloaded ({code}){tries} — a problem on the API's side; try again shortly", attempts)
            if status >= 500 or kind == "api_error":
                return ModelError(
                    "server", f"the Anthropic API had an internal error ({code}){tries} — a problem on the API's side; try again shortly", attempts
                )
            detail = getattr(exc, "api_message", None) or ""
            return ModelError("request", f"the Anthropic API refused the request ({code}){': ' + detail if detail else ''}", attempts)
        if isinstance(exc, a.AnthropicError):
            return ModelError("request", f"the Anthropic SDK failed: {type(exc).__name__}", attempts)
        log.error("the model call failed unexpectedly: %s: %s", type(exc).__name__, exc, exc_info=exc)
        return ModelError("request", f"the model call failed unexpectedly ({type(exc).__name__}); the details are in the server's log", attempts)


def _error_type(exc: Any) -> str | None:
    """The API's error type (overloaded_error, rate_limit_error, ...), from the error body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            return inner["type"]
    return getattr(exc, "type", None)


def _retry_after(headers: Any) -> float | None:
    """Seconds the API asks to wait: `retry-after-ms`, else `retry-after` in seconds or as an HTTP date."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) / scale
        except (TypeError, ValueError):
            pass
    when = email.utils.parsedate_tz(headers.get("retry-after") or "")
    return None if when is None else float(email.utils.mktime_tz(when) - time.time())


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def _pause(seconds: float, reason: str, on_wait: WaitCallback | None) -> None:
    """Sleep `seconds`, telling `on_wait` the whole seconds left, once a second."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if on_wait is not None:
            on_wait(reason, math.ceil(left))
        time.sleep(min(1.0, left))


# --------------------------------------------------------------------------- scripted


class ScriptedModel:
    """Returns the given responses in order (a `ModelError` in the list is raised instead) and records requests.

    Requests are deep-copied when recorded, so each shows the conversation as
    it was sent. With `on_text`, each text block is streamed word by word.
    """

    def __init__(self, responses: Iterable[dict[str, Any] | ModelError]):
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []

    def create(
        self, request: dict[str, Any], on_text: TextCallback | None = None, on_wait: WaitCallback | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        self.requests.append(copy.deepcopy(request))
        if not self.responses:
            raise ModelError("script", "the scripted model has no response left")
        response = self.responses.pop(0)
        if isinstance(response, ModelError):
            raise response
        if on_text is not None:
            for block in response.get("content", []):
                if block.get("type") == "text":
                    for piece in block["text"].split(" "):
                        on_text(piece + " ")
        return copy.deepcopy(response)


def message(*content: dict[str, Any], stop_reason: str | None = None, usage: dict[str, int] | None = None, model: str | None = None) -> dict[str, Any]:
    """A Messages API response dict: `tool_use` stop reason when any block uses a tool, else `end_turn`."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model or model_id(),
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": dict(usage or {"input_tokens": 0, "output_tokens": 0}),
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(block_id: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": tool_input}
