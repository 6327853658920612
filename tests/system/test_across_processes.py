"""The data path across processes, as users run it (issue #11).

The first build ran every scenario in one process with one table, so a
workspace with two or more sources died in every new process: the snapshot
file holds each table's Arrow IPC file back to back, each footer's offsets
count from the start of the whole file, and only the process that wrote a
snapshot (holding up to KEEP_IN_MEMORY_BYTES of it in memory) could read it.

Here every scenario writes in one process and reads in another, through the
real CLI (`python -m lib ...`) or a small `python -c` script where the CLI has
no command: workspaces of 1, 2 and 5 tables of mixed sizes (a generated CSV in
the workspace folder, the public datasets, and one generated table over
32 MB, so it is memory-mapped rather than kept in memory by its writer).
Expected numbers are computed here, independently, from the CSV files.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT, WORKSPACES

pytestmark = pytest.mark.slow

BIG_ROWS = 650_000  # 8 columns: ~40 MB as Arrow, above KEEP_IN_MEMORY_BYTES (32 MB)
ORDERS_ROWS = 2_000
ORDERS_ADDED = 123
TIMEOUT_S = 180  # a hung subprocess fails the test instead of hanging the run; not a timing assert

# Table sets, in source order. The table a test changes (`orders`) is last, so in
# the 5-table set it sits after the big one, far from the start of the file.
TABLE_SETS = {
    1: ["orders"],
    2: ["gdp", "orders"],
    5: ["gdp", "adult", "big", "superstore", "orders"],
}


# --------------------------------------------------------------------------- expected values, computed here


@dataclass
class Expected:
    """What a table must hold: row count, the exact sum of an integer column, the sum of a float column."""

    rows: int
    int_col: str
    int_sum: int
    float_col: str | None = None
    float_sum: float | None = None
    columns: tuple[str, ...] = ()


def _expect_csv(path: Path, int_col: str, float_col: str | None = None) -> Expected:
    """Row count and column sums read with the csv module, not with anything in lib."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = int_sum = 0
        float_sum = 0.0
        for row in reader:
            rows += 1
            int_sum += int(row[int_col])
            if float_col:
                float_sum += float(row[float_col])
        assert reader.fieldnames is not None  # the header row
        columns = tuple(reader.fieldnames)
    return Expected(rows, int_col, int_sum, float_col, float_sum if float_col else None, columns)


def _write_orders(path: Path, rows: int, seed: int = 7) -> Expected:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["order_id", "region", "qty", "price", "day"])
        for i in range(rows):
            out.writerow(
                [
                    i + 1,
                    rng.choice(["north", "south", "east", "west"]),
                    rng.randint(1, 40),
                    f"{rng.randint(100, 99_999) / 100:.2f}",
                    f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                ]
            )
    return _expect_csv(path, "qty", "price")


