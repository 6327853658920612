"""`make test` runs the suite on four workers with `--dist loadgroup`: the tests of a module that share a costly
module-scoped fixture (a Spark Connect server, a `streamlit run`, a 5M-row table) form one group (tests/conftest.py),
and a group runs on one worker, so the fixture is made once. With pytest 9.2 and pytest-xdist 3.8 the groups were
silently ignored (xdist names a group by rewriting `item._nodeid`, which pytest 9.2 no longer reads) and every worker
made such fixtures again. This runs the suite's own grouping hook on a probe module in a fresh pytest on two workers.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import ROOT

PROBE = """
import os

import pytest


@pytest.fixture(scope="module")
def made_in():
    return os.getpid()


@pytest.mark.parametrize("n", range(8))
def test_shares_the_module_fixture(made_in, n):
    assert made_in  # the probe: which worker ran it is what the test below reads
"""


def test_a_module_sharing_a_fixture_runs_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the suite's grouping hook)\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path / "test_probe.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED \S*test_shares_the_module_fixture", done.stdout)
    assert len(workers) == 8, done.stdout[-3000:]
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}: --dist loadgroup ignored the suite's groups"
