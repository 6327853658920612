"""When Review offers a draft's Publish button, and when it may be clicked: lib.repo.publish_rules."""

from __future__ import annotations

import pytest

from lib.core.diagnostics import ERROR, WARNING, Diagnostic, ValidationFailed
from lib.memory import workspace
from lib.ops import publish
from lib.repo.publish_rules import BLOCKED_HELP, publish_button
from lib.roles.access import PermissionDenied, User

OLIVIA = User("olivia", app_role="owner")  # the app's owner
ANN = User("ann", app_role="steward")  # owner of the workspace below, steward in the app
SAM = User("sam", app_role="steward")
VERA = User("vera")


def meta(stewards_can_publish=False, require_valid=True) -> dict:
    return {
        "name": "x",
        "access": {"owners": ["ann"], "stewards": ["sam"], "viewers": ["*"]},
        "policy": {"stewards_can_publish": stewards_can_publish, "require_valid_to_publish": require_valid},
    }


ERRORS = [Diagnostic("bad_column", ERROR, "column gatez does not exist", "dashboard.yaml", 4)]
WARNINGS = [Diagnostic("unused", WARNING, "a filter no component uses", "dashboard.yaml", 9)]


@pytest.mark.parametrize(
    "user, stewards_can_publish, own, shown",
    [
        (OLIVIA, False, False, True),  # the app's owners publish anyone's draft
        (ANN, False, False, True),  # so do the workspace's owners
        (ANN, False, True, True),
        (SAM, False, True, False),  # a steward proposes when the policy says so
        (SAM, True, True, True),  # and publishes their own draft where it allows it
        (SAM, True, False, False),  # but never someone else's
        (VERA, True, True, False),  # a viewer never
    ],
)
def test_who_sees_the_publish_button(user, stewards_can_publish, own, shown):
    button = publish_button(user, meta(stewards_can_publish), own=own, diagnostics=[])
    assert button.shown is shown
    assert button.enabled is shown  # no errors: enabled wherever it is shown


def test_errors_disable_it_where_the_policy_asks_for_valid_drafts():
    blocked = publish_button(OLIVIA, meta(), own=False, diagnostics=ERRORS)
    assert blocked.shown and not blocked.enabled and blocked.help == BLOCKED_HELP
    assert publish_button(OLIVIA, meta(), own=False, diagnostics=WARNINGS).enabled  # warnings never block
    assert publish_button(OLIVIA, meta(), own=False, diagnostics=None).enabled  # checks not run (no draft folder)
    assert publish_button(OLIVIA, meta(require_valid=False), own=False, diagnostics=ERRORS).enabled
    assert publish_button(OLIVIA, {"access": {"owners": ["olivia"]}}, own=False, diagnostics=ERRORS).enabled is False  # default: valid only


def test_the_button_matches_what_publishing_enforces(config_repo):
    """Shown exactly where publish_branch does not refuse on roles; disabled exactly where it refuses on the checks."""
    repo = config_repo
    slug = "gdp-explorer"  # stewards_can_publish: true; sam is a steward, olivia the owner
    d = repo.draft(SAM, slug)
    task = workspace.load(d.workspace_path)[0].data["task"]
    task["goal"] = "sam's change"
    repo.save(SAM, slug, {"task": task}, "sam's change")
    d = repo.draft(OLIVIA, slug)
    dashboard = workspace.load(d.workspace_path)[0].data["dashboard"]
    dashboard["components"][0]["query"] = "SELECT 1 AS value FROM gdp_missing_table"
    repo.save(OLIVIA, slug, {"dashboard": dashboard}, "break a query")
    m = repo.meta_for(OLIVIA, slug)
    olivias = repo.branch_name(OLIVIA, slug)

    assert not publish_button(SAM, m, own=False, diagnostics=[]).shown
    with pytest.raises(PermissionDenied):
        publish.publish_branch(repo, SAM, slug, olivias)
    assert publish_button(SAM, m, own=True, diagnostics=[]).shown
    publish.publish_branch(repo, SAM, slug, repo.branch_name(SAM, slug))

    from lib.artifacts import checks

    found = checks.validate_workspace(d.workspace_path)
    assert publish_button(OLIVIA, m, own=True, diagnostics=found).shown
    assert not publish_button(OLIVIA, m, own=True, diagnostics=found).enabled
    with pytest.raises(ValidationFailed):
        publish.publish_branch(repo, OLIVIA, slug, olivias)
