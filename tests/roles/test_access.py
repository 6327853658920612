"""Roles (lib/roles/access.py): who has which role in a workspace, and what each role may do.

The expected permissions are written out here by hand from the design (decision 6:
owner all; steward edits, saves, proposes, publishes only where the policy allows;
viewer views, refreshes, queries), not derived from `access.ACTIONS`, so a change to
that table is a failing test, not a silent change of who may do what.
"""

from __future__ import annotations

import dataclasses

import pytest

from lib.roles import access
from lib.roles.access import OPERATOR, OWNER, STEWARD, VIEWER, PermissionDenied, User

META = {
    "name": "Sales",
    "access": {"owners": ["olivia"], "stewards": ["sam", "group:analysts"], "viewers": ["vera", "sam"]},
    "policy": {"stewards_can_publish": False},
}

OLIVIA, SAM, VERA = User("olivia"), User("sam"), User("vera")
ANN = User("ann", groups=("analysts",))  # a steward only through her group
NOBODY = User("nobody")

# Who may do what, per role, with the default policy (stewards do not publish).
MAY = {
    VIEWER: {"view", "refresh", "query"},
    STEWARD: {"view", "refresh", "query", "edit", "save", "undo", "revert", "propose", "pin_data", "full_reload"},
    OWNER: {"view", "refresh", "query", "edit", "save", "undo", "revert", "propose", "pin_data", "full_reload", "publish", "reject", "manage_access"},
}
EVERY_ACTION = sorted(MAY[OWNER])


# --------------------------------------------------------------------------- role_of


@pytest.mark.parametrize("user,role", [(OLIVIA, OWNER), (VERA, VIEWER), (ANN, STEWARD), (NOBODY, None)])
def test_role_of_reads_the_access_lists(user, role):
    assert access.role_of(user, META) == role


def test_the_highest_of_several_matching_roles_wins():
    assert access.role_of(SAM, META) == STEWARD  # listed as a viewer too
    both = {"access": {"viewers": ["group:analysts"], "owners": ["ann"]}}
    assert access.role_of(ANN, both) == OWNER


def test_a_star_grants_everyone_that_role_and_no_more():
    meta = {"access": {"owners": ["olivia"], "viewers": ["*"]}}
    assert access.role_of(NOBODY, meta) == VIEWER
    assert access.role_of(OLIVIA, meta) == OWNER


def test_a_group_is_matched_only_as_group_name_not_as_a_user_name():
    meta = {"access": {"stewards": ["group:analysts"], "owners": ["analysts"]}}
    assert access.role_of(ANN, meta) == STEWARD  # her group, not a user called "analysts"
    assert access.role_of(User("analysts"), meta) == OWNER
    assert access.role_of(User("analysts"), {"access": {"stewards": ["group:analysts"]}}) is None


@pytest.mark.parametrize("meta", [None, {}, {"access": None}, {"access": {"owners": None}}])
def test_a_workspace_without_access_lists_grants_nothing(meta):
    assert access.role_of(SAM, meta) is None


def test_the_apps_owners_own_every_workspace_even_unlisted_ones():
    app_owner = User("root-admin", app_role=OWNER)
    assert access.role_of(app_owner, {}) == OWNER
    assert access.role_of(app_owner, {"access": {"viewers": ["root-admin"]}}) == OWNER
    assert access.can(app_owner, "manage_access", META)


def test_an_app_steward_gets_no_workspace_role_from_the_app_role_alone():
    app_steward = User("stella", app_role=STEWARD)
    assert access.role_of(app_steward, META) is None
    assert not access.can(app_steward, "view", META)


def test_only_the_operator_object_is_the_operator_not_a_user_with_its_name():
    assert access.role_of(OPERATOR, {}) == OWNER
    impostor = User("operator")  # what a sign-in with that name would give
    assert access.role_of(impostor, {}) is None
    assert access.role_of(impostor, META) is None


# --------------------------------------------------------------------------- can / require


