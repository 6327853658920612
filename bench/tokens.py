"""Token estimates against a real Claude tokenizer, and data-profile sizes beside the paper's figures (its Table 3).

    python -m bench.tokens [--tokenizer PATH] [--record] [--no-paper]

1. Budgets: the profile of every public dataset under budgets of 100 to 4,000
   tokens, fitted with today's estimate (lib/core/tokens.py) and with the old one
   it replaced (characters / 3.2, the baseline), each counted by the real
   tokenizer: the goal is that real tokens are never above the budget.
2. Calibration: estimate / real on everything the model is sent (profile
   texts, composed prompts and their parts, the demo workspaces' YAML, rules in
   several languages); the smallest ratio is the estimate's margin.
3. The paper's comparison: raw CSV, its first 50 rows, and our profile.

The real tokenizer is the legacy Claude tokenizer Anthropic published for
offline use. It is not Claude 3/4's own (that one is reachable only through
the count_tokens API), which is why the estimate keeps a margin. This machine
has no internet, so it is read from a file: `npm pack @anthropic-ai/tokenizer`
and copy the package's `claude.json` to .data/tokenizer/claude.json (read with
the `tiktoken` package), or the `anthropic/tokenizer.json` of an old `anthropic`
release (< 0.39, read with `tokenizers`). Neither is a dependency of the app.
Without one, the bench says its figures are estimates and shows the
calibration error recorded in tests/data/token_calibration.json.

`--record` rewrites that file from the real tokenizer: the samples' texts and
their real counts, so tests/core/test_tokens.py checks the estimate offline.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import statistics
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterator

from .common import ROOT, print_table, public_datasets

TOKENIZER_FILE = ROOT / ".data" / "tokenizer" / "claude.json"
CALIBRATION_FILE = ROOT / "tests" / "data" / "token_calibration.json"
LEGACY_NOTE = "the legacy Claude tokenizer (Anthropic's offline one, @anthropic-ai/tokenizer claude.json, NFKC), which is not Claude 3/4's exact tokenizer"
BUDGETS = (100, 300, 500, 1000, 2000, 4000)
BASELINE = "chars/3.2"  # the estimate this one replaced
GOAL = "GOAL: real tokens never above the budget (a 1,000 budget had produced 1,050 real tokens)"

# Rules people type, in the languages and symbols a tokenizer charges most for.
RULE_SAMPLES = {
    "rule de": "Die Ampel ist grün, wenn die Quote über 95 % liegt. Rot unter 80 %.",
    "rule fr": "Les portes en retard sont affichées en rouge; les autres en vert.",
    "rule ja": "売上が目標を下回った場合は赤で表示する。週次で比較する。",
    "rule ru": "Москва и Санкт-Петербург: продажи по неделям",
    "rule emoji": "Status: 👍 on target, 🎉 record week, ⚠️ below target",
    "rule en": "Green at 95 percent attainment or more, amber below that, red below eighty. " * 20,
}

# Paper, Table 3: summary tokens by table width (columns -> tokens).
PAPER_SUMMARY = {4: 339, 15: 922, 24: 1584, 44: 4486}
PAPER_MEANS = {"raw": 789_100, "first 50 rows": 4_400, "summary": 1_800}


class TokenizerUnavailable(Exception):
    """No real tokenizer here; the message says why and how to get one."""


def load_real_tokenizer(path: Path | None = None) -> Callable[[str], int]:
    """A counter of real (legacy Claude tokenizer) tokens, from the npm package's claude.json or an old SDK's tokenizer.json."""
    path = Path(path or TOKENIZER_FILE)
    if not path.is_file():
        raise TokenizerUnavailable(f"no tokenizer file at {path} (npm pack @anthropic-ai/tokenizer; copy its claude.json there)")
    spec = json.loads(path.read_text(encoding="utf-8"))
    if "bpe_ranks" in spec:
        return _tiktoken_counter(spec)
    if "model" in spec:
        try:
            from tokenizers import Tokenizer  # pyright: ignore[reportMissingImports]  # optional, not in requirements: only an old SDK's file needs it
        except ImportError as exc:
            raise TokenizerUnavailable(f"{path} needs the `tokenizers` package, which is not installed") from exc
        tokenizer = Tokenizer.from_file(str(path))
        return lambda text: len(tokenizer.encode(text).ids)
    raise TokenizerUnavailable(f"{path} is neither the npm package's claude.json nor a tokenizers JSON")


def _tiktoken_counter(spec: dict[str, Any]) -> Callable[[str], int]:
    """The npm package's encoder, as its countTokens runs it: NFKC, then BPE, special tokens allowed."""
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailable("claude.json needs the `tiktoken` package, which is not installed") from exc
    import base64

    ranks: dict[bytes, int] = {}
    for line in spec["bpe_ranks"].split("\n"):  # tiktoken/lite's format: "<tag> <first rank> <base64 token> ..."
        if line:
            _, first, *pieces = line.split(" ")
            ranks.update((base64.b64decode(piece), int(first) + i) for i, piece in enumerate(pieces))
    encoding = tiktoken.Encoding("claude-legacy", pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens=spec["special_tokens"])
    return lambda text: len(encoding.encode(unicodedata.normalize("NFKC", text), allowed_special="all"))