def _write_big(path: Path) -> Expected:
    """A >32 MB (as Arrow) CSV, mostly numbers so that dictionary encoding cannot shrink it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(11)
    n = BIG_ROWS
    k = rng.integers(0, 1000, n)
    x = np.round(rng.random(n) * 1000, 2)
    table = pa.table(
        {
            "id": np.arange(n),
            "k": k,
            "m": rng.integers(-50_000, 50_000, n),
            "u": rng.integers(0, 10**9, n),
            "v": rng.integers(0, 10**6, n),
            "x": x,
            "y": np.round(rng.random(n) * 100, 3),
            "cat": pa.array(np.array(["north", "south", "east", "west", "centre"])[rng.integers(0, 5, n)]),
        }
    )
    assert table.nbytes > (32 << 20)
    pacsv.write_csv(table, path)
    # The sums come from the generated arrays; the float sum from the CSV's own decimal text would be the same.
    return Expected(n, "k", int(k.sum()), "x", float(x.sum()), tuple(table.column_names))


@dataclass
class Data:
    folder: Path  # holds big.csv; listed in DASHMEM_DATA_DIRS
    public: Path  # the public datasets folder; listed in DASHMEM_DATA_DIRS too
    expected: dict[str, Expected]  # per source name, as first loaded
    paths: dict[str, str]  # per source name, the `--path` given to `source add`


@pytest.fixture(scope="module")
def data(tmp_path_factory, dataset) -> Data:
    gdp, adult, superstore = dataset("gdp.csv"), dataset("adult.csv"), dataset("global_superstore_sample1000.csv")
    folder = tmp_path_factory.mktemp("xproc-data")
    expected = {
        "big": _write_big(folder / "big.csv"),
        "gdp": _expect_csv(gdp, "Year", "Value"),
        "adult": _expect_csv(adult, "age"),
        "superstore": _expect_csv(superstore, "Quantity", "Sales"),
        "orders": _write_orders(folder / "orders-template.csv", ORDERS_ROWS),
    }
    assert expected["gdp"].rows == 13_979 and expected["adult"].rows == 32_561 and expected["superstore"].rows == 1_000
    paths = {
        "big": str(folder / "big.csv"),  # absolute, allowed by DASHMEM_DATA_DIRS
        "gdp": str(gdp),
        "adult": str(adult),
        "superstore": str(superstore),
        "orders": "data/orders.csv",  # inside the workspace folder, so a test can change it
    }
    return Data(folder, gdp.parent, expected, paths)


# --------------------------------------------------------------------------- processes


def _env(tmp: Path, data: Data) -> dict[str, str]:
    """A clean environment for each subprocess: its own cache folder, no API keys inherited."""
    return {
        "PYTHONPATH": str(ROOT),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
        "DASHMEM_CACHE_DIR": str(tmp / "cache"),
        "DASHMEM_DATA_DIRS": os.pathsep.join([str(data.public), str(data.folder)]),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C.UTF-8",
    }


def _no_traceback(proc: subprocess.CompletedProcess | None, stderr: str | None = None) -> None:
    if stderr is None:
        assert proc is not None
        stderr = proc.stderr
    assert stderr is not None, "no stderr captured"
    err = stderr
    assert "Traceback (most recent call last)" not in err, err
    assert "Fatal Python error" not in err, err


def cli(env: dict, *args, rc: int | None = 0) -> subprocess.CompletedProcess:
    """`python -m lib ARGS` in a new process, as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "lib", *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    _no_traceback(proc)
    if rc is not None:
        assert proc.returncode == rc, f"lib {' '.join(map(str, args))}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def py(env: dict, code: str, *args) -> dict:
    """A `python -c` script in a new process; it prints one JSON object as its last line."""
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _sql_counts(names: list[str], expected: dict[str, Expected]) -> str:
    parts = []
    for name in names:
        e = expected[name]
        fsum = f'CAST(sum("{e.float_col}") AS DOUBLE)' if e.float_col else "CAST(NULL AS DOUBLE)"
        parts.append(f"""SELECT '{name}' AS t, count(*) AS n, CAST(sum("{e.int_col}") AS BIGINT) AS s, {fsum} AS f FROM "{name}\"""")
    return " UNION ALL ".join(parts)


def query_counts(env: dict, ws: Path, names: list[str], expected: dict[str, Expected]) -> dict[str, tuple]:
    """Row count and column sums of every table, in one `lib query --json` process."""
    proc = cli(env, "query", ws, _sql_counts(names, expected), "--json")
    return {r["t"]: (r["n"], r["s"], r["f"]) for r in json.loads(proc.stdout)["rows"]}


def assert_counts(got: dict[str, tuple], names: list[str], expected: dict[str, Expected]) -> None:
    assert set(got) == set(names), got
    for name in names:
        e = expected[name]
        n, s, f = got[name]
        assert (n, s) == (e.rows, e.int_sum), f"{name}: got rows {n}, sum({e.int_col}) {s}; expected {e.rows}, {e.int_sum}"
        if e.float_col:
            assert f == pytest.approx(e.float_sum, rel=1e-9), f"{name}: sum({e.float_col})"


