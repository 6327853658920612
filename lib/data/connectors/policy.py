"""One retry and timeout policy for the connectors that reach over a network (`sql`, `rest`, `mcp`).

A source says it the same way whatever its type:

    timeout_s: 20          # each attempt (a REST request, an MCP session, a database connect)
    retry: {attempts: 3, backoff_s: 0.5, max_backoff_s: 8}

Only a failure worth another try is retried: the connector decides which and raises
`Transient` for it (a refused or reset connection, a timeout, HTTP 429/502/503/504, a
database connection lost); anything else (a 4xx, a SQL syntax error, a wrong password)
fails at once. The time a fetch may take is bounded by `worst_case_s`: every attempt
at most `timeout_s`, and at most `attempts - 1` waits of at most `max_backoff_s`.

Waits are jittered: between half and all of the doubled backoff, drawn afresh each
time, so that the sessions a dropped server failed together do not all come back
in the same instant. A server's own Retry-After is waited as asked.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

if TYPE_CHECKING:
    from .base import FetchContext  # the context only travels through: the policy itself needs nothing of it at import

T = TypeVar("T")

# The defaults, also written in schemas/sources.schema.json (`$defs/retry`); a test keeps them equal.
DEFAULT_ATTEMPTS = 3
DEFAULT_BACKOFF_S = 0.5
DEFAULT_MAX_BACKOFF_S = 8.0


class Transient(Exception):
    """A failure another attempt may not meet. Its message reads `{head} after N attempts{tail}`."""

    def __init__(self, head: str, tail: str = "", retry_after_s: float | None = None):
        super().__init__(head + tail)
        self.head = head
        self.tail = tail
        self.retry_after_s = retry_after_s  # what the server asked for (HTTP Retry-After), within max_backoff_s


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float
    attempts: int = DEFAULT_ATTEMPTS
    backoff_s: float = DEFAULT_BACKOFF_S
    max_backoff_s: float = DEFAULT_MAX_BACKOFF_S

    @classmethod
    def of(cls, source: dict, default_timeout_s: float) -> RetryPolicy:
        """The policy a source's settings (already schema-checked) ask for, defaults filled in."""
        retry = source.get("retry") or {}
        return cls(
            timeout_s=float(source.get("timeout_s", default_timeout_s)),
            attempts=int(retry.get("attempts", DEFAULT_ATTEMPTS)),
            backoff_s=float(retry.get("backoff_s", DEFAULT_BACKOFF_S)),
            max_backoff_s=float(retry.get("max_backoff_s", DEFAULT_MAX_BACKOFF_S)),
        )

    def longest_wait_after(self, attempt: int, asked_s: float | None = None) -> float:
        """The most to wait after failed attempt number `attempt` (1-based): backoff_s doubled each time,
        or what the server asked for if longer, never more than max_backoff_s."""
        wait = self.backoff_s * 2 ** (attempt - 1)
        if asked_s is not None and asked_s > wait:
            wait = asked_s
        return min(wait, self.max_backoff_s)

    def wait_after(self, attempt: int, asked_s: float | None = None, draw: Callable[[], float] = random.random) -> float:
        """Seconds to actually wait: the longest wait, less up to half of it at random (`draw()` in [0, 1));
        all of what a server asked for, within max_backoff_s."""
        longest = self.longest_wait_after(attempt, asked_s)
        if asked_s is not None and asked_s >= self.longest_wait_after(attempt):
            return longest
        return longest * (0.5 + 0.5 * draw())

    def worst_case_s(self) -> float:
        """The longest a fetch under this policy can take, per request it makes."""
        return self.attempts * self.timeout_s + sum(self.longest_wait_after(n) for n in range(1, self.attempts))

    def tries(self, n: int | None = None) -> str:
        n = self.attempts if n is None else n
        return f"{n} attempt{'s' if n != 1 else ''}"

    def run(
        self,
        attempt: Callable[[], T],
        name: str,
        ctx: FetchContext,
        sleep: Callable[[float], None] = time.sleep,
        draw: Callable[[], float] = random.random,
    ) -> T:
        """`attempt()` until it returns, raises something other than Transient, or has been tried `attempts` times;
        then a SourceError saying what went wrong the last time and how many times it was tried."""
        for n in range(1, self.attempts + 1):
            try:
                return attempt()
            except Transient as exc:
                if n == self.attempts:
                    raise ctx.error(name, f"{exc.head} after {self.tries(n)}{exc.tail}") from None
                sleep(self.wait_after(n, exc.retry_after_s, draw))
        raise ctx.error(name, "no attempt was made")  # attempts is at least 1 (schema); kept for the type checker
