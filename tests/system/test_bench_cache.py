"""bench.cache's model of the prompt cache does what its figures claim, and a scripted session reads most of its input from it."""

from __future__ import annotations

from bench.cache import automatic_only, blocks_of, manual_scheme, prepared_workspace, scripted_session, shares, simulate
from lib.chat import compose
from lib.core import tokens

EPHEMERAL = {"type": "ephemeral"}


def request(*texts: str, marks=(), automatic=True) -> dict:
    """A request of one system block per text, breakpoints on the `marks` blocks (and the automatic one)."""
    system = [{"type": "text", "text": text, **({"cache_control": EPHEMERAL} if i in marks else {})} for i, text in enumerate(texts)]
    out = {"tools": [], "system": system, "messages": []}
    return {**out, "cache_control": EPHEMERAL} if automatic else out


def words(n: int, seed: str) -> str:
    """Text of about n typical tokens."""
    text = " ".join(f"{seed}{i}" for i in range(n))
    while tokens.estimate(text) / tokens.SAFETY > n:
        text = text[: int(len(text) * 0.95)]
    return text


def test_a_prefix_under_the_minimum_is_never_written_and_a_later_request_reads_what_an_earlier_wrote():
    a, b, c = words(600, "a"), words(600, "b"), words(600, "c")
    short = simulate([request(a), request(a)], "claude-sonnet-5-5")  # ~600 tokens: under 1,024
    assert [(s.read, s.write) for s in short] == [(0, 0), (0, 0)]
    grown = simulate([request(a, b), request(a, b, c)], "claude-sonnet-5-5")  # the automatic breakpoint moves forward
    assert grown[0].read == 0 and grown[0].write == grown[0].input
    assert grown[1].read == grown[0].input and grown[1].write == grown[1].input - grown[0].input
    assert simulate([request(a, b), request(a, b, c)], "claude-haiku-4-5")[1].read == 0  # under 4,096 nothing is cached


def test_the_automatic_breakpoint_is_the_last_block_and_explicit_ones_stay_where_they_are():
    marked = [m for _, m in blocks_of(request("x", "y", "z", marks=(0,)))]
    assert marked == [True, False, True]
    assert [m for _, m in blocks_of(request("x", "y", marks=(0,), automatic=False))] == [True, False]


def test_a_scripted_session_reads_most_of_its_input_from_the_cache_and_the_next_session_reads_its_memory(tmp_path, dataset, monkeypatch):
    csv = dataset("global_superstore_sample1000.csv")
    monkeypatch.setenv("DASHMEM_DATA_DIRS", str(csv.parent))
    files, wh = prepared_workspace(tmp_path, csv)
    requests = scripted_session(files, wh, "claude-sonnet-5-5")
    assert len(requests) == 5 and all(r["cache_control"] == EPHEMERAL for r in requests)
    assert [b["name"] for r in requests[1:] for b in r["messages"][-2]["content"] if b["type"] == "tool_use"] == [
        "run_sql",
        "edit_dashboard",
        "run_sql",
        "edit_dashboard",
    ]
    steps = simulate(requests, "claude-sonnet-5-5")
    share, cost = shares(steps)
    assert all(s.read / s.input > 0.85 for s in steps[1:]) and share > 0.7 and cost < 0.5
    # The next session (another question) reads everything up to its question from the first session's breakpoints;
    # with the automatic breakpoint alone it would read nothing.
    following = requests + [compose.compose(files, "edit", "Which category grew fastest?", model="claude-sonnet-5-5").request]
    assert simulate(following, "claude-sonnet-5-5")[-1].read / simulate(following, "claude-sonnet-5-5")[-1].input > 0.95
    assert simulate(automatic_only(following), "claude-sonnet-5-5")[-1].read == 0
    assert len(manual_scheme(requests)) == 5
