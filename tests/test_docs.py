"""The README documents every CLI command, and its examples run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from lib.cli import build_parser

from .conftest import ROOT

README = (ROOT / "README.md").read_text()


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if getattr(a, "choices", None) and a.dest.endswith("_command")]
        if nested:
            yield from (f"{name} {child}" for child in nested[0].choices)
        else:
            yield name


def test_the_code_map_names_every_module():
    """A newcomer finds each module of lib/ (and the pages' helpers) in the README's code map."""
    code_map = README.split("## Code map", 1)[1].split("\n## ", 1)[0]
    modules = [p for p in sorted((ROOT / "lib").rglob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    missing = [str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in code_map and f"{p.name}`" not in code_map]
    assert not missing, f"modules the README's code map does not name: {missing}"


def test_every_cli_command_is_in_the_readme():
    table = README.split("## The command line", 1)[1].split("##", 1)[0]
    missing = [c for c in _commands() if f"| `{c} " not in table]
    assert not missing, f"commands missing from the README's CLI table: {missing}"


@pytest.mark.slow  # runs each README example as its own `python -m lib` process: about 9 s here
def test_readme_examples_run(tmp_path):
    block = README.split("Examples:", 1)[1].split("```", 2)[1]
    examples = [line for line in block.splitlines() if line.startswith(".venv/bin/python -m lib")]
    assert len(examples) >= 3
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    for line in examples:
        args = shlex.split(line)[1:]
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)


def test_readme_set_up_commands_exist_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", README, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