def snapshot_files(tmp: Path) -> list[Path]:
    """The served snapshot files in the test's cache, oldest first (ids sort by time)."""
    return sorted((tmp / "cache").glob("*/snapshots/*.snapshot"))


def read_manifest(path: Path) -> dict:
    """The manifest at the end of a snapshot file: JSON, then <u64 length><8-byte magic>."""
    blob = path.read_bytes()
    length, magic = struct.unpack("<Q8s", blob[-16:])
    assert magic == b"DMSNAP1\n"
    return json.loads(blob[-16 - length : -16])


# --------------------------------------------------------------------------- workspaces


@pytest.fixture(scope="module")
def templates(data, tmp_path_factory) -> dict[int, Path]:
    """One workspace per table set, made with `lib new` and `lib source add`; tests copy them."""
    root = tmp_path_factory.mktemp("xproc-templates")
    env = _env(root, data)

    def build(count: int) -> Path:
        ws = root / f"sales-{count}"
        cli(env, "new", ws, "--name", f"Sales {count}")
        (ws / "data").mkdir()
        shutil.copy(data.folder / "orders-template.csv", ws / "data" / "orders.csv")
        for name in TABLE_SETS[count]:
            cli(env, "source", "add", ws, name, "--type", "csv", "--path", data.paths[name])
        return ws

    with ThreadPoolExecutor(len(TABLE_SETS)) as pool:  # separate workspaces: nothing shared but the CPU
        return dict(zip(TABLE_SETS, pool.map(build, TABLE_SETS)))


@pytest.fixture
def make_ws(templates, tmp_path):
    def make(count: int) -> Path:
        target = tmp_path / "wss" / templates[count].name
        shutil.copytree(templates[count], target)
        return target

    return make


def change_orders(ws: Path, data: Data, rows: int = ORDERS_ROWS + ORDERS_ADDED, seed: int = 8) -> dict[str, Expected]:
    """Rewrite the workspace's orders.csv with other rows; returns the expectations after the change."""
    changed = _write_orders(ws / "data" / "orders.csv", rows, seed=seed)
    assert changed.rows != data.expected["orders"].rows
    return {**data.expected, "orders": changed}


def profile_tables(text: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """`lib profile` output -> table -> (rows, column names)."""
    tables: dict[str, tuple[int, list[str]]] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"^table (\S+) \(([\d,]+) rows\)", line)
        if head:
            current = head.group(1)
            tables[current] = (int(head.group(2).replace(",", "")), [])
            continue
        col = re.match(r"^  (\S.*?) (BIGINT|DOUBLE|VARCHAR|DATE|TIMESTAMP|BOOLEAN|INTEGER|TIME)\b", line)
        if col and current:
            tables[current][1].append(col.group(1))
    return {name: (rows, tuple(cols)) for name, (rows, cols) in tables.items()}


# --------------------------------------------------------------------------- refresh in A, everything else in B, C ...


