"""An S3-compatible server run by the project itself: gaul/s3proxy over a local directory, on 127.0.0.1.

The server is Maven Central's ``org.gaul:s3proxy`` (profile ``s3proxy`` of ``jvm/pom.xml``) with jclouds'
filesystem backend: every bucket is a directory under ``home``/data. It checks AWS v2/v4 signatures against
one access key and secret, listens on 127.0.0.1 only, and is stopped by the PID it recorded. Readiness is an
answer to an unsigned request on its port. Why s3proxy and not MinIO: ``docs/design/object-store.md``.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from connectors import jvm_artifacts
from connectors.processes import free_port, pid_alive, port_is_open, stop_process

DEFAULT_HOME = jvm_artifacts.PROJECT_ROOT / ".run" / "s3"
_STATE_FILE = "s3.json"
REGION = "us-east-1"


class S3ServerError(RuntimeError):
    """The local S3 server could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class S3ServerInfo:
    pid: int
    port: int
    home: str
    access_key: str
    secret_key: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def storage_env(self) -> dict[str, str]:
        """``RRM__STORAGE__`` settings that point the monitor at this server."""
        return {
            "RRM__STORAGE__ENDPOINT": self.endpoint,
            "RRM__STORAGE__REGION": REGION,
            "RRM__STORAGE__PATH_STYLE_ACCESS": "true",
            "RRM__STORAGE__ALLOW_HTTP": "true",
            "RRM__STORAGE__ACCESS_KEY": self.access_key,
            "RRM__STORAGE__SECRET_KEY": self.secret_key,
        }

    def bucket_dir(self, bucket: str) -> Path:
        """Where the filesystem backend keeps ``bucket``'s objects (one file per key)."""
        return Path(self.home) / "data" / bucket


class LocalS3Server:
    """One s3proxy on 127.0.0.1 with its buckets under ``home``/data."""

    def __init__(self, home: Path | str = DEFAULT_HOME, port: int | None = None, heap: str = "256m") -> None:
        self.home = Path(home).resolve()
        self._port = port
        self._heap = heap

    @property
    def _state_path(self) -> Path:
        return self.home / _STATE_FILE

    def info(self) -> S3ServerInfo | None:
        """The running server recorded under ``home``, or None (stale records are ignored)."""
        try:
            info = S3ServerInfo(**json.loads(self._state_path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return info if pid_alive(info.pid) else None

    def start(self, timeout_s: float = 60.0) -> S3ServerInfo:
        """Start the server (or return the one already running under ``home``)."""
        running = self.info()
        if running is not None:
            return running
        port = self._port or free_port()
        if port_is_open(port):
            raise S3ServerError(f"port {port} on 127.0.0.1 is already in use; choose another")
        jvm_artifacts.jars("s3proxy")  # resolve on first use
        data, logs = self.home / "data", self.home / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        access_key, secret_key = "rrm-" + secrets.token_hex(6), secrets.token_hex(20)
        properties = self.home / "s3proxy.properties"
        properties.write_text(
            "".join(
                f"{k}={v}\n"
                for k, v in {
                    "s3proxy.endpoint": f"http://127.0.0.1:{port}",
                    "s3proxy.authorization": "aws-v2-or-v4",
                    "s3proxy.identity": access_key,
                    "s3proxy.credential": secret_key,
                    "jclouds.provider": "filesystem",
                    "jclouds.filesystem.basedir": str(data),
                    "jclouds.region": REGION,
                }.items()
            )
        )
        properties.chmod(0o600)
        stdout = open(logs / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [
                "java",
                f"-Xmx{self._heap}",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",  # a test server: C1 only, less start-up CPU
                "-cp",
                str(jvm_artifacts.jar_dir("s3proxy") / "*"),
                "org.gaul.s3proxy.Main",
                "--properties",
                str(properties),
            ],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        info = S3ServerInfo(process.pid, port, str(self.home), access_key, secret_key)
        self._state_path.write_text(json.dumps(asdict(info)))
        self._state_path.chmod(0o600)
        try:
            self._wait_ready(info, process, timeout_s)
        except BaseException:
            self.stop()
            raise
        return info

    def create_bucket(self, bucket: str) -> None:
        """A bucket is a directory of the filesystem backend: made here, seen by the server at once."""
        info = self.info()
        if info is None:
            raise S3ServerError("the local S3 server is not running")
        info.bucket_dir(bucket).mkdir(parents=True, exist_ok=True)

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the server by PID; True if one was running."""
        info = self.info()
        self._state_path.unlink(missing_ok=True)
        if info is None:
            return False
        if stop_process(info.pid, timeout_s):
            return True
        raise S3ServerError(f"S3 server pid {info.pid} did not exit after SIGKILL")

    def _wait_ready(self, info: S3ServerInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = (self.home / "logs" / "stdout.log").read_text(errors="replace")[-2000:]
                raise S3ServerError(f"s3proxy exited with {process.returncode}:\n{log}")
            try:
                urllib.request.urlopen(info.endpoint + "/", timeout=2).close()
                return
            except urllib.error.HTTPError:  # 403 for an unsigned request: it answers
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        raise S3ServerError(f"s3proxy did not answer on {info.endpoint} within {timeout_s:.0f} s")
