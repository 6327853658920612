"""datasette, a third-party REST JSON API over SQLite, for the REST connector's tests: installed from PyPI into a
venv of its own by `make datasette` (it is no dependency of the app), serving a table made from a public dataset."""

from __future__ import annotations

import csv
import datetime as dt
import socket
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from . import ROOT, listening, stop

DATASETTE = ROOT / ".data" / "thirdparty" / "datasette" / "bin" / "datasette"

# The Global Superstore table's columns as SQLite types; the rest is TEXT. Its day-first dates are stored as ISO 8601
# text, SQLite's own way of keeping dates (its date functions read them), so the API sends them as JSON text.
TYPES = {"Row ID": "INTEGER", "Postal Code": "INTEGER", "Sales": "REAL", "Quantity": "INTEGER", "Discount": "REAL", "Profit": "REAL", "Shipping Cost": "REAL"}
DATES = ("Order Date", "Ship Date")


def datasette() -> Path:
    """The datasette program, or the test skips saying which `make` target installs it."""
    if not DATASETTE.exists():
        pytest.skip(f"datasette is not installed in {DATASETTE.parent.parent}: run `make datasette` (`make test` does)")
    return DATASETTE


def superstore_db(csv_path: Path, db_path: Path) -> int:
    """global_superstore.csv as the SQLite table `orders` (typed, ISO dates, empty cells NULL); returns its row count."""
    with open(csv_path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = [[_value(name, value) for name, value in zip(header, row)] for row in reader]
    with sqlite3.connect(db_path) as db:
        columns = ", ".join(f"{_quoted(name)} {TYPES.get(name, 'TEXT')}" for name in header)
        db.execute(f"CREATE TABLE orders ({columns})")
        db.executemany(f"INSERT INTO orders VALUES ({', '.join('?' * len(header))})", rows)
        return db.execute("SELECT count(*) FROM orders").fetchone()[0]


def _value(name: str, text: str) -> object:
    if text == "":
        return None
    if name in DATES:
        return dt.datetime.strptime(text, "%d-%m-%Y").date().isoformat()
    return text  # SQLite's column affinity makes numbers of the typed columns' text


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def serve(db_path: Path, log_folder: Path) -> Iterator[str]:
    """`datasette serve` of the file on a free port of 127.0.0.1, ended afterwards; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = log_folder / "datasette.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [str(datasette()), "serve", "--immutable", str(db_path), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        listening(server, port, log_path)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(server)
