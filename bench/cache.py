"""Prompt caching in chat sessions, per public dataset: what a new session repeats of the last, and what a
session's steps read from the cache.

    python -m bench.cache [--mode edit|query] [--budget TOKENS] [--models M ...]

For each file: a workspace with one CSV source, its profile and an auto-drafted
dashboard.

Part 1, between sessions: two sessions start with different questions; for the
first request of each we print its size and how much of the second request's
bytes repeat the first's from the start (the identical prefix), serialised in
the order the API builds its cache prefix: tools, system, messages. The target
is >= 80 %. "cached" is the part the API can actually reuse: everything up to
the last explicit cache breakpoint before the question, since a new session's
question ends the prefix its automatic breakpoint marks.

Part 2, within a session: a scripted 5-step edit session (run_sql, an
edit_dashboard text replacement, run_sql, an edit_dashboard component
replacement, the summary) runs through the real loop (lib.chat.agent with
lib.chat.model.ScriptedModel), and its five requests go through a model of the
API's prompt cache (`simulate`): a breakpoint (explicit, or the automatic one on
the last block) writes its prefix when that prefix is at least the model's
minimum cacheable length, and a request reads the longest prefix written
earlier that ends at one of its breakpoints or up to 20 blocks before one.
Tokens are the offline estimate without its safety margin (lib.core.tokens).
"cached share" is cache-read tokens over all input tokens; "input cost" is
what the input costs at the API's rates (a cache write 1.25x, a read 0.1x)
over what it would cost uncached; "next" is the cached share of the first
request of the next session in the workspace (another question). Three schemes: as composed (the automatic
breakpoint plus explicit ones only where the prefix is over the minimum), the
manual scheme it replaced (four fixed breakpoints, the last moved by hand onto
the newest tool results), and the automatic breakpoint alone.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lib.artifacts import autodraft
from lib.chat import compose
from lib.chat.agent import run_session
from lib.chat.model import ScriptedModel, message, text_block, tool_use_block
from lib.core import tokens
from lib.data import profile
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR, User

from .common import print_table, public_datasets
from .refresh import make_workspace

QUESTIONS = ("Build a dashboard of the main measures over time and by category.", "Which category grew fastest last year, and where is it weakest?")
TARGET = 0.80
MODELS = ("claude-sonnet-5-5", "claude-haiku-4-5")
LOOKBACK_BLOCKS = 20  # how far back from a breakpoint the API looks for a cached prefix
WRITE_RATE, READ_RATE = 1.25, 0.10  # a 5-minute cache write and a cache read, as multiples of the input price


def in_cache_order(request: dict) -> str:
    return json.dumps({"tools": request["tools"], "system": request["system"], "messages": request["messages"]}, ensure_ascii=False)


def cached_bytes(request: dict) -> int:
    """Bytes up to and including the last explicit cache breakpoint (0 when there is none)."""
    text = in_cache_order(request)
    marked = [b for b in request["system"] + request["messages"][0]["content"] if "cache_control" in b]
    if not marked:
        return 0
    block = json.dumps(marked[-1], ensure_ascii=False)
    return len(text[: text.index(block) + len(block)].encode())


def prepared_workspace(root: Path, csv: Path) -> tuple[dict, Warehouse]:
    """The workspace's files (profile and auto-drafted dashboard saved) and its loaded warehouse."""
    folder = make_workspace(root, csv)
    wh = Warehouse(root / "cache" / folder.name)
    report = refresh(folder, wh, user=OPERATOR)
    assert report.ok, report.summary()
    files = workspace.load(folder)[0].data
    files["profile"] = profile.build(wh.tables(), files["sources"]["sources"])
    files["dashboard"] = autodraft.draft(files)
    workspace.save(folder, {"profile": files["profile"], "dashboard": files["dashboard"]})
    return workspace.load(folder)[0].data, wh


# --------------------------------------------------------------------------- part 2: a session's steps


