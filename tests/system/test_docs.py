"""The documentation: a short README whose map links every page of docs/, links that lead somewhere, every CLI
command in docs/cli.md with examples that run, every module in docs/architecture.md's code map, and only
registered settings named."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lib.cli import build_parser
from lib.core import settings

from ..conftest import ROOT

README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
# The pages whose links are checked: the README, the changelog and every docs page.
LINKED_FROM = [README_PATH, ROOT / "CHANGELOG.md", *DOCS]

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
SETTING = re.compile(r"\bDASHMEM_[A-Z0-9_]*[A-Z0-9]")


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)  # the sub-command parsers by name
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if getattr(a, "choices", None) and a.dest.endswith("_command")]
        if nested:
            yield from (f"{name} {child}" for child in nested[0].choices)
        else:
            yield name


def _prose(text: str) -> str:
    """Markdown without its code blocks and code spans, where a link or a heading is only an example."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, title in HEADING.findall(FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- the README


def test_the_readme_is_short():
    lines = README.splitlines()
    assert len(lines) <= 150, f"the README has {len(lines)} lines; move the detail into a page of docs/"
    long = [n for n, line in enumerate(lines, 1) if len(line) > 160]
    assert not long, f"README lines over 160 characters: {long}"


def test_readme_set_up_commands_exist_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^make (\w+)", README, re.M)) | set(re.findall(r"`make (\w+)`", README))
    assert {"run", "test"} <= targets
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_the_readme_map_links_every_docs_page_once():
    """One line per page in the README's map of docs/, and nothing in docs/ left out of it."""
    assert DOCS, "no pages in docs/"
    section = README.split("\n## Documentation", 1)[1].split("\n## ", 1)[0]
    mapped = [target for line in section.splitlines() for target in LINK.findall(line) if target.startswith("docs/")]
    names = [Path(t.split("#", 1)[0]).name for t in mapped]
    assert sorted(names) == sorted(set(names)), f"pages listed twice in the README's map: {names}"
    missing = [p.name for p in DOCS if p.name not in names]
    assert not missing, f"pages of docs/ the README's map does not link: {missing}"
    gone = [t for t in mapped if not (ROOT / t.split("#", 1)[0]).is_file()]
    assert not gone, f"the README's map links pages that do not exist: {gone}"


# --------------------------------------------------------------------------- the pages and their links


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_each_docs_page_starts_with_its_title(page):
    assert page.name == page.name.lower(), f"{page.name}: page names are lower case"
    first = page.read_text(encoding="utf-8").splitlines()[0]
    assert re.match(r"# \S", first), f"{page.name} starts with {first!r}, not a '# Title' line"


@pytest.mark.parametrize("page", LINKED_FROM, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(page):
    """A link to a page or a file of this repository leads to one (and, for a page, to a heading it has)."""
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if ROOT not in dest.parents and dest != ROOT:
            broken.append(f"{target} (outside the repository)")
        elif not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text(encoding="utf-8")):
            broken.append(f"{target} (no such heading in {dest.name})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_every_setting_the_docs_name_is_registered():
    named = {}
    for path in [README_PATH, *DOCS]:
        for name in SETTING.findall(path.read_text(encoding="utf-8")):
            named.setdefault(name, str(path.relative_to(ROOT)))
    unknown = {name: where for name, where in named.items() if name not in settings.REGISTRY}
    assert not unknown, f"DASHMEM_ names in the docs that lib/core/settings.py does not register: {unknown}"
    assert len(named) >= 15


PROJECT_PATH = re.compile(r"(?<![\w/.-])((?:lib|app_pages|tests|bench|scripts|schemas)/[\w/.-]*\w)")
PATH_EXAMPLES = {"app_pages/x.py", "tests/data/test_", "bench/results"}  # a page being added, a test file's prefix, the benchmarks' output


def missing_paths(path: Path) -> list[str]:
    named = set(PROJECT_PATH.findall(path.read_text(encoding="utf-8")))
    return sorted(p for p in named - PATH_EXAMPLES if not (ROOT / p).exists())


@pytest.mark.parametrize("page", LINKED_FROM, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_path_the_docs_name_exists(page):
    """`lib/data/refresh.py`, `app_pages/ui.py`, `tests/data/test_live.py` written in prose name files that are there
    (a module that moves takes its mentions along)."""
    missing = missing_paths(page)
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_every_module_path_the_code_names_exists():
    """The same for the docstrings and comments of the code, the benches and the tests: a reader who follows
    `lib/data/connectors/policy.py` from a docstring finds it."""
    code = [p for d in ("lib", "app_pages", "bench", "scripts", "tests") for p in sorted((ROOT / d).rglob("*.py"))]
    missing = {str(p.relative_to(ROOT)): m for p in [ROOT / "app.py", *code] if (m := missing_paths(p))}
    assert not missing, f"paths named in the code that do not exist: {missing}"


# --------------------------------------------------------------------------- the code map and the command line


def test_the_code_map_names_every_module():
    """A newcomer finds each module of lib/ (and the pages' helpers) in docs/architecture.md's code map."""
    code_map = ARCHITECTURE.split("\n## Code map", 1)[1].split("\n## ", 1)[0]
    modules = [p for p in sorted((ROOT / "lib").rglob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    missing = [str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in code_map and f"{p.name}`" not in code_map]
    assert not missing, f"modules the code map in docs/architecture.md does not name: {missing}"


def test_every_cli_command_is_in_the_cli_page():
    table = CLI_PAGE.split("\n## ", 1)[0]
    missing = [c for c in _commands() if f"| `{c} " not in table]
    assert not missing, f"commands missing from the table in docs/cli.md: {missing}"


@pytest.mark.slow  # runs each example of docs/cli.md as its own `python -m lib` process: about 9 s here
def test_cli_page_examples_run(tmp_path):
    block = CLI_PAGE.split("Examples:", 1)[1].split("```", 2)[1]
    examples = [line for line in block.splitlines() if line.startswith(".venv/bin/python -m lib")]
    assert len(examples) >= 3
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DASHMEM_CACHE_DIR": str(tmp_path / "cache")}
    for line in examples:
        args = shlex.split(line)[1:]
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
