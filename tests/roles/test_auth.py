"""Sign-in (lib/roles/auth.py): the credentials file, app roles and groups, the cookie key, visible workspaces."""

from __future__ import annotations

from pathlib import Path

import bcrypt
import pytest
import yaml

from lib.roles import auth
from lib.roles.access import OWNER, STEWARD, VIEWER, User

from ..conftest import ROOT

HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()  # a real (cheap) bcrypt hash


def write_users(tmp_path, users) -> Path:
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"usernames": users}), encoding="utf-8")
    return path


@pytest.fixture
def no_streamlit_secrets(streamlit_secrets, monkeypatch):
    """No .streamlit/secrets.toml (conftest's dict stands in for it) and no DASHMEM_COOKIE_KEY."""
    monkeypatch.delenv("DASHMEM_COOKIE_KEY", raising=False)
    return streamlit_secrets


# --------------------------------------------------------------------------- the credentials file


def test_the_demo_users_file_loads_with_the_documented_roles(monkeypatch):
    monkeypatch.delenv("DASHMEM_USERS", raising=False)
    assert auth.users_path() == ROOT / "demo" / "users.yaml"
    credentials = auth.load_credentials()
    users = {name: auth.user_for(name, credentials) for name in credentials["usernames"]}
    assert {name: u.app_role for name, u in users.items()} == {"olivia": OWNER, "sam": STEWARD, "vera": VIEWER}
    # README: olivia-demo, sam-demo, vera-demo
    for name in users:
        assert bcrypt.checkpw(f"{name}-demo".encode(), credentials["usernames"][name]["password"].encode())


def test_dashmem_users_points_at_another_file(tmp_path, monkeypatch):
    path = write_users(tmp_path, {"zoe": {"name": "Zoe", "password": HASH, "roles": ["steward"]}})
    monkeypatch.setenv("DASHMEM_USERS", str(path))
    assert auth.users_path() == path
    assert list(auth.load_credentials()["usernames"]) == ["zoe"]


def test_each_load_is_a_fresh_copy_the_login_widget_may_write_into(tmp_path):
    path = write_users(tmp_path, {"zoe": {"password": HASH, "roles": ["viewer"]}})
    first = auth.load_credentials(path)
    first["usernames"]["zoe"]["logged_in"] = True
    first["usernames"]["zoe"]["roles"].append("owner")
    again = auth.load_credentials(path)
    assert again["usernames"]["zoe"] == {"password": HASH, "roles": ["viewer"]}
    assert "logged_in" not in path.read_text()


def test_a_missing_file_says_where_it_looked_and_what_to_set(tmp_path):
    with pytest.raises(auth.AuthConfigError, match=r"no credentials file at .*nowhere\.yaml; set DASHMEM_USERS"):
        auth.load_credentials(tmp_path / "nowhere.yaml")


@pytest.mark.parametrize("content", ["", "usernames: {}\n", "usernames: [sam]\n", "other: 1\n"])
def test_a_file_without_users_is_refused(tmp_path, content):
    path = tmp_path / "users.yaml"
    path.write_text(content)
    with pytest.raises(auth.AuthConfigError, match="expected a `usernames:` mapping"):
        auth.load_credentials(path)


@pytest.mark.parametrize("password", ["olivia-demo", "", None, "$1$md5crypt"])
def test_a_password_that_is_not_a_bcrypt_hash_is_refused_without_repeating_it(tmp_path, password):
    path = write_users(tmp_path, {"ok": {"password": HASH}, "plain": {"password": password}})
    with pytest.raises(auth.AuthConfigError, match="user 'plain' has no bcrypt-hashed password") as refused:
        auth.load_credentials(path)
    if password:
        assert password not in str(refused.value)


@pytest.mark.parametrize(
    "content",
    [
        f"usernames:\n  'bad name':\n    password: '{HASH}'\n",  # a user name User() refuses
        "usernames:\n  sam: just-a-string\n",  # an entry that is not a mapping
        "usernames:\n  sam: {password: [\n",  # not YAML
    ],
    ids=["bad-user-name", "entry-not-a-mapping", "not-yaml"],
)
def test_any_malformed_credentials_file_is_an_auth_config_error(tmp_path, content):
    path = tmp_path / "users.yaml"
    path.write_text(content)
    with pytest.raises(auth.AuthConfigError, match="users.yaml"):  # names the file the operator must fix
        auth.load_credentials(path)


# --------------------------------------------------------------------------- roles and groups


@pytest.mark.parametrize(
    "roles,expected",
    [
        (["viewer", "steward"], STEWARD),
        (["steward", "owner"], OWNER),
        (["analysts", "owner", "viewer"], OWNER),
        (["analysts"], VIEWER),
        ([], VIEWER),
        (None, VIEWER),
    ],
)
def test_the_app_role_is_the_highest_role_listed_whatever_the_order(roles, expected):
    assert auth.app_role(roles) == expected