@pytest.mark.parametrize("action", EVERY_ACTION)
@pytest.mark.parametrize("user,role", [(VERA, VIEWER), (SAM, STEWARD), (OLIVIA, OWNER)])
def test_each_role_may_do_exactly_its_actions(user, role, action):
    assert access.can(user, action, META) == (action in MAY[role])


@pytest.mark.parametrize("action", EVERY_ACTION)
def test_without_a_role_nothing_is_allowed(action):
    assert not access.can(NOBODY, action, META)


def test_the_table_of_actions_names_no_action_this_test_does_not_know():
    assert set(access.ACTIONS) == set(EVERY_ACTION)


def test_stewards_publish_only_where_the_policy_says_so():
    allowing = {**META, "policy": {"stewards_can_publish": True}}
    assert access.can(SAM, "publish", allowing)
    assert not access.can(SAM, "publish", META)
    assert not access.can(SAM, "publish", {k: v for k, v in META.items() if k != "policy"})  # the default is no
    assert not access.can(VERA, "publish", allowing)  # the policy is about stewards only
    assert not access.can(SAM, "reject", allowing)  # and about publishing only


def test_an_unknown_action_is_an_error_not_a_denial():
    with pytest.raises(KeyError, match="delete_everything"):
        access.can(OLIVIA, "delete_everything", META)


def test_require_says_who_what_and_where():
    with pytest.raises(PermissionDenied) as denied:
        access.require(VERA, "edit", META, "sales")
    assert str(denied.value) == "vera (viewer) may not edit in workspace 'sales'"
    with pytest.raises(PermissionDenied, match=r"^nobody \(no access\) may not view$"):
        access.require(NOBODY, "view", META)
    access.require(SAM, "edit", META, "sales")  # allowed: no exception


def test_a_steward_refused_publishing_is_told_to_propose():
    with pytest.raises(PermissionDenied, match="policy asks stewards to propose and an owner to publish"):
        access.require(SAM, "publish", META, "sales")
    with pytest.raises(PermissionDenied) as denied:
        access.require(VERA, "publish", META, "sales")
    assert "propose" not in str(denied.value)  # the hint is for stewards, who can propose


def test_permission_denied_is_a_permission_error():
    assert issubclass(PermissionDenied, PermissionError)


# --------------------------------------------------------------------------- governance and app roles


@pytest.mark.parametrize(
    "change",
    [
        lambda m: {**m, "access": {**m["access"], "owners": ["olivia", "sam"]}},  # a steward making themselves owner
        lambda m: {**m, "policy": {"stewards_can_publish": True}},  # or allowing themselves to publish
        lambda m: {k: v for k, v in m.items() if k != "policy"},  # removing the policy is a change too
    ],
)
def test_only_an_owner_changes_who_may_do_what(change):
    after = change(META)
    with pytest.raises(PermissionDenied, match="manage_access"):
        access.require_governance_unchanged_or_owner(SAM, META, after, "sales")
    access.require_governance_unchanged_or_owner(OLIVIA, META, after, "sales")


def test_changing_anything_else_needs_no_owner():
    access.require_governance_unchanged_or_owner(SAM, META, {**META, "name": "Sales (renamed)"})


def test_the_role_checked_for_governance_is_the_one_before_the_change():
    grab = {**META, "access": {**META["access"], "owners": ["sam"]}}
    with pytest.raises(PermissionDenied):  # being an owner in the new file does not count
        access.require_governance_unchanged_or_owner(SAM, META, grab)


def test_app_roles_gate_app_wide_actions_by_rank():
    access.require_app_role(User("o", app_role=OWNER), STEWARD, "create workspaces")
    access.require_app_role(User("s", app_role=STEWARD), STEWARD, "create workspaces")
    with pytest.raises(PermissionDenied, match=r"^v \(viewer\) may not create workspaces; it needs the steward role$"):
        access.require_app_role(User("v"), STEWARD, "create workspaces")


# --------------------------------------------------------------------------- users


@pytest.mark.parametrize("name", ["", "a b", "../etc", "a..b", "x.lock", "-dash", ".hidden", "a/b", "x" * 65, "ü"])
def test_user_names_that_could_not_be_a_git_branch_part_are_refused(name):
    with pytest.raises(ValueError, match="invalid user name"):
        User(name)