@pytest.mark.parametrize("count", [1, 2, 5])
def test_refresh_then_query_profile_check_and_refresh_again_in_new_processes(count, data, make_ws, tmp_path):
    ws, names, env = make_ws(count), TABLE_SETS[count], _env(tmp_path, data)

    # Process A loads the data.
    report = json.loads(cli(env, "refresh", ws, "--json").stdout)
    assert report["ok"] and report["swapped"]
    assert {s["name"]: s["rows_after"] for s in report["sources"]} == {n: data.expected[n].rows for n in names}
    first = snapshot_files(tmp_path)
    assert len(first) == 1

    # Process B queries every table.
    assert_counts(query_counts(env, ws, names, data.expected), names, data.expected)

    # Process B' profiles every table (rows and columns as in the CSV files).
    profiled = profile_tables(cli(env, "profile", ws).stdout)
    assert profiled == {n: (data.expected[n].rows, data.expected[n].columns) for n in names}

    # A dashboard drafted from the served data (another process), checked in yet another.
    cli(env, "autodraft", ws)
    assert (ws / "dashboard.yaml").is_file()
    checked = json.loads(cli(env, "check", ws, "--json").stdout)
    assert checked["ok"] and checked["errors"] == 0, checked

    # One CSV changes; process B refreshes and sees the new rows, and so does process C.
    after = change_orders(ws, data)
    report = json.loads(cli(env, "refresh", ws, "--json").stdout)
    assert report["ok"] and report["swapped"], report
    by_name = {s["name"]: s for s in report["sources"]}
    assert (by_name["orders"]["rows_before"], by_name["orders"]["rows_after"]) == (ORDERS_ROWS, ORDERS_ROWS + ORDERS_ADDED)
    assert report["previous"] == first[0].name.removesuffix(".snapshot")
    assert_counts(query_counts(env, ws, names, after), names, after)
    assert_counts(query_counts(env, ws, names, after), names, after)  # a third process, C


@pytest.mark.parametrize("count", [1, 2, 5])
def test_refresh_of_unchanged_data_in_a_new_process_writes_no_snapshot(count, data, make_ws, tmp_path):
    """docs/sources.md: "Data identical to what is served makes no new snapshot" -- also when another process served it."""
    ws, env = make_ws(count), _env(tmp_path, data)
    cli(env, "refresh", ws)
    served = snapshot_files(tmp_path)
    report = json.loads(cli(env, "refresh", ws, "--json").stdout)
    assert report["ok"] and report["unchanged"] and not report["swapped"], (
        f"identical data made a new snapshot: {[(s['name'], s['rows_before'], s['rows_after']) for s in report['sources']]}"
    )
    assert snapshot_files(tmp_path) == served


PIN = r"""
import inspect, json, sys
from lib.memory import workspace
from lib.roles.access import OPERATOR
from lib.data.snapshots import Warehouse

wh = Warehouse.for_workspace(sys.argv[1])
# What the Dashboard page's "Serve this data" does, as an owner (the access arguments are recent: pass what it takes).
takes = inspect.signature(wh.switch_to).parameters
extra = {"user": OPERATOR, "meta": workspace.load(sys.argv[1])[0].get("workspace") or {}}
wh.switch_to(sys.argv[2], **{k: v for k, v in extra.items() if k in takes})
print(json.dumps({"current": wh.current().id}))
"""


def test_earlier_snapshot_served_from_one_process_is_served_to_others_until_the_next_refresh(data, make_ws, tmp_path):
    ws, names, env = make_ws(5), TABLE_SETS[5], _env(tmp_path, data)
    cli(env, "refresh", ws)
    first = snapshot_files(tmp_path)[-1].name.removesuffix(".snapshot")
    second = change_orders(ws, data)
    cli(env, "refresh", ws)
    assert_counts(query_counts(env, ws, names, second), names, second)

    assert py(env, PIN, ws, first)["current"] == first  # process P serves the earlier data
    assert_counts(query_counts(env, ws, names, data.expected), names, data.expected)  # B sees it

    third = change_orders(ws, data, ORDERS_ROWS + 2 * ORDERS_ADDED, seed=9)
    report = json.loads(cli(env, "refresh", ws, "--json").stdout)  # C: a refresh ends the pin
    assert report["swapped"] and report["previous"] == first
    assert_counts(query_counts(env, ws, names, third), names, third)  # D


# --------------------------------------------------------------------------- a writer that stays alive

