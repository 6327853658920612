"""The model client's fake Anthropic API: the real anthropic SDK over httpx2.MockTransport.

`FakeAPI` is a scripted Anthropic API: each request gets the next reply (a
Messages response dict, an httpx2.Response, or a function of the request, for
example one that raises a timeout) and is recorded as sent over the wire.
A streaming request (`"stream": true`) gets the reply as server-sent events.
"""

from __future__ import annotations

import json
from typing import cast

import httpx2

from lib.chat.model import AnthropicClient

MODEL = "claude-sonnet-5-5"  # a current model: the SDK warns on every call to a deprecated one


class FakeAPI:
    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if not self.replies:
            return httpx2.Response(500, json={"type": "error", "error": {"type": "api_error", "message": "script ran out"}})
        reply = self.replies.pop(0)
        if callable(reply):
            return cast(httpx2.Response, reply(request))
        if isinstance(reply, httpx2.Response):
            return reply
        if json.loads(request.content).get("stream"):
            return sse_response(reply)
        return httpx2.Response(200, json=reply)

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]

    def client(self, max_retries: int = 0, **options) -> AnthropicClient:
        return AnthropicClient(api_key="test", max_retries=max_retries, http_client=httpx2.Client(transport=httpx2.MockTransport(self)), **options)


def sse_response(reply: dict) -> httpx2.Response:
    """A Messages response as the event stream the API sends for `stream: true`."""
    usage = reply["usage"]
    start = {**reply, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(reply["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
            half = len(block["text"]) // 2
            for piece in (block["text"][:half], block["text"][half:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}}))
            raw = json.dumps(block["input"])
            for piece in (raw[:5], raw[5:]):
                events.append(
                    ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": piece}})
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())


def error_response(status: int, kind: str, headers: dict | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers or {}, json={"type": "error", "error": {"type": kind, "message": "no"}})


def raises(exc_type):
    def reply(request):
        raise exc_type("simulated", request=request)

    return reply


class _Broken(httpx2.SyncByteStream):
    """A response body that sends `head` and then fails as a dropped connection or a silent server does."""

    def __init__(self, head: bytes, exc_type):
        self.head, self.exc_type = head, exc_type

    def __iter__(self):
        yield self.head
        raise self.exc_type("peer closed connection without sending complete message body")


def broken_stream(reply: dict, exc_type=httpx2.RemoteProtocolError, before: str = "content_block_stop"):
    """A reply whose event stream breaks (`exc_type` while reading the body) just before the first `before` event:
    by default after the first block's text has arrived."""
    body = sse_response(reply).content
    head = body[: body.index(f"event: {before}".encode())]

    def reply_fn(request):
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Broken(head, exc_type))

    return reply_fn


def error_event(reply: dict, kind: str = "overloaded_error", before: str = "content_block_stop") -> httpx2.Response:
    """A stream that starts well (200) and then sends an `error` event instead of the rest, as the API does when it
    is overloaded mid-reply."""
    body = sse_response(reply).content
    head = body[: body.index(f"event: {before}".encode())]
    error = {"type": "error", "error": {"type": kind, "message": "Overloaded"}}
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=head + f"event: error\ndata: {json.dumps(error)}\n\n".encode())
