"""Reports, cross-filters and the CLI, shared by the report, export, crossfilter and explain tests."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lib.artifacts.render import QueryCache
from lib.artifacts.report import render_report
from lib.memory import schemas, workspace
from lib.memory.yamlio import parse

from . import ROOT, current_id

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not CHROMIUM.is_file(), reason="Debian's chromium is not installed (apt-get install chromium)")


def rendered_report(folder, wh, mutate=None, params=None):
    ws, _ = workspace.load(folder)
    if mutate:
        mutate(ws.data["report"])
    return render_report(ws.data, wh.tables(), current_id(wh), params or {}, cache=QueryCache())


def pages_text(pdf: bytes) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(pdf)).pages]


def _python_env(tmp_path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache-dir")}
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lib", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return proc


def errors_for(text: str):
    return schemas.validate_document("report", parse(text), "ws/report.yaml")


REGIONS = "SELECT count(DISTINCT region) AS regions FROM gates"


def _with_region_column(folder):
    """The demo's gates with a `region` column that only the report reads (profile.yaml does not list it)."""
    path = folder / "data" / "gates.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, [*rows[0], "region"])
        writer.writeheader()
        writer.writerows({**row, "region": "EU"} for row in rows)
    ws, _ = workspace.load(folder)
    report = ws.data["report"]
    report["queries"]["regions"] = REGIONS
    report["sections"].append({"type": "prose", "markdown": "Regions: {{regions.regions}}."})
    (folder / "report.yaml").write_text(workspace.render("report", report))


def by_id(dashboard, cid):
    return next(c for c in dashboard["components"] if c["id"] == cid)


def by_day(dash):
    """The demo with a Day filter that the daily line's points drive, and the KPIs follow."""
    dash["filters"].append({"id": "day", "type": "select", "label": "Day", "options_query": "SELECT DISTINCT day FROM gates ORDER BY 1"})
    by_id(dash, "kpi_attainment")["query"] += " AND ($day IS NULL OR day = $day)"
    by_id(dash, "daily")["select"] = {"field": "day", "filter": "day"}


def cli(*args, cache: Path) -> subprocess.CompletedProcess:
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "HOME": str(cache),
        "DASHMEM_CACHE_DIR": str(cache),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }
    return subprocess.run([sys.executable, "-m", "lib", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
