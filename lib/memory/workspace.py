"""A workspace folder: loading, validation and canonical saving of its files.

A workspace is one folder with one YAML file per memory kind (see
lib/memory/kinds/ and `FILES`). Loading never raises on bad content: it returns whatever
parsed plus a list of `Diagnostic`s. Saving validates everything first and
writes nothing when anything is invalid; files whose canonical text did not
change are not touched, so saving an unchanged workspace changes no byte.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from ..core.diagnostics import ERROR, Diagnostic, ValidationFailed, has_errors
from ..core.errors import DashmemError
from ..core.fsutil import atomic_write, write_temp
from . import relationships, schemas
from .kinds import KINDS
from .shapes import DashboardSpec, ReportSpec, SourcesFile
from .yamlio import MAX_FILE_BYTES, Document, YamlSyntaxError, dump, parse, too_large_message

# Memory kind -> file name, in the order files are shown and composed (lib/memory/kinds/ has the rest about each).
FILES: dict[str, str] = {name: kind.file for name, kind in KINDS.items()}
# Files a workspace must have; a profile and a dashboard appear once data is connected.
REQUIRED: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.required)

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class InvalidName(DashmemError, ValueError):
    pass


class WorkspaceExists(DashmemError, FileExistsError):
    """A new workspace's folder exists already; nothing was written."""


def check_slug(slug: str) -> str:
    """A workspace folder name: lower-case letters, digits and dashes; no paths."""
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise InvalidName(
            f"invalid workspace name {slug!r}: use 1-63 lower-case letters, digits and dashes, starting with a letter or digit (no '/', '..' or spaces)"
        )
    return slug


@dataclass
class Workspace:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)  # kind -> parsed content (absent if missing)
    docs: dict[str, Document] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return self.path.name

    @property
    def name(self) -> str:
        return (self.data.get("workspace") or {}).get("name", self.slug)

    def get(self, kind: str, default: Any = None) -> Any:
        return self.data.get(kind, default)

    # The artifacts and the sources, typed as lib.memory.shapes describes them (the same dicts: nothing is copied).

    @property
    def dashboard(self) -> DashboardSpec | None:
        return self.data.get("dashboard")

    @property
    def report(self) -> ReportSpec | None:
        return self.data.get("report")

    @property
    def sources(self) -> SourcesFile | None:
        return self.data.get("sources")

    def text(self, kind: str) -> str:
        """Canonical YAML of one file, exactly as `save` would write it."""
        return render(kind, self.data[kind])


def render(kind: str, data: Any) -> str:
    return dump(data, schema=schemas.load_schema(kind), header=schemas.header(kind))


def is_workspace(path: Path) -> bool:
    return (Path(path) / FILES["workspace"]).is_file()


def is_data_file(path: str) -> bool:
    """Whether `path` (relative to a config repo, `<slug>/...`) is a data file of a workspace: any file in its
    folder but its memory files. A person may replace one in place (next week's CSV), so a repair that restores
    the memory files leaves it alone."""
    parts = path.split("/")
    return len(parts) >= 2 and bool(SLUG_RE.match(parts[0])) and not (len(parts) == 2 and parts[1] in FILES.values())


def find_workspaces(path: Path) -> list[Path]:
    """The workspace at PATH, or every workspace folder below it (sorted)."""
    path = Path(path)
    if is_workspace(path):
        return [path]
    if not path.is_dir():
        return []
    found = []
    for folder, subfolders, files in os.walk(path):
        if FILES["workspace"] in files:
            found.append(Path(folder))
        # Never walk into hidden folders (.git, a CI job's clone of the app in .dashmem) or
        # into another git checkout below PATH: their workspaces are not this repo's.
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and not os.path.exists(os.path.join(folder, d, ".git")))
    return sorted(found)


