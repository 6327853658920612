"""Replacing files in one step: readers see the old file or the new one, never half of one.

One way to do it everywhere (workspace files, exports, the warehouse's small
pointer files): write a temporary file in the same folder (so the rename is
atomic), flush it to disk, then `os.replace` it over the target.

New files get the permissions of any new file (0o666 less the umask, or what
the folder's default ACL says), not mkstemp's private 0o600, so a config repo
stays readable by its group and an export can be shared, as the umask intends.
"""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(target: Path | str, content: str | bytes, *, fsync: bool = True) -> None:
    """Replace `target` with `content` (text is written as UTF-8) in one step.

    With `fsync` (the default) the bytes are on disk before the rename makes
    them visible, so a power cut leaves the old file or the new one.
    """
    target = Path(target)
    tmp = write_temp(target, content, fsync=fsync)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def write_temp(target: Path | str, content: str | bytes, *, fsync: bool = True) -> str:
    """A new file next to `target` (same folder, so a rename onto `target` is atomic) holding `content`; returns its path.

    For writers that replace several files together (write every temporary file
    first, then rename them all); the caller removes the file if it does not rename it.
    """
    target = Path(target)
    data = content.encode("utf-8") if isinstance(content, str) else content
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)  # the kernel applies the umask, as for any file a program creates
            break
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:  # the rename must never publish a file whose bytes are not on disk yet
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def replace_symlink(pointer: Path | str, target: str) -> None:
    """Make the symlink `pointer` name `target`, atomically (a symlink swapped in by rename).

    A symlink carries no data, so there is nothing to flush: on ext4, renaming a
    new regular file over an old one forces a data flush, renaming a symlink does not.
    """
    pointer = Path(pointer)
    tmp = pointer.with_name(f".{pointer.name}.{os.urandom(4).hex()}.tmp")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, pointer)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
