"""A local Spark standalone cluster run by the project itself: one master and two workers on 127.0.0.1.

The processes are the pyspark distribution's own (``org.apache.spark.deploy.master.Master`` and
``...worker.Worker`` through its ``bin/spark-class``), nothing downloaded. Each worker has one core and a small
memory share, and its own work and scratch directories; the workers' environment carries none of the caller's
``PYTHONPATH`` or Spark variables. Logs, work directories and the PID record live under one git-ignored
directory (``.run/spark-cluster`` by default). The same class backs
``rebalance-monitor spark-cluster start|stop|status`` and the ``spark_cluster`` test fixture; readiness is every
worker ALIVE in the master's JSON status (``http://127.0.0.1:<webui>/json/``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from connectors import jvm_artifacts
from connectors.processes import free_port, pid_alive, port_is_open

_STATE_FILE = "cluster.json"
# Variables of the caller's shell that would leak into the daemons and, through them, into executors.
_NOT_INHERITED = (
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "SPARK_LOCAL_DIRS",
    "SPARK_WORKER_DIR",
    "SPARK_MASTER_HOST",
    "SPARK_MASTER_PORT",
)


def default_home() -> Path:
    return jvm_artifacts.PROJECT_ROOT / ".run" / "spark-cluster"


def spark_home() -> Path:
    """The pyspark distribution's directory: its ``jars/`` and ``bin/spark-class`` run the daemons."""
    import pyspark  # local import: only starting the cluster needs it

    return Path(pyspark.__file__).resolve().parent


class SparkClusterError(RuntimeError):
    """The local cluster could not be started, reached or stopped; the message says why."""


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    port: int
    webui_port: int


@dataclass(frozen=True)
class ClusterInfo:
    home: str
    master: ProcessInfo
    workers: list[ProcessInfo] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        """What ``[spark] master`` names: ``spark://127.0.0.1:<port>``."""
        return f"spark://127.0.0.1:{self.master.port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.master.webui_port}"


