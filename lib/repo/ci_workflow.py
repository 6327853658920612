"""The CI gate a new config repo gets: `.github/workflows/validate.yml`.

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

The app is cloned and installed outside the config repo's checkout
(`$RUNNER_TEMP`), so validation never walks into the app's own template
workspaces; `find_workspaces` also skips hidden folders and nested checkouts.
"""

from __future__ import annotations

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
          git clone --depth 1 "$DASHMEM_APP_REPO" "$RUNNER_TEMP/dashmem"
          pip install "$RUNNER_TEMP/dashmem"
        env:
          DASHMEM_APP_REPO: ${{ vars.DASHMEM_APP_REPO }}
      - name: Validate
        run: dashmem validate . --json > "$RUNNER_TEMP/validation.json" || (cat "$RUNNER_TEMP/validation.json"; exit 1)
        env:
          DASHMEM_VALIDATE_STRICT: ${{ vars.DASHMEM_VALIDATE_STRICT }}
"""