def tokenizer_digest(path: Path | None = None) -> str:
    return hashlib.sha256(Path(path or TOKENIZER_FILE).read_bytes()).hexdigest()[:16]


@contextlib.contextmanager
def baseline_estimate() -> Iterator[None]:
    """lib.core.tokens.estimate as it was (characters / 3.2), for the same work done the old way."""
    from lib.core import tokens

    kept = tokens.estimate
    tokens.estimate = lambda text: math.ceil(len(text) / 3.2)
    try:
        yield
    finally:
        tokens.estimate = kept


def dataset_profiles() -> dict[str, dict]:
    """Each public dataset's profile, as the CSV connector and lib.data.profile make it."""
    files = public_datasets()
    os.environ["DASHMEM_DATA_DIRS"] = str(files[0].parent)
    from lib.data import profile
    from lib.data.connectors.base import FetchContext, fetch

    out = {}
    for csv in files:
        table = fetch({"name": csv.stem, "type": "csv", "path": str(csv)}, FetchContext(workspace_path=Path(".")))
        out[csv.name] = profile.build({csv.stem: table})
    return out


def calibration_samples(profiles: dict[str, dict]) -> list[tuple[str, str]]:
    """(name, text) for everything the model is sent, each distinct text once."""
    from lib.chat import compose
    from lib.data import profile

    samples: list[tuple[str, str]] = []
    for name, prof in profiles.items():
        samples += [(f"profile {name} @{budget}", profile.text(prof, budget=budget)) for budget in (None, *BUDGETS)]
    for ws in sorted((ROOT / "workspaces").iterdir()):
        if not (ws / "workspace.yaml").exists():
            continue
        samples += [(f"{ws.name}/{f.name}", f.read_text(encoding="utf-8")) for f in sorted(ws.glob("*.yaml"))]
        for mode in compose.MODES:
            composed = compose.compose_workspace(ws, "Add a chart of the weekly trend, one line per site", mode)
            samples.append((f"compose {ws.name} {mode}", compose.to_json(composed)))
            samples += [(f"compose {ws.name} {mode}: system {i}", block["text"]) for i, block in enumerate(composed.request["system"])]
            samples.append((f"compose {ws.name} {mode}: tools", json.dumps(composed.request["tools"], ensure_ascii=False)))
    samples += RULE_SAMPLES.items()
    distinct: dict[str, str] = {}
    for name, text in samples:
        if text:
            distinct.setdefault(text, name)  # budgets that give the same text count once, under the first name
    return [(name, text) for text, name in distinct.items()]


