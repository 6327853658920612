"""The local PostgreSQL and MariaDB servers of the SQL-source tests, a database of its own per xdist worker.

Each worker (`PYTEST_XDIST_WORKER`: gw0, gw1, ...; gw0 without xdist) works in the database
`test_<worker>` on both servers, created on first use, so tables, locks and row counts of two workers
never meet. Server-wide things (roles, users, connections) are told apart by unique names in the tests.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
DATABASE = f"test_{WORKER}"

PG_URL = f"postgresql://postgres@127.0.0.1:5432/{DATABASE}"
MARIADB_URL = f"mysql://root@127.0.0.1:3306/{DATABASE}"

SERVERS = {
    "postgresql": ("PostgreSQL", 5432, f"postgresql+psycopg2://postgres@127.0.0.1:5432/{DATABASE}"),
    "mariadb": ("MariaDB", 3306, f"mysql+pymysql://root@127.0.0.1:3306/{DATABASE}"),
}
# Where CREATE DATABASE is sent from: a database that is always there (PostgreSQL), or none (MariaDB).
ADMIN_URLS = {
    "postgresql": "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/",
}

_created: set[str] = set()


def ensure_database(kind: str) -> None:
    """Create this worker's database on the server `kind` unless it exists (once per process)."""
    if kind in _created:
        return
    admin = sa.create_engine(ADMIN_URLS[kind], connect_args={"connect_timeout": 5}, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            if kind == "postgresql":
                if not connection.exec_driver_sql("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).scalar():
                    connection.exec_driver_sql(f'CREATE DATABASE "{DATABASE}"')
            else:
                connection.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`")
    finally:
        admin.dispose()
    _created.add(kind)


def server_engine(kind: str) -> sa.Engine:
    """An admin engine on this worker's database of a server, or a skip saying why the server cannot be used."""
    label, port, url = SERVERS[kind]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        ensure_database(kind)
        engine = sa.create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except Exception as exc:  # any reason at all means: not usable here
        pytest.skip(f"{label} not reachable on 127.0.0.1:{port}: {exc}")
    return engine


@contextmanager
def psycopg2_blocking() -> Iterator[None]:
    """psycopg2 without a wait callback for a while: COPY refuses to run with one, and dashmem's SQL
    connector installs one for the whole process (lib/data/connectors/sql_wait.py)."""
    import psycopg2.extensions

    installed = psycopg2.extensions.get_wait_callback()
    psycopg2.extensions.set_wait_callback(None)
    try:
        yield
    finally:
        psycopg2.extensions.set_wait_callback(installed)