class LocalSparkCluster:
    """A standalone master and ``workers`` workers (``worker_cores`` cores, ``worker_memory`` each) under ``home``."""

    def __init__(
        self,
        home: Path | str | None = None,
        master_port: int | None = None,
        webui_port: int | None = None,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        stop_grace_s: float = 10.0,
    ) -> None:
        if workers < 1 or worker_cores < 1:
            raise SparkClusterError("a cluster needs at least one worker with at least one core")
        self.home = Path(home if home is not None else default_home()).resolve()
        self._master_port = master_port
        self._webui_port = webui_port
        self._workers = workers
        self._worker_cores = worker_cores
        self._worker_memory = worker_memory
        self._daemon_memory = daemon_memory
        self._stop_grace_s = stop_grace_s

    # -- state on disk -------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.home / _STATE_FILE

    def _recorded(self) -> ClusterInfo | None:
        try:
            data = json.loads(self._state_path.read_text())
            return ClusterInfo(data["home"], ProcessInfo(**data["master"]), [ProcessInfo(**w) for w in data["workers"]])
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _record(self, info: ClusterInfo) -> None:
        self._state_path.write_text(json.dumps(asdict(info)))

    def info(self) -> ClusterInfo | None:
        """The running cluster recorded under ``home`` (its master alive), or None."""
        info = self._recorded()
        return info if info is not None and pid_alive(info.master.pid) else None

    @property
    def master_url(self) -> str:
        return self._require().master_url

    def status(self) -> dict:
        """The master's own JSON status (workers with their state, cores, memory; applications)."""
        info = self._require()
        try:
            with urllib.request.urlopen(f"{info.webui_url}/json/", timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise SparkClusterError(f"the master's status at {info.webui_url}/json/ did not answer: {error}") from None

    def _alive_webui_ports(self) -> list[str]:
        """The web UI port of every worker the master counts ALIVE now."""
        return [
            worker.get("webuiaddress", "").rsplit(":", 1)[-1]
            for worker in self.status().get("workers", [])
            if worker.get("state") == "ALIVE"
        ]

    def alive_workers(self) -> int:
        """How many workers the master counts ALIVE now."""
        return len(self._alive_webui_ports())

    def registered(self, workers: list[ProcessInfo]) -> bool:
        """Whether the master counts each of ``workers`` ALIVE (told apart by their web UI ports)."""
        alive = set(self._alive_webui_ports())
        return all(str(worker.webui_port) in alive for worker in workers)

    def running_workers(self) -> list[int]:
        """Indexes of the recorded workers whose process is alive."""
        info = self.info()
        return [] if info is None else [i for i, w in enumerate(info.workers) if pid_alive(w.pid)]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout_s: float = 120.0) -> ClusterInfo:
        """Start the master and the workers (or return the cluster already running under ``home``) and wait
        until the master counts every worker ALIVE."""
        running = self.info()
        if running is not None and all(pid_alive(w.pid) for w in running.workers):
            return running
        if running is not None or self._recorded() is not None:
            self.stop()
        self.home.mkdir(parents=True, exist_ok=True)
        port = self._master_port or free_port()
        webui_port = self._webui_port or free_port()
        for wanted in {port, webui_port}:
            if port_is_open(wanted):
                raise SparkClusterError(f"port {wanted} on 127.0.0.1 is already in use; choose another")
        master = ProcessInfo(
            self._launch(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui_port)],
            ),
            port,
            webui_port,
        )
        info = ClusterInfo(str(self.home), master)
        self._record(info)
        try:
            self._wait(lambda: port_is_open(webui_port) and port_is_open(port), [master.pid], "the master", timeout_s)
            workers = []
            for index in range(self._workers):
                workers.append(self._launch_worker(index, info.master_url))
                info = ClusterInfo(str(self.home), master, list(workers))
                self._record(info)
            self._wait(
                lambda: self.registered(workers),
                [p.pid for p in [master, *workers]],
                f"{self._workers} workers registered",
                timeout_s,
            )
        except BaseException:
            self.stop()
            raise
        return info

    def stop(self) -> bool:
        """Stop the workers (with their executors) and the master by PID: SIGTERM, SIGKILL after the grace
        period. True if any was running."""
        info = self._recorded()
        self._state_path.unlink(missing_ok=True)
        if info is None:
            return False
        pids = [w.pid for w in info.workers] + [info.master.pid]
        alive = [pid for pid in pids if pid_alive(pid)]
        self._signal_groups([w.pid for w in info.workers], signal.SIGTERM)
        self._signal_groups([info.master.pid], signal.SIGTERM)
        _wait_exited(pids, self._stop_grace_s)
        self._signal_groups(pids, signal.SIGKILL)  # what is left of each group: executors, Python workers
        _wait_exited(pids, 10.0)
        stuck = [pid for pid in pids if pid_alive(pid)]
        if stuck:
            raise SparkClusterError(f"Spark processes {stuck} did not exit after SIGKILL")
        return bool(alive)

    def kill_worker(self, index: int) -> int:
        """SIGKILL worker ``index`` and everything it launched (its executor and the executor's Python workers):
        a lost machine. Returns the worker's PID."""
        worker = self._require().workers[index]
        self._signal_groups([worker.pid], signal.SIGKILL)
        _wait_exited([worker.pid], 10.0)
        return worker.pid

    def start_worker(self, index: int, timeout_s: float = 120.0) -> ProcessInfo:
        """Start worker ``index`` again if it is not running (after ``kill_worker``) and wait until it is
        registered; the other processes keep running."""
        info = self._require()
        worker = info.workers[index]
        if not pid_alive(worker.pid):
            worker = self._launch_worker(index, info.master_url)
            workers = [worker if i == index else w for i, w in enumerate(info.workers)]
            self._record(ClusterInfo(info.home, info.master, workers))
        self._wait(
            lambda: self.registered([worker]), [info.master.pid, worker.pid], f"worker-{index} registered", timeout_s
        )
        return worker

    # -- helpers --------------------------------------------------------------------------------
    def _require(self) -> ClusterInfo:
        info = self.info()
        if info is None:
            raise SparkClusterError(f"no Spark cluster is running under {self.home}")
        return info

    def _launch_worker(self, index: int, master_url: str) -> ProcessInfo:
        name = f"worker-{index}"
        work_dir = self.home / name / "work"
        work_dir.mkdir(parents=True, exist_ok=True)
        webui_port = free_port()
        pid = self._launch(
            name,
            "org.apache.spark.deploy.worker.Worker",
            [
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(webui_port),
                "--cores",
                str(self._worker_cores),
                "--memory",
                self._worker_memory,
                "--work-dir",
                str(work_dir),
                master_url,
            ],
        )
        return ProcessInfo(pid, 0, webui_port)

    def _launch(self, name: str, main_class: str, args: list[str]) -> int:
        """One daemon through pyspark's ``bin/spark-class`` (which execs the JVM, so the PID is the JVM's), in a
        process group of its own (a worker's executors join it), output to ``<home>/<name>/logs``, scratch
        space in ``<home>/<name>/local``."""
        home = spark_home()
        log_dir = self.home / name / "logs"
        scratch = self.home / name / "local"
        for directory in (log_dir, scratch):
            directory.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env |= {
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self._daemon_memory,
            "SPARK_LOCAL_DIRS": str(scratch),
        }
        # A configuration directory of the cluster's own, so a user's spark-env.sh or spark-defaults.conf
        # (in pyspark's conf/ or $SPARK_CONF_DIR) cannot change it.
        conf_dir = self.home / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        env["SPARK_CONF_DIR"] = str(conf_dir)
        output = open(log_dir / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), main_class, *args],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.home / name,
            start_new_session=True,
        )
        output.close()
        return process.pid

    def _wait(self, ready, pids: list[int], what: str, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [pid for pid in pids if not pid_alive(pid)]
            if dead:
                raise SparkClusterError(f"Spark process {dead[0]} exited while waiting for {what}; logs in {self.home}")
            try:
                if ready():
                    return
            except SparkClusterError:
                pass
            time.sleep(0.5)
        raise SparkClusterError(f"no {what} within {timeout_s:.0f}s; logs in {self.home}")

    @staticmethod
    def _signal_groups(pids: list[int], sig: signal.Signals) -> None:
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_exited(pids: list[int], seconds: float) -> None:
    """Until none of ``pids`` is alive, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(0.1)