WRITER = r"""
import contextlib, io, json, sys
from pathlib import Path
from lib import cli; from lib.data import snapshots as warehouse
from lib.data.snapshots import Warehouse

ws, sql = Path(sys.argv[1]), sys.argv[2]
with contextlib.redirect_stdout(io.StringIO()) as printed:  # the CLI's refresh, in this process
    status = cli.main(["refresh", str(ws), "--json"])
report = json.loads(printed.getvalue())
wh = Warehouse.for_workspace(ws)
written = wh.root / (report["snapshot"] + warehouse.SUFFIX)
print(json.dumps({"ok": status == 0 and report["ok"], "snapshot": report["snapshot"], "size": written.stat().st_size,
                  "kept_in_memory": written in warehouse._IN_MEMORY}), flush=True)
sys.stdin.readline()  # the test reads the snapshot from other processes meanwhile
rows = wh.query(sql).table.to_pylist()  # after another process refreshed: that process's snapshot, from disk
print(json.dumps({"snapshot": wh.current().id, "rows": rows}), flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("count", [2, 5])
def test_snapshot_is_read_while_its_writer_is_alive_and_after_it_exits(count, data, make_ws, tmp_path):
    ws, names, env = make_ws(count), TABLE_SETS[count], _env(tmp_path, data)
    sql = _sql_counts(names, data.expected)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ws), sql], cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert writer.stdin is not None and writer.stdout is not None and writer.stderr is not None  # all three are pipes
    watchdog = threading.Timer(TIMEOUT_S, writer.kill)
    watchdog.start()
    try:
        written = json.loads(writer.stdout.readline() or "null")
        assert written and written["ok"], writer.stderr.read() if written is None else written
        # The premise: a snapshot with the big table is memory-mapped by its writer, small ones kept in memory.

        assert written["kept_in_memory"] is (count != 5)

        # While A is alive: B queries and profiles the snapshot A wrote.
        assert_counts(query_counts(env, ws, names, data.expected), names, data.expected)
        assert {n: r for n, (r, _) in profile_tables(cli(env, "profile", ws).stdout).items()} == {n: data.expected[n].rows for n in names}

        # Still while A is alive: B refreshes after a change; A, which wrote the old one, now serves B's snapshot.
        after = change_orders(ws, data)
        report = json.loads(cli(env, "refresh", ws, "--json").stdout)
        assert report["swapped"] and report["previous"] == written["snapshot"]
        writer.stdin.write("\n")
        writer.stdin.flush()
        seen = json.loads(writer.stdout.readline() or "null")
        assert seen is not None, writer.stderr.read()
        assert seen["snapshot"] == report["snapshot"]
        assert_counts({r["t"]: (r["n"], r["s"], r["f"]) for r in seen["rows"]}, names, after)
        writer.stdin.write("\n")
        writer.stdin.flush()
        assert writer.wait(TIMEOUT_S) == 0
        _no_traceback(None, writer.stderr.read())
    finally:
        watchdog.cancel()
        if writer.poll() is None:
            writer.kill()
            writer.wait()

    # After A exited: C reads the newest snapshot.
    assert_counts(query_counts(env, ws, names, after), names, after)


# --------------------------------------------------------------------------- the big table among small ones

WRITE_AND_READ = r"""
import contextlib, io, json, sys
from pathlib import Path
from lib import cli; from lib.data import snapshots as warehouse
from lib.data.snapshots import Warehouse

ws, sql = Path(sys.argv[1]), sys.argv[2]
with contextlib.redirect_stdout(io.StringIO()) as printed:  # the CLI's refresh, in this process
    status = cli.main(["refresh", str(ws), "--json"])
