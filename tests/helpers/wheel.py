"""The wheel `pip install <checkout>` builds, built from a copy of the checkout's tracked files.

setuptools builds in the source tree (build/, *.egg-info), so two builds of the checkout at once (two
xdist workers) trip over each other's files; a copy of what git tracks (or would: the work tree's files,
uncommitted changes included, less what .gitignore leaves out) builds alone.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(where: Path) -> Path:
    """Build the checkout's wheel under `where`; returns the wheel's path."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    source = where / "source"
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() or path.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name, follow_symlinks=False)
    wheels = where / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=where,
    )
    (wheel,) = wheels.glob("dashmem-*.whl")
    return wheel
