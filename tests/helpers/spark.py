"""A real Spark Connect server for the tests of Spark sources, started and stopped by PID.

The server is the full `pyspark` that `make spark` installs in a venv of its own (.data/thirdparty/spark: the
project's venv holds the thin `pyspark-client`, and both provide the module `pyspark`), run by its bundled
`spark-submit` on Java 17, bound to 127.0.0.1 on a free port, the UI off, its warehouse in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import ROOT

SPARK_VENV = ROOT / ".data" / "thirdparty" / "spark"
START_WITHIN_S = 240  # about 40 s on a quiet 2-core machine, several times that beside a busy test run


def spark_home() -> Path | None:
    """The installed pyspark with its Spark Connect server jar, or None."""
    for candidate in sorted(SPARK_VENV.glob("lib/*/site-packages/pyspark")):
        if any((candidate / "jars").glob("spark-connect_*.jar")):
            return candidate
    return None


def missing() -> str | None:
    """Why no server can be started here (the reason a test skips with), or None."""
    if shutil.which("java") is None:
        return "Java is not installed (make spark installs openjdk-17-jre-headless as root)"
    if spark_home() is None:
        return f"the Spark Connect server is not installed in {SPARK_VENV} (make spark)"
    return None


class Server:
    """One Spark Connect server process; `url` is its sc:// address."""

    def __init__(self, folder: Path):
        home = spark_home()
        assert home is not None, missing()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = folder / "spark-connect.log"
        conf = {
            "spark.ui.enabled": "false",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.warehouse.dir": str(folder / "warehouse"),
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder}",
        }
        command = [str(home / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g"]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "spark-internal"]
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(folder), "PYSPARK_PYTHON": "python3"}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.process.pid

    def wait_until_serving(self, within_s: float = START_WITHIN_S) -> None:
        deadline = time.monotonic() + within_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited: {self.log.read_text()[-3000:]}")
            if "Spark Connect server started" in self.log.read_text(errors="replace"):
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start within {within_s:g} s: {self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        """End the server by its PID (its whole process group: spark-submit execs java), politely, then for good."""
        if self.process.poll() is not None:
            return
        os.killpg(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()
