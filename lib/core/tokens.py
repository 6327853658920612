"""Token counts: an offline estimate everywhere, Anthropic's count_tokens API when a key is set.

The estimate must never count fewer tokens than Claude does, because every
budget (`profile.text(budget=N)`, compose's profile budget) is enforced with
it: an estimate that runs low lets a "1,000-token" profile cost 1,050. A flat
characters-per-token rate cannot be both safe and useful here: the profile's
digit-dense lines run at 2.6 characters per token, English prose at over 4.

So the estimate follows how a BPE tokenizer splits text. It first cuts the
text into the pieces Claude's tokenizer cuts it into (runs of letters, of
digits, of other symbols; whitespace other than one space), and charges each
piece a start cost plus a cost per character, per kind of piece; characters
beyond ASCII cost extra by their UTF-8 length (accented letters split words,
CJK is about a token a character, emoji two or more). Those weights are the
typical cost; the total is multiplied by SAFETY and rounded up.

Calibration (`python -m bench.tokens --record`, recorded in
tests/data/token_calibration.json, checked by tests/core/test_tokens.py): against
the real Claude tokenizer that Anthropic published offline (the legacy one
of the `@anthropic-ai/tokenizer` package), on profile texts of every public
dataset at budgets from 100 to 4,000 tokens and unbudgeted, the profile.yaml
files, the demo workspaces' YAML files and composed prompts, and rule texts in
German, French, Japanese, Russian and with emoji, estimate / real is at least
1.10 (worst: a French rule; the digit-dense profiles about 1.19) and about
1.26 at the median. The legacy tokenizer is not the exact tokenizer of
Claude 3 and later models, which Anthropic only exposes through count_tokens;
the 10% that the worst case keeps in hand is the margin for that difference.
"""

from __future__ import annotations

import math
import re

# Pieces as Claude's tokenizer pre-splits text (its pattern uses \p{L} and \p{N},
# which the standard library's re spells as [^\W\d_] and \d).
_WORDS = re.compile(r"[^\W\d_]+")
_NUMBERS = re.compile(r"\d+")
_SYMBOLS = re.compile(r"(?:[^\w\s]|_)+")
_SPACES = re.compile(r"\s+")
# Characters by UTF-8 length: 2 bytes (accented Latin, Greek, Cyrillic...), 3 (CJK, most symbols), 4 (emoji).
_TWO_BYTE = re.compile(r"[\u0080-\u07ff]")
_THREE_BYTE = re.compile(r"[\u0800-\uffff]")
_FOUR_BYTE = re.compile(r"[\U00010000-\U0010ffff]")

# Typical tokens per piece and per character, fitted on the calibration samples (estimate/real about 1.0 at the median).
WORD, WORD_CHAR = 1.0, 0.03  # a word is mostly one token; long and rare words split
NUMBER, DIGIT = 0.75, 0.25  # numbers split into groups of up to three digits or so
SYMBOL, SYMBOL_CHAR = 0.8, 0.2
SPACE_RUN = 0.8  # a newline or indentation; one space before a word is part of the word's token
TWO_BYTE_CHAR, THREE_BYTE_CHAR, FOUR_BYTE_CHAR = 0.4, 0.8, 2.0
# The margin on top of the typical cost; with it the estimate is >= 1.10 x the real count on every calibration sample.
SAFETY = 1.25

ESTIMATE_METHOD = "offline estimate (calibrated to never count fewer tokens than Claude's tokenizer)"


def estimate(text: str) -> int:
    """Tokens of `text`, erring high: at least 1.10 x the real count on every calibration sample."""
    if not text:
        return 0
    return _from_counts(_counts(text) + (sum(1 for run in _SPACES.findall(text) if run != " "),))


def estimate_lines(lines: list[str], seen: dict[str, tuple[int, ...]] | None = None) -> int:
    """`estimate("\n".join(lines) + "\n")`, exactly, from each line's counts, which `seen` keeps between calls.

    For text rebuilt many times from mostly the same lines (a profile fitted to a budget): only new lines are scanned.
    Words, numbers, symbols and other characters never span a line break; a run of white space that touches a
    line break is one run with it, whatever surrounds it.
    """
    if not lines:
        return estimate("\n")
    seen = {} if seen is None else seen
    total = [0] * COUNTS
    runs = 0
    for index, line in enumerate(lines):
        counts = seen.get(line)
        if counts is None:
            counts = seen[line] = _line_counts(line)
        for k in range(COUNTS):
            total[k] += counts[k]
        inner, leading, blank = counts[COUNTS:]
        runs += inner + (leading if index == 0 else 0) + (0 if blank and index else 1)  # the last: its line break's run
    return _from_counts(tuple(total) + (runs,))


COUNTS = 9  # the integers `_counts` gives


def _counts(text: str) -> tuple[int, ...]:
    """Words, their letters, numbers, their digits, symbol runs, their characters, multi-byte characters (3 widths)."""
    words = _WORDS.findall(text)
    numbers = _NUMBERS.findall(text)
    symbols = _SYMBOLS.findall(text)
    wide = (0, 0, 0) if text.isascii() else (len(_TWO_BYTE.findall(text)), len(_THREE_BYTE.findall(text)), len(_FOUR_BYTE.findall(text)))
    return (len(words), sum(map(len, words)), len(numbers), sum(map(len, numbers)), len(symbols), sum(map(len, symbols)), *wide)


def _line_counts(line: str) -> tuple[int, ...]:
    """A line's `_counts`, then: its runs of white space that count and touch neither end, 1 if its leading run
    counts (it does only on the first line, where no line break comes before), and 1 if it is blank."""
    inner = leading = 0
    for run in _SPACES.finditer(line):
        at_start, at_end = run.start() == 0, run.end() == len(line)
        if run.group() == " " or at_end:
            continue
        if at_start:
            leading = 1
        else:
            inner += 1
    blank = not line or _SPACES.fullmatch(line) is not None
    return _counts(line) + (inner, 0 if blank else leading, int(blank))


def _from_counts(counts: tuple[int, ...]) -> int:
    """The estimate from `_counts` and the number of white-space runs that count, as one formula for both callers."""
    words, letters, numbers, digits, symbols, symbol_chars, two, three, four, space_runs = counts
    cost = WORD * words + WORD_CHAR * letters + NUMBER * numbers + DIGIT * digits + SYMBOL * symbols + SYMBOL_CHAR * symbol_chars + SPACE_RUN * space_runs
    if two or three or four:
        cost += TWO_BYTE_CHAR * two + THREE_BYTE_CHAR * three + FOUR_BYTE_CHAR * four
    return math.ceil(SAFETY * cost)
