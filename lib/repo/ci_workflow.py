"""The CI gate a new config repo gets: `.github/workflows/validate.yml`, and the printer of its log.

It runs the one definition of "valid" (`checks.validate_workspace`, through
`dashmem validate . --json`) on every pull request and every push to `main`:
schemas, then every dashboard check on the data the workspace's sources give,
when that data is in the repo or reachable without secrets. When data cannot
be loaded the result says "data checks not run: <reason>" as a warning; a repo
that sets the variable DASHMEM_VALIDATE_STRICT to `true` makes it an error
(`validate --strict`), so a pull request whose data cannot load fails. The
variable reaches `validate` through the step's environment rather than as a
flag in the command, so the command line stays the same whether it is set or not,
and a value that is neither true nor false fails the step naming the variable.

The report is printed on a green run too (`python -m dashmem.repo.ci_workflow`,
this module): a warning such as "data checks not run" on a passing pull request
was seen by no one, since only a failing step printed anything. Each problem is
also a GitHub annotation, shown on the run's summary page.

The job's token may only read (`permissions:`): the gate reads the checkout and
writes nothing back. The app is cloned and installed outside the config repo's
checkout (`$RUNNER_TEMP`), so validation never walks into the app's own template
workspaces; `find_workspaces` also skips hidden folders and nested checkouts.
Without the variable DASHMEM_APP_REPO the install step fails saying what to set,
where it ran `git clone ""` before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.diagnostics import Diagnostic

PATH = ".github/workflows/validate.yml"

WORKFLOW = """\
# Validate every workspace on each pull request to this config repo, and on main.
# "Valid" means: every file matches its JSON Schema, and the dashboard passes every
# check on the data its sources give (data in this repo or reachable without secrets).
# Set the repository variable DASHMEM_APP_REPO to where the dashmem app can be cloned from, and
# DASHMEM_VALIDATE_STRICT to true to fail a pull request whose data checks cannot run (validate --strict).
name: validate-workspaces
on:
  pull_request:
  push:
    branches: [main]
# The gate only reads this repository; its token can change nothing.
permissions:
  contents: read
jobs:
  validate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the dashmem validator (outside this checkout)
        run: |
          if [ -z "$DASHMEM_APP_REPO" ]; then
            echo "::error title=DASHMEM_APP_REPO is not set::Set the repository variable DASHMEM_APP_REPO (Settings > Secrets and variables > Actions > Variables) to the git URL the dashmem app can be cloned from."
            exit 1
          fi
          git clone --depth 1 "$DASHMEM_APP_REPO" "$RUNNER_TEMP/dashmem"
          pip install "$RUNNER_TEMP/dashmem"
        env:
          DASHMEM_APP_REPO: ${{ vars.DASHMEM_APP_REPO }}
      - name: Validate
        # The report is printed whether the gate passes or not, so a green run still shows its warnings.
        run: |
          status=0
          dashmem validate . --json > "$RUNNER_TEMP/validation.json" || status=$?
          python -m dashmem.repo.ci_workflow "$RUNNER_TEMP/validation.json"
          exit $status
        env:
          DASHMEM_VALIDATE_STRICT: ${{ vars.DASHMEM_VALIDATE_STRICT }}
"""

# GitHub's workflow commands for a diagnostic's level: an annotation on the run's summary page, and a line of its log.
COMMANDS = {"error": "error", "warning": "warning"}
NO_REPORT = "No validation report"


def log_lines(report_text: str) -> list[str]:
    """The lines the Validate step prints for `dashmem validate --json`'s report: each workspace, each of its
    problems as a GitHub annotation (`::warning::...`), and a count; or why there is no report."""
    try:
        report = json.loads(report_text)
        workspaces = report["workspaces"]
    except (ValueError, KeyError, TypeError):
        shown = " ".join(report_text.split())[:2000] or "(nothing)"
        return [f"::error title={NO_REPORT}::dashmem validate wrote no JSON report; it wrote: {_escaped(shown)}"]
    lines, counts = [], {"error": 0, "warning": 0}
    for entry in workspaces:
        lines.append(f"{'ok  ' if entry.get('ok') else 'FAIL'} {entry.get('path', '?')}")
        for raw in entry.get("diagnostics") or []:
            diagnostic = Diagnostic(
                str(raw.get("id", "?")),
                str(raw.get("level", "?")),
                str(raw.get("message", "")),
                raw.get("file"),
                raw.get("line"),
                raw.get("field"),
                raw.get("allowed"),
            )
            counts[diagnostic.level] = counts.get(diagnostic.level, 0) + 1
            command = COMMANDS.get(diagnostic.level, "notice")
            lines.append(f"::{command} title={_escaped(diagnostic.id, as_property=True)}::{_escaped(diagnostic.format())}")
    lines.append(f"{len(workspaces)} workspace(s), {counts['error']} error(s), {counts['warning']} warning(s)")
    return lines


def _escaped(text: str, *, as_property: bool = False) -> str:
    """A workflow command's message (or a property's value, which also escapes `:` and `,`) as GitHub reads it."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if as_property else text


def main(argv: list[str]) -> int:
    """Print the report at argv[0]; 1 when there is none to print (validate failed before writing it)."""
    try:
        lines = log_lines(Path(argv[0]).read_text(encoding="utf-8"))
    except (IndexError, OSError) as exc:
        lines = [f"::error title={NO_REPORT}::no report at {argv[0] if argv else '(no path given)'}: {getattr(exc, 'strerror', None) or exc}"]
    print("\n".join(lines))
    return 1 if lines[0].startswith(f"::error title={NO_REPORT}::") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
