"""Live SQL sources against the local servers: this worker's database URLs and small builders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from lib.memory import workspace

from . import WORKSPACES
from .databases import PG_URL


def _source(table: str, mode: str = "live", url: str = PG_URL, **extra) -> dict:
    return {"name": "gates", "type": "sql", "url": url, "table": table, "mode": mode, **extra}


def _workspace(tmp_path: Path, source: dict, name: str) -> Path:
    """The supply-chain demo workspace with its CSV replaced by `source`."""
    folder = tmp_path / name
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    shutil.rmtree(folder / "data")
    ws, _ = workspace.load(folder)
    ws.data["sources"] = {"sources": [source]}
    workspace.save(folder, ws.data)
    return folder


# What each server calls the id of a connection, by SQLAlchemy dialect name (MariaDB's is `mysql`).
CONNECTION_ID = {"postgresql": "pg_backend_pid()", "mysql": "CONNECTION_ID()"}


def _drop_connection(admin: sa.Engine, connection_id: int) -> None:
    """Drop one connection server-side from another, as a server restart or an idle-connection reaper
    would (only ours: the server is shared)."""
    with admin.begin() as connection:
        if admin.dialect.name == "postgresql":
            assert connection.exec_driver_sql(f"SELECT pg_terminate_backend({int(connection_id)})").scalar_one() is True
        else:
            connection.exec_driver_sql(f"KILL CONNECTION {int(connection_id)}")  # an id that is not there is an error


def _url_of_its_own(url: str, tag: str) -> str:
    """`url` told apart by a harmless client name, so that its live engine (cached by url) pools only
    the connections of the test that made it."""
    return f"{url}?{'application_name' if url.startswith('postgresql') else 'program_name'}={tag}"


def results(rendered) -> dict[str, list]:
    """Every query result of a rendering, by component (and query name for text blocks), as rows; no component failed."""
    out = {}
    for comp in rendered.components:
        assert comp.error is None, (comp.id, comp.error)
        if comp.result is not None:
            out[comp.id] = [list(row) for row in comp.result.rows]
        for query, result in comp.text_results.items():
            out[f"{comp.id}.{query}"] = [list(row) for row in result.rows]
    return out


def same(got: dict, expected: dict, *, ties_in_any_order: bool = False) -> None:
    """The same results, doubles to 1e-9; `ties_in_any_order`: rows compared sorted, for engines that order the
    rows a query's ORDER BY leaves tied in their own way."""
    assert got.keys() == expected.keys()
    for key in expected:
        assert len(got[key]) == len(expected[key]), key
        pairs = zip(sorted(got[key], key=str), sorted(expected[key], key=str)) if ties_in_any_order else zip(got[key], expected[key])
        for a, b in pairs:
            for x, y in zip(a, b):
                if isinstance(y, float):
                    assert x == pytest.approx(y, rel=1e-9), key
                else:
                    assert str(x) == str(y), key
