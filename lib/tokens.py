"""Token counts: an offline estimate everywhere, Anthropic's count_tokens API when a key is set.

The estimate is characters / 3.2, rounded up. Claude's tokenizer averages
about 3.5 characters per token on English prose and fewer on digit-dense
text such as profiles and CSV; dividing by 3.2 errs on the side of counting
too many, so a text estimated under a budget is under it in practice.
"""
from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.2
ESTIMATE_METHOD = f"offline estimate: ceil(characters / {CHARS_PER_TOKEN})"


def estimate(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count(text: str) -> tuple[int, str]:
    """(tokens, method). Uses the count_tokens API when an API key is set (environment or Streamlit secrets)."""
    from .model import AnthropicClient, resolve_api_key

    if not resolve_api_key():
        return estimate(text), ESTIMATE_METHOD
    return AnthropicClient().count_tokens(text), "Anthropic count_tokens API"
