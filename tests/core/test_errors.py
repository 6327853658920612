"""The error model: every user-facing family is a DashmemError, and pages show them without a traceback."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import re

import pytest

import lib
from app_pages import ui
from lib.artifacts.autodraft import NothingToDraft
from lib.artifacts.explain import ExplainError
from lib.artifacts.export import ExportError
from lib.artifacts.time_travel import ReadOnlyData, TimeTravelError
from lib.chat.model import ModelError
from lib.core import errors
from lib.core.diagnostics import ERROR, WARNING, Diagnostic, ValidationFailed
from lib.core.errors import DashmemError
from lib.data.connectors.base import SourceError
from lib.data.engine import NoEarlierData
from lib.data.netguard import Refused
from lib.data.query_worker import WorkerError
from lib.data.sandbox import QueryError, QueryRefused
from lib.memory.intervals import ScheduleError
from lib.memory.secrets import SecretMissing
from lib.memory.workspace import InvalidName, WorkspaceExists
from lib.memory.yamlio import YamlSyntaxError
from lib.ops.schedule import RefreshBusy
from lib.repo.drafts import PublishConflict
from lib.repo.gitops import Busy, ConfigRepoError
from lib.roles.access import PermissionDenied
from lib.roles.auth import AuthConfigError
from tests.helpers.app import on_page, signed_in

# (family, the base it had before DashmemError and keeps, one instance)
FAMILIES = [
    (PermissionDenied, PermissionError, PermissionDenied("sam (viewer) may not edit in workspace 'x'")),
    (AuthConfigError, RuntimeError, AuthConfigError("set a cookie key of at least 32 bytes")),
    (ConfigRepoError, RuntimeError, ConfigRepoError("sam has no draft of x to publish")),
    (PublishConflict, ConfigRepoError, PublishConflict("x", "draft/sam/x", ["task.yaml"])),
    (Busy, ConfigRepoError, Busy("the config repo is busy; try again")),
    (ValidationFailed, ValueError, ValidationFailed([Diagnostic("required", ERROR, "text is required", "task.yaml", 3, "rules[0]")])),
    (YamlSyntaxError, ValueError, YamlSyntaxError("mapping values are not allowed here", 4)),
    (InvalidName, ValueError, InvalidName("folder names are lower-case letters, digits and dashes")),
    (WorkspaceExists, FileExistsError, WorkspaceExists("x already exists; choose another name")),
    (SecretMissing, KeyError, SecretMissing("secret env:DB_PW is not set: define the environment variable DB_PW")),
    (SourceError, RuntimeError, SourceError("orders", "the file does not exist")),
    (Refused, Exception, Refused("169.254.169.254 is a link-local/cloud-metadata address; refused")),
    (QueryError, ValueError, QueryError("query took longer than 10 s and was stopped")),
    (QueryRefused, QueryError, QueryRefused("only SELECT queries are allowed")),
    (WorkerError, RuntimeError, WorkerError("the query service stopped; try again")),
    (ModelError, Exception, ModelError("auth", "the API key was not accepted")),
    (ExportError, RuntimeError, ExportError("x has no dashboard.yaml to export")),
    (NothingToDraft, ValueError, NothingToDraft("no data profile yet: connect a source and refresh first")),
    (ScheduleError, ValueError, ScheduleError("workspace.yaml: refresh.every: 'hourly' is not an interval")),
    (RefreshBusy, RuntimeError, RefreshBusy("another `refresh --all` of repo is running")),
    (ExplainError, ValueError, ExplainError("no component 'x' in this dashboard; its components: a, b")),
    (TimeTravelError, ValueError, TimeTravelError("that load is no longer kept (the last 5 are: ...); showing it is not possible")),
    (ReadOnlyData, PermissionError, ReadOnlyData("data opened as of an earlier load is read-only; nothing was changed")),
    (NoEarlierData, QueryError, NoEarlierData("no earlier data kept: orders is a live source, read from its database only when shown")),
]

# Raised and caught inside their own module, which turns them into a SourceError; never shown as they are.
INTERNAL = {
    "lib.data.connectors.csv_source._NotUtf8",
    "lib.data.connectors.result_text.NotRows",
    "lib.data.connectors.mcp_source.NoHandshake",
    "lib.data.connectors.policy.Transient",
    "lib.data.connectors.spark_connect.SparkFailure",
}


@pytest.mark.parametrize("family, other, instance", FAMILIES, ids=[f[0].__name__ for f in FAMILIES])
def test_every_family_is_a_dashmem_error_and_keeps_its_old_base(family, other, instance):
    assert issubclass(family, DashmemError) and issubclass(family, other)
    assert isinstance(instance, DashmemError) and isinstance(instance, other)
    message = instance.user_message
    assert message and "Traceback" not in message and not message.startswith(("'", '"'))  # SecretMissing is no quoted KeyError


def test_no_exception_class_in_lib_is_left_out_of_the_model():
    """Every exception class lib/ defines is a DashmemError, unless it is listed here as internal (and stays in its module)."""
    found = {}
    for info in pkgutil.walk_packages(lib.__path__, "lib."):
        if info.name in ("lib.__main__",):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    left_out = sorted(name for name, cls in found.items() if not issubclass(cls, DashmemError) and name not in INTERNAL)
    assert left_out == [], f"user-facing? subclass lib.core.errors.DashmemError; internal? add to INTERNAL and errors.py: {left_out}"
    assert all(not issubclass(found[name], DashmemError) for name in INTERNAL)
    assert {f.__name__ for f, _, _ in FAMILIES} <= {cls.__name__ for cls in found.values() if issubclass(cls, DashmemError)}


def test_the_error_module_documents_every_family():
    assert errors.__doc__
    for family, _, _ in FAMILIES:
        assert f"`{family.__name__}`" in errors.__doc__, family.__name__


def test_the_error_tables_rows_are_the_codes_classes_in_their_modules():
    """Each public DashmemError of lib/ has its row in lib/core/errors.py's table, with the module it lives in and its
    other base: a class that moves takes its row along, and a new one adds it."""
    documented = set(re.findall(r"^\| `(\w+)` \| ([\w.]+) \| (\w+) \|$", errors.__doc__ or "", re.M))
    defined = set()
    for info in pkgutil.walk_packages(lib.__path__, "lib."):
        if info.name == "lib.__main__":
            continue
        for name, obj in vars(importlib.import_module(info.name)).items():
            if inspect.isclass(obj) and issubclass(obj, DashmemError) and obj is not DashmemError and obj.__module__ == info.name and not name.startswith("_"):
                other = [b.__name__ for b in obj.__bases__ if b is not DashmemError] or ["Exception"]
                defined.add((name, info.name.removeprefix("lib."), ", ".join(other)))
    assert documented == defined, f"in the table only: {sorted(documented - defined)}; in the code only: {sorted(defined - documented)}"


# --------------------------------------------------------------------------- the page helper


class FakeSt:
    """What ui.user_errors draws with: records st.error and st.warning calls."""

    def __init__(self):
        self.shown: list[tuple[str, str]] = []

    def error(self, text):
        self.shown.append(("error", text))

    def warning(self, text):
        self.shown.append(("warning", text))


@pytest.mark.parametrize("family, other, instance", FAMILIES, ids=[f[0].__name__ for f in FAMILIES])
def test_the_page_helper_shows_a_dashmem_errors_own_message(family, other, instance, caplog):
    caplog.set_level(logging.INFO, logger="dashmem.app")
    out = FakeSt()
    with ui.user_errors("Could not save", out=out) as caught:
        raise instance
    assert caught.failed and caught.error is instance
    assert out.shown == [("error", str(instance))]
    assert any(family.__name__ in r.getMessage() and "Could not save" in r.getMessage() for r in caplog.records)


def test_a_validation_failure_can_lead_with_a_line_and_list_each_finding():
    out = FakeSt()
    failure = ValidationFailed(
        [
            Diagnostic("required", ERROR, "is required", "/srv/config-repo.drafts/sam/x/task.yaml", 3, "rules[0].text"),
            Diagnostic("unused", WARNING, "unused", "/srv/config-repo.drafts/sam/x/output.yaml", 1, "theme"),
        ]
    )
    with ui.user_errors("Could not save", invalid="Not saved: the change does not validate.", out=out):
        raise failure
    assert out.shown[0] == ("error", "Not saved: the change does not validate.")
    assert [kind for kind, _ in out.shown[1:]] == ["error"]  # a ValidationFailed keeps only the errors
    assert out.shown[1][1].startswith("task.yaml:3") and "/srv" not in out.shown[1][1]


def test_an_unexpected_error_shows_a_plain_message_and_logs_the_traceback(caplog):
    out = FakeSt()
    with ui.user_errors("Could not publish", out=out) as caught:
        raise RuntimeError("internal detail /srv/secret/path")
    assert caught.failed and isinstance(caught.error, RuntimeError)
    [(kind, text)] = out.shown
    assert kind == "error" and text.startswith("Could not publish. Something went wrong") and "reference **" in text
    assert "/srv/secret/path" not in text and "RuntimeError" not in text and "Traceback" not in text
    reference = text.split("reference **", 1)[1].split("**", 1)[0]
    [record] = [r for r in caplog.records if reference in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info and "internal detail" in str(record.exc_info[1])


def test_without_an_action_the_message_is_the_pages_own():
    out = FakeSt()
    with ui.user_errors(out=out):
        raise KeyError("slug")
    assert out.shown[0][1].startswith("Something went wrong on this page. Your saved work is not affected.")


def test_streamlits_stop_rerun_and_switch_page_pass_through():
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

    out = FakeSt()
    for control in (StopException(), RerunException(None)):  # pyright: ignore[reportArgumentType]  # no rerun data: only the type is raised
        with pytest.raises(type(control)):
            with ui.user_errors("Could not save", out=out):
                raise control
    assert out.shown == []


def test_nothing_is_shown_when_nothing_fails():
    out = FakeSt()
    value = None
    with ui.user_errors("Could not save", out=out) as caught:
        value = 1
    assert value == 1 and not caught.failed and caught.error is None and out.shown == []


def test_the_pages_catch_no_exception_types_of_their_own():
    """Pages show errors through ui.user_errors; the few `except` clauses left are flow, not display, and listed here."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {
        ("review.py", "except PublishConflict as exc:"),  # a conflicting update offers a choice instead of an error
        ("specs.py", "except YamlSyntaxError as exc:"),  # the editor's text: the message names the line
        ("schema_form.py", "except YamlSyntaxError as exc:"),  # a YAML field: the message names the field and line
        ("sources.py", "except (QueryError, OSError, ValueError):"),  # no histogram: the chart falls back to min/max text
        ("ui.py", "except ValueError:"),  # `when`: a time that does not parse is shown as it is
        ("crossfilter.py", "except Exception:"),  # a widget callback: its exception would bypass user_errors; logged, filters unchanged
    }
    found = set()
    for path in [root / "app.py", *sorted((root / "app_pages").glob("*.py"))]:
        for line in path.read_text().splitlines():
            match = re.match(r"\s*(except\b.*?:)", line)
            if match:
                found.add((path.name, match.group(1)))
    assert found <= allowed, found - allowed


