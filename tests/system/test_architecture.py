"""The layers of lib/: what docs/architecture.md shows is what the code does, within the limits it states.

The contract itself (`.importlinter`) is enforced by `make lint` (lint-imports); these tests check the numbers
the page shows, the limits on them, and that a deliberate upward import really breaks the contract.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT

spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
assert spec and spec.loader
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)

MAX_LEVELS = 12  # the longest chain of imports, in modules (23 before the wings); docs/architecture.md shows it
MAX_INNER_IMPORTS = 10  # project imports inside functions, outside lib/cli/ (issue #27)


def test_the_page_shows_the_graph_as_it_is():
    page = import_graph.PAGE.read_text(encoding="utf-8")
    assert import_graph.with_block(page) == page, "docs/architecture.md's import graph is stale: run `.venv/bin/python scripts/import_graph.py --write`"


def test_no_cycle_and_no_import_up_a_layer():
    measured = import_graph.measure()
    assert measured["cycles"] == 0
    assert measured["upward"] == [], measured["upward"]
    assert measured["sideways"] == [], measured["sideways"]
    assert measured["levels"] <= MAX_LEVELS, " -> ".join(measured["chain"])


def test_every_module_of_lib_is_in_a_wing_of_the_contract():
    wings = {name for layer in import_graph.layers() for name in layer}
    outside = [m for m in import_graph.graph().modules if m.count(".") >= 1 and import_graph.wing_of(m) not in wings | {"__main__"}]
    assert not outside, f"modules in no wing of .importlinter: {outside}"


def test_project_imports_inside_functions_stay_in_the_cli():
    found = []
    for path in [*sorted((ROOT / "lib").rglob("*.py")), *sorted((ROOT / "app_pages").glob("*.py")), ROOT / "app.py"]:
        if path.is_relative_to(ROOT / "lib" / "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").split(".")[0] in ("lib", "app_pages")):
                        found.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
                    elif isinstance(inner, ast.Import) and any(a.name.split(".")[0] in ("lib", "app_pages") for a in inner.names):
                        found.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert len(set(found)) <= MAX_INNER_IMPORTS, sorted(set(found))


@pytest.mark.slow  # copies lib/ and runs lint-imports twice: about 5 s
def test_an_upward_import_breaks_the_contract(tmp_path):
    lint = shutil.which("lint-imports", path=str(ROOT / ".venv" / "bin")) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports (import-linter) is not installed: `make test` installs it")
    shutil.copytree(ROOT / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")

    def run():
        return subprocess.run(
            [lint, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
        )

    kept = run()
    assert kept.returncode == 0, kept.stdout + kept.stderr
    errors = tmp_path / "lib" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom ..artifacts import render  # noqa: E402  a deliberate upward import\n")
    broken = run()
    assert broken.returncode != 0
    assert "lib.core is not allowed to import lib.artifacts" in broken.stdout, broken.stdout


def test_the_graph_script_runs_on_its_own():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_graph.py")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cycles: 0" in done.stdout and "each layer imports only the layers below it" in done.stdout
