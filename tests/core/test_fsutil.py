"""lib.core.fsutil: replacing files and symlinks in one step, on real files."""

from __future__ import annotations

import os
import stat

import pytest

from lib.core import fsutil


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_write_creates_and_replaces_text_and_bytes(tmp_path):
    target = tmp_path / "file.yaml"
    fsutil.atomic_write(target, "a: 1\n")
    assert target.read_text() == "a: 1\n"
    fsutil.atomic_write(target, b"\x00\xffbytes")
    assert target.read_bytes() == b"\x00\xffbytes"
    fsutil.atomic_write(str(target), "é\n")  # a str path, text as UTF-8
    assert target.read_bytes() == "é\n".encode("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.yaml"]  # no temporary file left


def test_readers_of_the_old_file_keep_it_and_new_readers_get_the_new_one(tmp_path):
    target = tmp_path / "export.html"
    target.write_text("old")
    with open(target) as reader:
        fsutil.atomic_write(target, "new")
        assert reader.read() == "old"  # the old file was replaced, not rewritten in place
    assert target.read_text() == "new"


def test_new_files_follow_the_umask_not_mkstemps_private_mode(tmp_path, umask_022):
    target = tmp_path / "shared.txt"
    fsutil.atomic_write(target, "x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    os.umask(0o077)
    fsutil.atomic_write(target, "y")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_rename_leaves_the_target_and_no_temporary_file(tmp_path):
    target = tmp_path / "folder-in-the-way"
    (target / "child").mkdir(parents=True)  # os.replace cannot put a file over a non-empty folder
    with pytest.raises(OSError):
        fsutil.atomic_write(target, "x")
    assert (target / "child").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder-in-the-way"]


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    with pytest.raises(TypeError):
        fsutil.atomic_write(tmp_path / "f", 12345)  # pyright: ignore[reportArgumentType]  # not text or bytes, on purpose
    assert list(tmp_path.iterdir()) == []


def test_write_temp_lets_several_files_be_replaced_together(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    temps = [(fsutil.write_temp(a, "A", fsync=False), a), (fsutil.write_temp(b, "B"), b)]
    assert not a.exists() and not b.exists()
    assert all(os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith(".") for tmp, _ in temps)
    for tmp, target in temps:
        os.replace(tmp, target)
    assert (a.read_text(), b.read_text()) == ("A", "B")


def test_replace_symlink_swaps_the_pointer_in_one_step(tmp_path):
    pointer = tmp_path / "PINNED"
    fsutil.replace_symlink(pointer, "first@x")
    assert os.readlink(pointer) == "first@x"
    fsutil.replace_symlink(pointer, "2026-01-01T00:00:00+00:00")
    assert os.readlink(pointer) == "2026-01-01T00:00:00+00:00"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PINNED"]