def test_a_user_carries_every_role_as_a_group_so_workspaces_can_grant_groups(tmp_path):
    path = write_users(tmp_path, {"sam": {"name": "Sam S", "email": "s@example.com", "password": HASH, "roles": ["steward", "analysts"]}})
    sam = auth.user_for("sam", auth.load_credentials(path))
    assert sam == User("sam", "Sam S", "s@example.com", ("steward", "analysts"), STEWARD)
    meta = {"access": {"owners": ["group:analysts"]}}
    assert auth.visible(sam, {"w": meta}) == ["w"]


def test_visible_lists_workspaces_with_any_role_sorted_by_name_not_slug():
    vera = User("vera")
    metas = {
        "a-slug": {"name": "zebra", "access": {"viewers": ["vera"]}},
        "b-slug": {"name": "Apple", "access": {"stewards": ["vera"]}},
        "c-slug": {"name": "mango", "access": {"owners": ["olivia"]}},  # not hers
        "d-slug": {"access": {"viewers": ["*"]}},  # no name: sorted by its slug
    }
    assert auth.visible(vera, metas) == ["b-slug", "d-slug", "a-slug"]
    assert auth.visible(User("owner1", app_role=OWNER), metas) == ["b-slug", "d-slug", "c-slug", "a-slug"]


# --------------------------------------------------------------------------- the cookie key


def test_the_cookie_key_comes_from_the_environment_first(no_streamlit_secrets, monkeypatch):
    no_streamlit_secrets["auth"] = {"cookie_key": "s" * 40}
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "e" * 32)
    assert auth.cookie_key() == "e" * 32


def test_the_cookie_key_falls_back_to_streamlit_secrets(no_streamlit_secrets):
    no_streamlit_secrets["auth"] = {"cookie_key": "s" * 40}
    assert auth.cookie_key() == "s" * 40


def test_no_cookie_key_is_an_error_naming_both_places(no_streamlit_secrets):
    with pytest.raises(auth.AuthConfigError, match=r"DASHMEM_COOKIE_KEY, or \[auth\] cookie_key"):
        auth.cookie_key()


def test_a_cookie_key_is_measured_in_bytes_not_characters(no_streamlit_secrets, monkeypatch):
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "k" * 31)
    with pytest.raises(auth.AuthConfigError, match="at least 32 bytes"):
        auth.cookie_key()
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "é" * 16)  # 16 characters, 32 bytes in UTF-8
    assert auth.cookie_key() == "é" * 16


def test_a_short_key_in_the_environment_is_not_replaced_by_a_long_one_in_secrets(no_streamlit_secrets, monkeypatch):
    """A misconfigured key is reported, not silently passed over."""
    no_streamlit_secrets["auth"] = {"cookie_key": "s" * 40}
    monkeypatch.setenv("DASHMEM_COOKIE_KEY", "short")
    with pytest.raises(auth.AuthConfigError):
        auth.cookie_key()


# --------------------------------------------------------------------------- the password check and the sign-in cookie


def test_check_password_accepts_the_hash_and_refuses_the_rest():
    credentials = {"usernames": {"ann": {"password": HASH}}}
    assert auth.check_password(credentials, "ann", "pw")
    assert not auth.check_password(credentials, "ann", "PW")
    assert not auth.check_password(credentials, "bob", "pw")
    assert not auth.check_password(credentials, "", "") and not auth.check_password(credentials, "ann", "")


def test_a_session_token_names_its_user_until_it_expires():
    credentials = {"usernames": {"ann": {"password": HASH}}}
    key = "k" * 40
    token, expires = auth.session_token("ann", key, days=1, now=1_000_000)
    assert expires == 1_000_000 + 86400
    assert auth.token_user(token, key, credentials, now=1_000_000 + 10) == "ann"
    assert auth.token_user(token, key, credentials, now=expires + 1) is None  # expired
    assert auth.token_user(token, "x" * 40, credentials, now=1_000_010) is None  # signed with another key
    assert auth.token_user(token[:-2] + "xx", key, credentials, now=1_000_010) is None  # tampered
    assert auth.token_user(token, key, {"usernames": {}}, now=1_000_010) is None  # the user was removed
    assert auth.token_user(None, key, credentials) is None and auth.token_user("garbage", key, credentials) is None


def test_a_cookie_streamlit_authenticator_set_still_signs_in():
    import time

    import jwt

    old = jwt.encode({"username": "ann", "exp_date": time.time() + 3600}, "k" * 40, algorithm="HS256")
    assert auth.token_user(old, "k" * 40, {"usernames": {"ann": {"password": HASH}}}) == "ann"


def test_an_unknown_user_costs_a_bcrypt_check_like_a_known_one(monkeypatch):
    """Refusing an unknown name without hashing answered faster than a wrong password, telling who has an account."""
    import bcrypt

    checked = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda pw, hashed: checked.append(hashed) or real(pw, hashed))
    credentials = {"usernames": {"sam": {"password": HASH}}}
    assert auth.check_password(credentials, "nobody", "guess") is False
    assert auth.check_password(credentials, "sam", "guess") is False
    assert len(checked) == 2 and checked[0].startswith(b"$2b$12$")