def scripted_session(files: dict, wh: Warehouse, model: str) -> list[dict]:
    """The five requests of a scripted edit session on the workspace's dashboard, as the loop sent them."""
    table = files["sources"]["sources"][0]["name"]
    shown = compose.shown_yaml("dashboard", files["dashboard"])
    head = "".join(shown.splitlines(keepends=True)[:2])  # the title line and the next: unique in the file
    first = copy.deepcopy(files["dashboard"]["components"][0])
    first["title"] = f"{first.get('title', first['id'])} (this year)"
    script = ScriptedModel(
        [
            message(text_block("Counting rows first."), tool_use_block("t1", "run_sql", {"sql": f'SELECT count(*) AS n FROM "{table}"'})),
            message(tool_use_block("t2", "edit_dashboard", {"old_string": head, "new_string": head.replace("title: ", "title: Weekly ", 1)})),
            message(tool_use_block("t3", "run_sql", {"sql": f'SELECT * FROM "{table}" LIMIT 5'})),
            message(tool_use_block("t4", "edit_dashboard", {"component": json.dumps(first)})),
            message(text_block("Renamed the dashboard and its first component.")),
        ]
    )
    snapshot = wh.current()
    assert snapshot is not None
    outcome = run_session(files, wh.tables(), snapshot.id, "edit", QUESTIONS[0], script, user=User("bench", app_role="owner"), model=model)
    assert outcome.steps == 5 and outcome.error is None and outcome.dashboard_diff, (outcome.stopped_reason, outcome.error)
    return script.requests


def blocks_of(request: dict) -> list[tuple[str, bool]]:
    """Every block of a request in cache order (tools, system, messages), with whether a breakpoint ends there."""
    out = [(json.dumps(tool, ensure_ascii=False), "cache_control" in tool) for tool in request["tools"]]
    out += [(block["text"], "cache_control" in block) for block in request["system"]]
    for turn in request["messages"]:
        content = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        out += [(json.dumps({k: v for k, v in b.items() if k != "cache_control"}, ensure_ascii=False), "cache_control" in b) for b in content]
    if request.get("cache_control") and out:  # the automatic breakpoint: the last block
        out[-1] = (out[-1][0], True)
    return out


@dataclass
class Step:
    input: int  # all input tokens
    read: int
    write: int

    @property
    def fresh(self) -> int:
        return self.input - self.read - self.write


def simulate(requests: list[dict], model: str) -> list[Step]:
    """Input, cache-read and cache-write tokens of each request under the API's prompt cache (see the docstring)."""
    floor = compose.cache_minimum(model)
    written: set[str] = set()
    steps = []
    for request in requests:
        blocks = blocks_of(request)
        sizes, keys, total, digest = [], [], 0, hashlib.sha256()
        for text, _ in blocks:
            total += round(tokens.estimate(text) / tokens.SAFETY)
            digest.update(text.encode() + b"\0")
            sizes.append(total)
            keys.append(digest.copy().hexdigest())
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        read = 0
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if keys[i] in written:
                    read = max(read, sizes[i])
                    break
        cacheable = [mark for mark in marks if sizes[mark] >= floor]
        written.update(keys[mark] for mark in cacheable)
        write = max(0, sizes[cacheable[-1]] - read) if cacheable else 0
        steps.append(Step(total, read, write))
    return steps


def manual_scheme(requests: list[dict]) -> list[dict]:
    """The requests under the scheme this replaced: breakpoints after the base and the memory, on the profile, and
    on the last artifact block, that last one moved onto the newest tool results at each step; no automatic one."""
    out = []
    for request in requests:
        request = _without_breakpoints(request)
        request["system"][0]["cache_control"] = dict(compose.EPHEMERAL)
        request["system"][-1]["cache_control"] = dict(compose.EPHEMERAL)
        opening = request["messages"][0]["content"]
        opening[0]["cache_control"] = dict(compose.EPHEMERAL)
        if len(request["messages"]) > 1:
            request["messages"][-1]["content"][-1]["cache_control"] = dict(compose.EPHEMERAL)
        elif len(opening) > 2:
            opening[-2]["cache_control"] = dict(compose.EPHEMERAL)
        out.append(request)
    return out