def load(path: Path, *, readonly: bool = False) -> tuple[Workspace, list[Diagnostic]]:
    """Read and validate one workspace. Never raises on bad content.

    `readonly=True` hands out the parsed files shared with the cache instead of
    copies, for callers that only read (a refresh); they must not change them.
    """
    path = Path(path)
    ws = Workspace(path=path)
    diagnostics: list[Diagnostic] = []
    if not SLUG_RE.match(path.name):
        diagnostics.append(
            Diagnostic(
                "workspace.name",
                ERROR,
                f"folder name {path.name!r} is not a valid workspace name",
                str(path),
                None,
                None,
                "lower-case letters, digits and dashes",
            )
        )
    folder = path.resolve()
    for kind, filename in FILES.items():
        file = folder / filename
        shown = _shown(path, filename)
        try:
            stat = file.stat()
        except OSError:
            stat = None
        if stat is None or not S_ISREG(stat.st_mode):
            if kind in REQUIRED:
                diagnostics.append(
                    Diagnostic("file.missing", ERROR, f"missing file {filename}", shown, None, None, f"a {filename} that follows schemas/{kind}.schema.json")
                )
            continue
        doc, file_diags = _load_file(kind, str(file), shown, stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if doc is not None:
            ws.docs[kind] = doc
            ws.data[kind] = doc.data if readonly else copy.deepcopy(doc.data)  # callers edit and save their copy
        diagnostics.extend(file_diags)
    if "sources" in ws.docs and ws.data.get("profile") and not any(d.file == _shown(path, FILES["sources"]) and d.level == ERROR for d in diagnostics):
        # Across files: a declared join's columns, where the profile describes the table.
        problems = relationships.reference_problems(ws.docs["sources"], ws.data["profile"], _shown(path, FILES["sources"]))
        diagnostics.extend(d for d in problems if d.id == "relationship.unknown_column")
    return ws, diagnostics


@functools.lru_cache(maxsize=256)
def _load_file(kind: str, file: str, shown: str, mtime_ns: int, size: int, inode: int) -> tuple[Document | None, tuple[Diagnostic, ...]]:
    """Parse and validate one file; cached on its identity and modification time.

    Every rerun of a Streamlit page and every refresh loads the workspace, so
    an unchanged file is parsed and validated once per process.
    """
    if size > MAX_FILE_BYTES:  # refused before a byte is read: files come from pull requests
        return None, (Diagnostic("file.too_large", ERROR, too_large_message(size, Path(file).name), shown, None, None, f"at most {MAX_FILE_BYTES:,} bytes"),)
    try:
        raw = Path(file).read_bytes()
    except OSError as exc:
        return None, (Diagnostic("file.unreadable", ERROR, f"cannot read the file: {exc.strerror}", shown, None, None, None),)
    if len(raw) > MAX_FILE_BYTES:  # it grew since it was looked at
        return None, (
            Diagnostic("file.too_large", ERROR, too_large_message(len(raw), Path(file).name), shown, None, None, f"at most {MAX_FILE_BYTES:,} bytes"),
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return None, (Diagnostic("file.encoding", ERROR, f"not UTF-8 text ({exc.reason} at byte {exc.start})", shown, line, None, "UTF-8"),)
    try:
        doc = parse(text)
    except YamlSyntaxError as exc:
        return None, (yaml_diagnostic(exc, shown),)
    return doc, tuple(_check_document(kind, doc, shown))


def yaml_diagnostic(exc: YamlSyntaxError, shown: str) -> Diagnostic:
    """A YAML problem of a file as a Diagnostic: `yaml.syntax` for malformed text, `yaml.<kind>` for a refusal."""
    if exc.kind == "syntax":
        return Diagnostic("yaml.syntax", ERROR, f"malformed YAML: {exc}", shown, exc.line, None, None)
    if exc.kind == "too_large":
        return Diagnostic(
            "file.too_large", ERROR, too_large_message(getattr(exc, "size", 0), Path(shown).name), shown, None, None, f"at most {MAX_FILE_BYTES:,} bytes"
        )
    return Diagnostic(f"yaml.{exc.kind}", ERROR, str(exc), shown, exc.line, None, None)


def validate(path: Path) -> list[Diagnostic]:
    return load(path)[1]


def shown_file(ws_path: Path, kind: str) -> str:
    """How messages name the workspace's file of `kind` (say `workspaces/sales/dashboard.yaml`)."""
    return _shown(Path(ws_path), FILES[kind])


def _shown(ws_path: Path, filename: str) -> str:
    """File name as shown in messages: relative to the current directory when possible."""
    return f"{_shown_folder(str(ws_path), os.getcwd())}/{filename}"


@functools.lru_cache(maxsize=256)
def _shown_folder(ws_path: str, cwd: str) -> str:
    folder = Path(ws_path).resolve()
    try:
        return str(folder.relative_to(Path(cwd).resolve()))
    except ValueError:
        return str(Path(ws_path))


# --------------------------------------------------------------------------- saving


def validate_content(path: Path, data: dict[str, Any]) -> list[Diagnostic]:
    """Validate in-memory content for a workspace folder without writing it."""
    return _prepare(path, data)[0]


def _prepare(path: Path, data: dict[str, Any]) -> tuple[list[Diagnostic], dict[str, str]]:
    """The diagnostics of content, and its canonical text per kind, as `save` would write it."""
    out: list[Diagnostic] = []
    texts: dict[str, str] = {}
    for kind, content in data.items():
        if kind not in FILES:
            raise KeyError(f"unknown workspace file kind {kind!r}; known: {', '.join(FILES)}")
        texts[kind] = render(kind, content)
        # Parse the canonical text again so that line numbers match what would be written.
        shown = _shown(Path(path), FILES[kind])
        try:
            doc = parse(texts[kind])
        except YamlSyntaxError as exc:  # content too large or too deeply nested to be a workspace file
            out.append(yaml_diagnostic(exc, shown))
            continue
        out.extend(_check_document(kind, doc, shown))
    return out, texts


def _check_document(kind: str, doc: Document, shown: str) -> list[Diagnostic]:
    """Schema validation, then (on a valid document) the semantic checks of its kind."""
    diags = schemas.validate_document(kind, doc, shown)
    return list(diags) or [d for check in KINDS[kind].checks for d in check(doc, shown)]


def save(path: Path, data: dict[str, Any]) -> list[str]:
    """Write the given files (kind -> content) canonically; returns the file names that changed.

    Validates all given content first and raises `ValidationFailed` without
    writing anything if any of it is invalid. Each file is replaced atomically.
    """
    path = Path(path)
    pending = changed_files(path, data)
    path.mkdir(parents=True, exist_ok=True)
    temps = []
    try:
        for target, text in pending:
            temps.append((write_temp(target, text), target))
        for tmp, target in temps:
            os.replace(tmp, target)
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return [t.name for t, _ in pending]


def changed_files(path: Path, data: dict[str, Any]) -> list[tuple[Path, str]]:
    """What `save` would write: each given file whose canonical text differs from the folder's, with that text.

    Raises `ValidationFailed` if any of the content is invalid; writes nothing (a draft's save commits these
    before its worktree sees them: lib.repo.history.save_files).
    """
    path = Path(path)
    check_slug(path.name)
    diagnostics, texts = _prepare(path, data)
    if has_errors(diagnostics):
        raise ValidationFailed(diagnostics)
    pending: list[tuple[Path, str]] = []
    for kind, text in texts.items():
        target = path / FILES[kind]
        if target.is_file() and target.read_bytes() == text.encode("utf-8"):
            continue
        pending.append((target, text))
    return pending


def _umask() -> int:
    """The process's umask, read without changing it where the system allows (Linux), since
    setting it even for a moment would affect files other threads create meanwhile."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - systems without /proc
    os.umask(mask)
    return mask


def text_diff(before: str, after: str, from_label: str, to_label: str) -> str:
    """The unified diff between two texts (empty when they are equal)."""
    import difflib

    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), from_label, to_label))


def blank(name: str, owner: str, today: str) -> dict[str, Any]:
    """Content of a new, empty workspace that validates."""
    return {
        "workspace": {
            "name": name,
            "description": "",
            "access": {"owners": [owner], "stewards": [], "viewers": []},
            "policy": {"stewards_can_publish": False, "require_valid_to_publish": True},
        },
        "task": {"goal": "", "rules": []},
        "sources": {"sources": []},
        "output": {
            "data_injection": {"mode": "queries_at_render", "max_rows_per_query": 10000, "query_timeout_s": 10},
            "theme": {"background": "#ffffff", "text": "#1f2933", "primary": "#1f77b4"},
        },
    }


def copy_template(template: Path, target: Path, *, name: str | None = None) -> None:
    """Copy a template workspace folder (YAML and its data files) into a new folder."""
    import shutil

    target = Path(target)
    if target.exists():
        raise WorkspaceExists(f"{target} already exists; choose another name")
    ws, diags = load(template)
    meta = dict(ws.data.get("workspace") or {}, name=name) if name else None
    if meta is not None:
        diags = diags + validate_content(target, {"workspace": meta})  # the new name must fit before anything is written
    if has_errors(diags):
        raise ValidationFailed(diags)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.{os.urandom(6).hex()}.tmp"
    staging.mkdir(0o777)  # not mkdtemp's 0o700: the umask decides, as for any new folder
    try:
        # Files and folders get the permissions of new ones (the umask decides), not the template's.
        shutil.copytree(template, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*", "__pycache__"), copy_function=shutil.copyfile)
        folder_mode = 0o777 & ~_umask()
        for folder, _, _ in os.walk(staging):
            os.chmod(folder, folder_mode)
        if meta is not None:
            atomic_write(staging / FILES["workspace"], render("workspace", meta))
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