def record(counter: Callable[[str], int], samples: list[tuple[str, str]], digest: str) -> None:
    from lib.core.fsutil import atomic_write

    data = {
        "tokenizer": f"{LEGACY_NOTE}; file sha256 {digest}",
        "made_by": "python -m bench.tokens --record",
        "samples": [{"name": name, "real": counter(text), "text": text} for name, text in samples],
    }
    CALIBRATION_FILE.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(CALIBRATION_FILE, json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    print(f"recorded {len(samples)} samples to {CALIBRATION_FILE.relative_to(ROOT)}")


def recorded_samples() -> list[tuple[str, str, int]]:
    data = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    return [(s["name"], s["text"], s["real"]) for s in data["samples"]]


def budget_rows(profiles: dict[str, dict], counter: Callable[[str], int]) -> tuple[list[list], list[float], list[float]]:
    """Per dataset and budget: the profile fitted by the baseline and by today's estimate, both counted for real."""
    from lib.core import tokens
    from lib.data import profile

    rows, old_use, new_use = [], [], []
    for name, prof in profiles.items():
        for budget in BUDGETS:
            with baseline_estimate():
                old = counter(profile.text(prof, budget=budget))
            text = profile.text(prof, budget=budget)
            est, new = tokens.estimate(text), counter(text)
            old_use.append(old / budget)
            new_use.append(new / budget)
            rows.append(
                [
                    name,
                    budget,
                    old,
                    f"{old / budget:.0%}",
                    "OVER" if old > budget else "ok",
                    est,
                    new,
                    f"{new / budget:.0%}",
                    "OVER" if new > budget else "ok",
                    f"{est / new:.3f}",
                ]
            )
    return rows, old_use, new_use


def calibration_report(measured: list[tuple[str, str, int]]) -> None:
    from lib.core import tokens

    ratios = sorted(((tokens.estimate(text) / real, math.ceil(len(text) / 3.2) / real, name) for name, text, real in measured), key=lambda r: r[0])
    print_table(["sample (5 lowest estimate/real)", "estimate/real", f"{BASELINE}/real"], [[name, f"{new:.3f}", f"{old:.3f}"] for new, old, name in ratios[:5]])
    news, olds = [r[0] for r in ratios], [r[1] for r in ratios]
    print(
        f"\n{len(ratios)} samples. estimate/real: min {min(news):.3f}, median {statistics.median(news):.3f}, "
        f"max {max(news):.3f}; baseline {BASELINE}/real: min {min(olds):.3f}, median {statistics.median(olds):.3f} "
        f"({sum(o < 1 for o in olds)} of {len(olds)} under-counted). Undercounts now: {sum(n < 1 for n in news)}."
    )


def paper_report(counter: Callable[[str], int], profiles: dict[str, dict], budget: int) -> None:
    from lib.data import profile

    rows, totals = [], {"raw": [], "first 50 rows": [], "summary": []}
    for csv in public_datasets():
        text = csv.read_text(encoding="utf-8")
        head = "".join(text.splitlines(keepends=True)[:51])
        prof = profiles[csv.name]
        columns = len(prof["tables"][0]["columns"])
        raw_t, head_t = counter(text), counter(head)
        full_t, budget_t = counter(profile.text(prof)), counter(profile.text(prof, budget=budget))
        paper = paper_figure(columns)
        totals["raw"].append(raw_t)
        totals["first 50 rows"].append(head_t)
        totals["summary"].append(full_t)
        rows.append(
            [
                csv.name,
                columns,
                raw_t,
                head_t,
                full_t,
                budget_t,
                paper if paper else "-",
                f"{full_t / paper:.0%}" if paper else "-",
                f"{raw_t / full_t:,.0f}x",
                f"{head_t / full_t:.1f}x",
            ]
        )
    print_table(
        ["file", "cols", "raw CSV", "first 50 rows", "our profile", f"profile @{budget}", "paper profile", "ours/paper", "raw/profile", "head/profile"], rows
    )
    print()
    print_table(["strategy", "our mean", "paper mean"], [[k, round(sum(v) / len(v)), PAPER_MEANS[k]] for k, v in totals.items()])
    print("The paper's 44-column figure is set beside both NYC 311 files (41 and 47 columns).")


def paper_figure(columns: int) -> int | None:
    """The paper's summary size for this width; the NYC 311 files (41, 47 columns) stand for its 44."""
    if columns in PAPER_SUMMARY:
        return PAPER_SUMMARY[columns]
    return PAPER_SUMMARY[44] if 40 <= columns <= 48 else None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER_FILE, help="claude.json or tokenizer.json")
    parser.add_argument("--record", action="store_true", help=f"rewrite {CALIBRATION_FILE.relative_to(ROOT)}")
    parser.add_argument("--budget", type=int, default=1000, help="the budget column of the paper's table")
    parser.add_argument("--no-paper", action="store_true", help="skip the paper's table (it tokenizes the raw CSVs)")
    args = parser.parse_args(argv)

    from lib.chat import model

    counter, reason = None, ""
    try:
        counter = load_real_tokenizer(args.tokenizer)
    except TokenizerUnavailable as missing:
        reason = str(missing)
    if counter is None:
        if args.record:
            raise SystemExit(f"--record needs the real tokenizer: {reason}")
        print(f"ESTIMATES ONLY: no real tokenizer ({reason}).")
        print(f"Calibration error recorded in {CALIBRATION_FILE.relative_to(ROOT)} against {LEGACY_NOTE}:\n")
        calibration_report(recorded_samples())
        print(f"\n{GOAL}: not measurable here without the tokenizer; the recorded minimum above is the margin.\n")
        if not args.no_paper:
            paper_report(lambda text: model.count_tokens(text)[0], dataset_profiles(), args.budget)
            print(f"tokens: {model.count_tokens('x')[1]}.")
        return

    profiles = dataset_profiles()
    samples = calibration_samples(profiles)
    if args.record:
        record(counter, samples, tokenizer_digest(args.tokenizer))
    print(
        f"Real tokens: {LEGACY_NOTE}.\n\n1. Profiles under a budget, fitted by the old estimate ({BASELINE}) "
        "and by today's, each counted by the real tokenizer\n"
    )
    rows, old_use, new_use = budget_rows(profiles, counter)
    print_table(["dataset", "budget", f"real ({BASELINE})", "of budget", "", "estimate", "real (now)", "of budget", "", "estimate/real"], rows)
    over = sum(u > 1 for u in new_use)
    print(
        f"\n{GOAL}\n  now:      max real/budget {max(new_use):.3f}, {over} of {len(new_use)} over"
        f" -> {'MET' if not over else 'NOT MET'}; median budget use {statistics.median(new_use):.0%}"
        f"\n  baseline: max real/budget {max(old_use):.3f}, {sum(u > 1 for u in old_use)} of {len(old_use)} over;"
        f" median budget use {statistics.median(old_use):.0%}"
    )
    print("\n2. Calibration: estimate/real on what the model is sent\n")
    calibration_report([(name, text, counter(text)) for name, text in samples])
    if not args.no_paper:
        print("\n3. The paper's comparison, real tokens\n")
        paper_report(counter, profiles, args.budget)


if __name__ == "__main__":
    main()