report = json.loads(printed.getvalue())
wh = Warehouse.for_workspace(ws)
# Too big to keep in memory: the writer reads it back from the file, like any other process.
mapped = wh.root / (report["snapshot"] + warehouse.SUFFIX) not in warehouse._IN_MEMORY
rows = wh.query(sql).table.to_pylist()
print(json.dumps({"ok": status == 0 and report["ok"], "mapped_by_writer": mapped, "rows": rows}))
"""


def test_big_table_among_small_ones_in_one_snapshot(data, make_ws, tmp_path):
    ws, names, env = make_ws(5), TABLE_SETS[5], _env(tmp_path, data)
    sql = _sql_counts(names, data.expected)
    out = py(env, WRITE_AND_READ, ws, sql)
    assert out["ok"] and out["mapped_by_writer"]
    assert_counts({r["t"]: (r["n"], r["s"], r["f"]) for r in out["rows"]}, names, data.expected)

    [path] = snapshot_files(tmp_path)
    tables = read_manifest(path)["tables"]
    assert list(tables) == names
    # The big table has a file of its own (lib.data.snapshots.OWN_FILE_BYTES); the small tables after the first
    # start further into the snapshot file: their footers' offsets count from the start of the file.
    assert tables["big"]["file"] and (path.parent / tables["big"]["file"]).stat().st_size > 0
    assert all(tables[n]["offset"] > 0 for n in names[1:] if not tables[n].get("file"))
    assert {n: t["rows"] for n, t in tables.items()} == {n: data.expected[n].rows for n in names}

    # A new process reads every table of it.
    assert_counts(query_counts(env, ws, names, data.expected), names, data.expected)
    # ... and a filtered aggregate over the big table agrees with the generated data.
    got = json.loads(cli(env, "query", ws, "SELECT cat, count(*) AS n FROM big GROUP BY cat ORDER BY cat", "--json").stdout)["rows"]
    with open(data.folder / "big.csv", newline="") as handle:
        reader = csv.reader(handle)
        at = next(reader).index("cat")
        by_cat: dict[str, int] = {}
        for row in reader:
            by_cat[row[at]] = by_cat.get(row[at], 0) + 1
    assert {r["cat"]: r["n"] for r in got} == by_cat


# --------------------------------------------------------------------------- an app restart

RENDER_PAGE = r"""
import json, sys
from pathlib import Path
from lib.memory import workspace
from lib.artifacts.render import filter_states, render
from lib.data.snapshots import Warehouse

# What app_pages/dashboard.py calls, in a process that did not write the data (a restarted app).
out = {}
chosen = json.loads(sys.argv[1])
for p in sys.argv[2:]:
    path = Path(p)
    ws, _ = workspace.load(path)
    wh = Warehouse.for_workspace(path)
    snapshot = wh.current()
    kept = wh.snapshots()
    tables = dict(wh.tables(snapshot))
    dashboard = ws.get("dashboard")
    states = filter_states(dashboard, tables, snapshot.id)
    results = {}
    for label, filters in (("all", {}), ("filtered", chosen.get(path.name, {}))):
        rendered = render(ws.data, tables, snapshot.id, filters)
        results[label] = {"errors": rendered.errors, "components": [c.id for c in rendered.components],
                          "kpis": {c.id: c.value for c in rendered.components if c.type == "kpi"}}
    out[path.name] = {"snapshot": snapshot.id, "kept": len(kept), "tables": sorted(tables),
                      "filter_errors": [s.error for s in states if s.error], **results}