@pytest.mark.parametrize("name", ["a", "sam.smith", "s_m-1", "ann@example.com", "x" * 64])
def test_ordinary_user_names_are_accepted(name):
    assert User(name).name == name


def test_git_email_is_the_users_or_a_placeholder_that_cannot_be_delivered():
    assert User("sam", email="sam@example.com").git_email == "sam@example.com"
    assert User("sam").git_email == "sam@users.dashmem.invalid"  # .invalid: reserved, never resolves


def test_users_are_immutable_and_viewers_by_default():
    user = User("sam")
    assert user.app_role == VIEWER and user.groups == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        user.app_role = OWNER  # type: ignore[misc]


def test_the_user_name_rule_is_the_schemas_author_pattern():
    """Decision 12: a rule's author is a user name; the schema and access.USER_NAME_RE must say the same."""
    import json

    from ..conftest import ROOT

    task = json.loads((ROOT / "schemas" / "task.schema.json").read_text())
    assert task["$defs"]["rule"]["properties"]["author"]["pattern"] == access.USER_NAME_RE.pattern


# --------------------------------------------------------------------------- changing the access lists

LISTS = {"owners": ["olivia"], "stewards": ["sam"], "viewers": ["*"]}


def test_a_grant_reads_role_colon_name_for_people_groups_and_everyone():
    assert access.Grant.parse("steward:bob") == access.Grant(STEWARD, "bob")
    assert access.Grant.parse("viewer:group:ops") == access.Grant(VIEWER, "group:ops")
    assert access.Grant.parse(" Owners:alice ") == access.Grant(OWNER, "alice")  # the list's name reads as meant
    assert str(access.Grant.parse("viewer:*")) == "viewer:*"


@pytest.mark.parametrize(
    "text, says",
    [
        ("bob", "ROLE:NAME"),
        ("admin:bob", "owner, steward, viewer"),
        ("steward:", "user name"),
        ("steward:bob smith", "user name"),
        ("viewer:group:", "group:NAME"),
    ],
)
def test_a_malformed_grant_says_what_is_allowed(text, says):
    with pytest.raises(access.AccessChangeRefused, match=says):
        access.Grant.parse(text)


def test_adding_and_removing_changes_only_the_named_lists_and_says_what_it_did():
    before = {role: list(names) for role, names in LISTS.items()}
    after, done = access.changed_access(LISTS, add=[access.Grant(STEWARD, "bob"), access.Grant(VIEWER, "group:ops")], remove=[access.Grant(VIEWER, "*")])
    assert after == {"owners": ["olivia"], "stewards": ["sam", "bob"], "viewers": ["group:ops"]}
    assert len(done) == 3 and any("bob" in line and "stewards" in line for line in done)
    assert LISTS == before  # the lists given are not changed in place


def test_adding_an_entry_already_there_changes_nothing_and_removing_one_not_there_is_refused():
    assert access.changed_access(LISTS, add=[access.Grant(STEWARD, "sam")]) == (LISTS, [])
    with pytest.raises(access.AccessChangeRefused, match=r"bob is not among the stewards \(they are: sam\)"):
        access.changed_access(LISTS, remove=[access.Grant(STEWARD, "bob")])


def test_the_last_owner_is_kept_but_an_owner_may_hand_over_to_another():
    with pytest.raises(access.AccessChangeRefused, match="at least one owner"):
        access.changed_access(LISTS, remove=[access.Grant(OWNER, "olivia")])
    after, _ = access.changed_access(LISTS, add=[access.Grant(OWNER, "sam")], remove=[access.Grant(OWNER, "olivia")])
    assert after["owners"] == ["sam"]


def test_the_principal_rule_is_the_schemas():
    import json

    from ..conftest import ROOT

    schema = json.loads((ROOT / "schemas" / "workspace.schema.json").read_text(encoding="utf-8"))
    assert access.PRINCIPAL_RE.pattern == schema["$defs"]["principals"]["items"]["pattern"]
    assert set(access.ROLE_LISTS.values()) == set(schema["properties"]["access"]["properties"])