def automatic_only(requests: list[dict]) -> list[dict]:
    return [{**_without_breakpoints(r), "cache_control": dict(compose.EPHEMERAL)} for r in requests]


def _without_breakpoints(request: dict) -> dict:
    request = copy.deepcopy(request)
    request.pop("cache_control", None)
    for block in request["system"] + [b for turn in request["messages"] if isinstance(turn["content"], list) for b in turn["content"]]:
        block.pop("cache_control", None)
    return request


SCHEMES: dict[str, Callable[[list[dict]], list[dict]]] = {"as composed": lambda r: r, "manual (before)": manual_scheme, "automatic only": automatic_only}


def shares(steps: list[Step]) -> tuple[float, float]:
    """(cached share of input tokens, input cost over the uncached cost)."""
    total = sum(s.input for s in steps)
    cost = sum(s.fresh + WRITE_RATE * s.write + READ_RATE * s.read for s in steps)
    return sum(s.read for s in steps) / total, cost / total


def session_tables(prepared: list[tuple[str, dict, Warehouse]], models: list[str]) -> None:
    rows, detail = [], None
    for name, files, wh in prepared:
        for model in models:
            # The session's five requests, then the first of the next session in the same workspace (another question).
            requests = scripted_session(files, wh, model) + [compose.compose(files, "edit", QUESTIONS[1], model=model).request]
            row: list[Any] = [name, model, f"{compose.cache_minimum(model):,}"]
            for label, scheme in SCHEMES.items():
                steps = simulate(scheme(requests), model)
                share, cost = shares(steps[:-1])
                row += [f"{share:.1%}", f"{cost:.0%}", f"{steps[-1].read / steps[-1].input:.1%}"]
                if detail is None and label == "as composed":
                    detail = (name, model, steps[:-1])
            rows.append(row)
    if detail:
        name, model, steps = detail
        print(f"\nA 5-step edit session on {name}, {model}, as composed:")
        print_table(
            ["step", "input tokens", "cache read", "cache write", "uncached", "cached share"],
            [[i, s.input, s.read, s.write, s.fresh, f"{s.read / s.input:.1%}"] for i, s in enumerate(steps, start=1)],
        )
    print(
        "\nThe same session per file and model, by caching scheme: the session's cached share of input tokens, its input cost "
        "against no caching, and the cached share of the next session's first request"
    )
    headers = ["file", "model", "minimum"]
    for label in SCHEMES:
        headers += [f"{label}: cached", "cost", "next"]
    print_table(headers, rows)


# --------------------------------------------------------------------------- command line


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=["edit", "query"], default="edit", help="part 1's mode")
    parser.add_argument("--budget", type=int, help="profile token budget (default: none)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="part 2's models (their minimum cacheable lengths differ)")
    args = parser.parse_args(argv)
    files_on_disk = public_datasets()
    os.environ["DASHMEM_DATA_DIRS"] = str(files_on_disk[0].parent)

    rows, prepared = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for csv in files_on_disk:
            files, wh = prepared_workspace(Path(tmp), csv)
            prepared.append((csv.name, files, wh))
            first, second = (compose.compose(files, args.mode, q, profile_budget=args.budget).request for q in QUESTIONS)
            a, b = in_cache_order(first).encode(), in_cache_order(second).encode()
            shared = len(os.path.commonprefix([a, b]))
            share = shared / len(b)
            rows.append([csv.name, len(a), len(b), shared, f"{share:.1%}", f"{cached_bytes(second) / len(b):.1%}", "yes" if share >= TARGET else "NO"])
        print_table(["file", "request 1 bytes", "request 2 bytes", "identical prefix", "prefix share", "cached", ">= 80 %"], rows)
        print(
            f"\n{args.mode} mode; prefix share = identical leading bytes of request 2 / its size (order: tools, system, "
            "messages);\ncached = bytes up to the last explicit cache breakpoint before the question / size of request 2."
        )
        session_tables(prepared, args.models)


if __name__ == "__main__":
    main()
