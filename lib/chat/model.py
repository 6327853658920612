"""The model client interface: the official Anthropic SDK, or a scripted stand-in.

`ModelClient.create(request, on_text=None)` sends one Messages API request
(as `lib.chat.compose` builds it) and returns the response as a plain dict:
{"content": [...blocks...], "stop_reason": ..., "usage": {...}, ...}. With
`on_text`, text is streamed to it as it arrives.

`AnthropicClient` wraps `anthropic.Anthropic` (and is the only place that
makes one: `lib.core.tokens` counts through it too); every failure becomes a
`ModelError` with a kind and a message a person can act on. `anthropic` is
imported only when a client is made, so the refresh path never loads it.

Session content is never logged: the SDK's own debug log of request options
(which would hold the prompt) is filtered out, and OpenTelemetry spans are
pinned to metadata only, whatever ANTHROPIC_OPEN_TELEMETRY_* says.

`ScriptedModel` returns given responses in order and records the requests;
tests and the evaluation harness use it where no API is reachable.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Iterable, Protocol

from ..core import tokens
from ..core.errors import DashmemError
from ..core.settings import model_id
from ..memory.secrets import first_set

TextCallback = Callable[[str], None]

NO_KEY = "no Anthropic API key: set ANTHROPIC_API_KEY, or add anthropic.api_key to .streamlit/secrets.toml (everything except the model call works without one)"


class ModelError(DashmemError):
    """A model call failed; `kind` is one of: no_key, auth, rate_limit, server, timeout, connection, request, script."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class ModelClient(Protocol):
    def create(self, request: dict[str, Any], on_text: TextCallback | None = None) -> dict[str, Any]: ...


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
    """Messages API calls through the official SDK, with errors mapped to `ModelError`."""

    def __init__(self, api_key: str | None = None, model: str | None = None, http_client: Any = None, max_retries: int = 2, timeout: float = 60):
        key = resolve_api_key(api_key)
        if key is None:
            raise ModelError("no_key", NO_KEY)
        import anthropic

        sdk_log = logging.getLogger("anthropic._base_client")
        if _BODY_FILTER not in sdk_log.filters:
            sdk_log.addFilter(_BODY_FILTER)
        self.model = model  # when set, overrides the request's model
        self.timeout = timeout
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(
            api_key=key,
            max_retries=max_retries,
            timeout=timeout,
            http_client=http_client,
            open_telemetry={"traces": {"content_mode": "metadata_only"}},
        )

    def create(self, request: dict[str, Any], on_text: TextCallback | None = None) -> dict[str, Any]:
        params = dict(request)
        if self.model:
            params["model"] = self.model
        try:
            if on_text is None:
                message = self._client.messages.create(**params)
            else:
                with self._client.messages.stream(**params) as stream:
                    for text in stream.text_stream:
                        on_text(text)
                    message = stream.get_final_message()
        except self._anthropic.AnthropicError as exc:
            raise self._explain(exc) from None
        return message.model_dump(mode="json", exclude_none=True)

    def count_tokens(self, text: str) -> int:
        """Input tokens of `text` as one user message, by the count_tokens API (no model call, nothing generated)."""
        try:
            result = self._client.messages.count_tokens(model=self.model or model_id(), messages=[{"role": "user", "content": text}])
        except self._anthropic.AnthropicError as exc:
            raise self._explain(exc) from None
        return result.input_tokens

    def _explain(self, exc: Exception) -> ModelError:
        a = self._anthropic
        if isinstance(exc, a.APITimeoutError):
            return ModelError("timeout", f"timed out after {self.timeout:g} s waiting for the Anthropic API — try again, or ask for a smaller change")
        if isinstance(exc, a.APIConnectionError):
            return ModelError("connection", "cannot reach the Anthropic API — check the network connection (and any proxy or ANTHROPIC_BASE_URL setting)")
        if isinstance(exc, a.APIStatusError):
            status, kind = exc.status_code, getattr(exc, "type", None)
            if status in (401, 403) or kind in ("authentication_error", "permission_error"):
                return ModelError("auth", f"authentication failed ({status}) — check ANTHROPIC_API_KEY")
            if status == 429 or kind == "rate_limit_error":
                wait = exc.response.headers.get("retry-after")
                hint = f" (the API asks to wait {wait} s)" if wait else ""
                return ModelError("rate_limit", f"rate limited (429) — try again in a moment{hint}")
            if status >= 500 or kind in ("api_error", "overloaded_error"):
                return ModelError("server", f"the Anthropic API returned {status} ({kind or 'server error'}) — a problem on the API's side; try again shortly")
            detail = getattr(exc, "api_message", None) or ""
            return ModelError("request", f"the Anthropic API refused the request ({status}){': ' + detail if detail else ''}")
        return ModelError("request", f"the Anthropic SDK failed: {type(exc).__name__}")


# --------------------------------------------------------------------------- scripted


class ScriptedModel:
    """Returns the given responses in order (a `ModelError` in the list is raised instead) and records requests.

    Requests are deep-copied when recorded, so each shows the conversation as
    it was sent. With `on_text`, each text block is streamed word by word.
    """

    def __init__(self, responses: Iterable[dict[str, Any] | ModelError]):
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []

    def create(self, request: dict[str, Any], on_text: TextCallback | None = None) -> dict[str, Any]:
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