print(json.dumps(out, default=str))
"""


def drafted_kpis(ws: Path, data: Data) -> tuple[dict, dict[str, int], dict[str, int]]:
    """From an auto-drafted dashboard.yaml and the CSV file (read here with the csv module): a filter
    choice, and the values its record-count and integer-sum KPIs must show without and with that choice."""
    spec = yaml_load(ws / "dashboard.yaml")
    kpis = {c["id"]: c["query"] for c in spec["components"] if c["type"] == "kpi"}
    counted = {cid: m.group(1) for cid, q in kpis.items() if (m := re.match(r'\s*SELECT count\(\*\) AS value FROM "(\w+)"', q))}
    assert counted, f"the draft has no record-count KPI: {kpis}"
    records, table = next(iter(counted.items()))
    summed = {cid: m.group(1) for cid, q in kpis.items() if (m := re.match(r'\s*SELECT sum\("(\w+)"\) AS value FROM "(\w+)"', q)) and m.group(2) == table}
    filters = [
        (f["id"], m.group(1))
        for f in spec.get("filters") or []
        if f["type"] == "multiselect" and (m := re.match(r'\s*SELECT DISTINCT "(\w+)" FROM "(\w+)"', f.get("options_query") or "")) and m.group(2) == table
    ]
    with open(ws / data.paths[table], newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        wanted = sorted({*summed.values(), *(c for _, c in filters[:1])})
        columns = {c: [] for c in wanted}
        count = 0
        for row in reader:
            count += 1
            for c in wanted:
                columns[c].append(row[header.index(c)])
    summed = {cid: c for cid, c in summed.items() if all(re.fullmatch(r"-?\d+", v) for v in columns[c])}
    unfiltered = {records: count, **{cid: sum(map(int, columns[c])) for cid, c in summed.items()}}
    if not filters:
        return {}, unfiltered, unfiltered
    fid, column = filters[0]
    value = min(v for v in columns[column] if v)
    keep = [v == value for v in columns[column]]
    filtered = {records: sum(keep), **{cid: sum(int(v) for v, k in zip(columns[c], keep) if k) for cid, c in summed.items()}}
    return {fid: [value]}, unfiltered, filtered


def test_app_restart_renders_dashboards_from_snapshots_written_elsewhere(data, make_ws, tmp_path):
    env = _env(tmp_path, data)
    # The demo workspaces, one with a second source (which its dashboard does not use), and a drafted one.
    demos = tmp_path / "demos"
    supply = demos / "supply-chain-weekly"
    gdp_demo = demos / "gdp-explorer"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", supply)
    shutil.copytree(WORKSPACES / "gdp-explorer", gdp_demo)
    cli(env, "source", "add", supply, "adult", "--type", "csv", "--path", data.paths["adult"])
    sales = make_ws(5)
    cli(env, "autodraft", sales)  # loads the data (a refresh) in this process, then drafts from it
    for ws in (supply, gdp_demo):
        cli(env, "refresh", ws)

    with open(supply / "data" / "gates.csv", newline="") as handle:
        gates = list(csv.DictReader(handle))
    sales_filter, sales_all, sales_filtered = drafted_kpis(sales, data)
    chosen = {"supply-chain-weekly": {"site": ["Brno"]}, "sales-5": sales_filter}
    out = py(env, RENDER_PAGE, json.dumps(chosen), supply, gdp_demo, sales)

    for ws in (supply, gdp_demo, sales):
        page = out[ws.name]
        spec = yaml_load(ws / "dashboard.yaml")
        for label in ("all", "filtered"):
            assert page[label]["errors"] == [], (ws.name, label, page[label]["errors"])
            assert sorted(page[label]["components"]) == sorted(c["id"] for c in spec["components"])
        assert page["filter_errors"] == [] and page["kept"] == 1
    assert out["supply-chain-weekly"]["tables"] == ["adult", "gates"]
    assert out["sales-5"]["tables"] == sorted(TABLE_SETS[5])

    supply_kpis = out["supply-chain-weekly"]
    assert supply_kpis["all"]["kpis"]["kpi_volume"] == sum(int(r["actual"]) for r in gates)
    assert supply_kpis["filtered"]["kpis"]["kpi_volume"] == sum(int(r["actual"]) for r in gates if r["site"] == "Brno")
    with open(gdp_demo / "data" / "gdp.csv", newline="") as handle:
        latest = max(int(r["Year"]) for r in csv.DictReader(handle))
    assert out["gdp-explorer"]["all"]["kpis"]["kpi_latest_year"] == latest
    shown = out["sales-5"]
    assert {k: shown["all"]["kpis"][k] for k in sales_all} == sales_all
    assert {k: shown["filtered"]["kpis"][k] for k in sales_filtered} == sales_filtered


# --------------------------------------------------------------------------- damaged snapshots


def damage(path: Path, kind: str, table: str) -> None:
    """Damage a snapshot file on disk the way a crash or a bad disk would."""
    if kind == "truncated":
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
        return
    meta = read_manifest(path)["tables"][table]
    start, end = meta["offset"], meta["offset"] + meta["length"]
    assert start > 0  # not the first table: the one the old reader could still read
    blob = bytearray(path.read_bytes())
    blob[start:end] = bytes([0xA5]) * (end - start)  # the table's IPC file, footer included, overwritten
    path.write_bytes(bytes(blob))


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("older", [True, False], ids=["older-kept", "only-snapshot"])
@pytest.mark.parametrize("kind", ["truncated", "table-overwritten"])
def test_query_on_a_damaged_snapshot_serves_the_previous_one_or_says_to_refresh(kind, older, data, make_ws, tmp_path):
    ws, names, env = make_ws(2), TABLE_SETS[2], _env(tmp_path, data)
    cli(env, "refresh", ws)
    if older:
        change_orders(ws, data)
        cli(env, "refresh", ws)
    files = snapshot_files(tmp_path)
    assert len(files) == (2 if older else 1)
    damage(files[-1], kind, "orders")

    proc = cli(env, "query", ws, _sql_counts(names, data.expected), "--json", rc=None)
    if older:
        # The next readable snapshot is served: the data before the change.
        assert proc.returncode == 0, proc.stderr
        got = {r["t"]: (r["n"], r["s"], r["f"]) for r in json.loads(proc.stdout)["rows"]}
        assert_counts(got, names, data.expected)
    else:
        message = json.loads(proc.stdout)["error"] if proc.stdout.strip() else _one_line_error(proc)
        assert proc.returncode != 0
        assert "refresh" in message, f"the message should say how to get the data back: {message!r}"
        plain = cli(env, "query", ws, "SELECT count(*) FROM orders", rc=None)
        assert "refresh" in _one_line_error(plain)


@pytest.mark.parametrize("kind", ["truncated", "table-overwritten"])
@pytest.mark.parametrize("command", ["refresh", "profile"])
def test_first_command_after_damage_loads_the_data_again(command, kind, data, make_ws, tmp_path):
    """The damaged snapshot is the only one and nothing has noticed yet: the next command must recover."""
    ws, names, env = make_ws(2), TABLE_SETS[2], _env(tmp_path, data)
    cli(env, "refresh", ws)
    [path] = snapshot_files(tmp_path)
    damage(path, kind, "orders")
    proc = cli(env, command, ws)  # exit 0, no traceback
    if command == "profile":
        assert {n: r for n, (r, _) in profile_tables(proc.stdout).items()} == {n: data.expected[n].rows for n in names}, (
            f"profile printed {proc.stdout!r} (stderr {proc.stderr!r})"
        )
    assert_counts(query_counts(env, ws, names, data.expected), names, data.expected)


def test_restarted_app_serves_the_previous_snapshot_when_the_newest_is_damaged(data, make_ws, tmp_path):
    """Warehouse.current(): "the newest readable one (a damaged file is passed over)" -- also for the page."""
    ws, env = make_ws(2), _env(tmp_path, data)
    cli(env, "autodraft", ws)
    _, before_change, _ = drafted_kpis(ws, data)
    before = snapshot_files(tmp_path)
    change_orders(ws, data)
    cli(env, "refresh", ws)
    newest = snapshot_files(tmp_path)[-1]
    assert newest not in before
    damage(newest, "table-overwritten", "orders")

    out = py(env, RENDER_PAGE, "{}", ws)[ws.name]
    assert out["snapshot"] == before[-1].name.removesuffix(".snapshot")
    assert out["all"]["errors"] == []
    assert {k: out["all"]["kpis"][k] for k in before_change} == before_change


def yaml_load(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))
