"""A real full disk: a small tmpfs mounted for one test and filled so that exactly so many bytes stay free.

Mounting needs root (the tests run as root here); where it is not allowed, the test is skipped and says why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILLER = ".filler"  # the file that takes up the space; a dot-file, so no workspace or git command looks at it


@contextlib.contextmanager
def small_disk(where: Path, size: int = 4 << 20) -> Iterator[Path]:
    """A tmpfs of `size` bytes mounted on the (new) folder `where` while the block runs."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a full disk is tested on a small tmpfs, and mounting one needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"a full disk is tested on a small tmpfs, which cannot be mounted here: {proc.stderr.strip() or proc.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], capture_output=True)  # lazy: git's batch readers may still have it open


def free_bytes(disk: Path) -> int:
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize


def leave_free(disk: Path, free: int) -> None:
    """Fill `disk` so that exactly `free` bytes (a whole number of its blocks) stay free."""
    block = os.statvfs(disk).f_frsize
    assert free % block == 0, f"tmpfs counts whole blocks of {block} bytes"
    filler = disk / FILLER
    with open(filler, "ab", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    used = -(-filler.stat().st_size // block) * block  # the blocks the filler holds
    os.truncate(filler, max(0, used - free))
    assert free_bytes(disk) == free, (free_bytes(disk), free)


def make_room(disk: Path) -> None:
    """Give the disk its space back."""
    (disk / FILLER).unlink(missing_ok=True)