# --------------------------------------------------------------------------- in a page, through AppTest


@pytest.mark.parametrize(
    "raised, shown, hidden",
    [
        (ConfigRepoError("sam has no draft of supply-chain-weekly to revert"), "sam has no draft of supply-chain-weekly to revert", None),
        (RuntimeError("internal detail /srv/secret/path"), "Could not revert your draft. Something went wrong", "/srv/secret/path"),
    ],
    ids=["DashmemError", "unexpected"],
)
def test_a_page_action_that_fails_shows_one_plain_message(env, monkeypatch, caplog, raised, shown, hidden):
    from lib.repo.configrepo import ConfigRepo

    def revert(*args, **kwargs):
        raise raised

    monkeypatch.setattr(ConfigRepo, "revert", revert)
    at = on_page(signed_in("sam"), "app_pages/history.py")
    next(b for b in at.button if b.label.startswith("Revert my draft")).click().run()
    assert not at.exception
    [message] = [e.value for e in at.error]
    assert message.startswith(shown) and "Traceback" not in message
    if hidden:
        assert hidden not in message and "RuntimeError" not in message
        assert any(r.exc_info and "internal detail" in str(r.exc_info[1]) for r in caplog.records)
    assert any(b.label.startswith("Revert my draft") for b in at.button)  # the page is still there to try again
