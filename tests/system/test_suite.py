"""The test suite's own rules: no test module imports another (shared fixtures live in tests/conftest.py, shared
helpers in tests/helpers/), nothing in tests/ edits sys.path (pytest.ini's `pythonpath = .` does it), and the
markers tests/conftest.py puts on by fixture are registered in pytest.ini."""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

from tests.helpers import ROOT

TESTS = ROOT / "tests"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, relative ones resolved within tests/."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = ".".join(path.relative_to(ROOT).with_suffix("").parts[: -node.level])
                base = f"{package}.{base}" if base else package
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]  # `from tests import test_x`
    return found


def test_no_test_module_imports_another():
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in _imported_modules(path)
        if module.split(".")[0] == "tests" and any(part.startswith("test_") for part in module.split(".")[1:])
    ]
    # ... nor a script a test runs in another process (code in a string).
    offenders += [
        f"{path.relative_to(ROOT)}: a script imports {m.group(1)}"
        for path in sorted(TESTS.rglob("*.py"))
        for m in re.finditer(r"(?:from|import)\s+(tests(?:\.\w+)*\.test_\w+)", path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "move what they share into tests/conftest.py (fixtures) or tests/helpers/ (functions): " + "; ".join(offenders)


def test_nothing_in_tests_edits_sys_path():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"sys.path is pytest.ini's `pythonpath = .`, not the tests': {offenders}"


def test_the_markers_put_on_by_fixture_are_registered():
    from tests.conftest import MARKERS

    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    registered = {line.split(":")[0].strip() for line in ini["pytest"]["markers"].strip().splitlines()}
    assert {"slow", *MARKERS} <= registered
