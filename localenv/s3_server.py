"""An S3-compatible server run by the project itself: gaul/s3proxy over a local directory, on 127.0.0.1.

The server is Maven Central's ``org.gaul:s3proxy`` (profile ``s3proxy`` of ``jvm/pom.xml``) with jclouds'
in-memory ("transient") backend: objects live as long as the process. It checks AWS v2/v4 signatures against
one generated access key and secret, listens on 127.0.0.1 only, and is stopped by the PID it recorded.
``S3ServerInfo`` has a small signed client (buckets, uploads, listings) for set-up and tests. Why s3proxy,
and why in memory: ``docs/design/object-store.md``.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import secrets
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from connectors import jvm_artifacts
from connectors.processes import free_port, port_is_open
from localenv.pid_record import PidRecord

DEFAULT_HOME = jvm_artifacts.PROJECT_ROOT / ".run" / "s3"
_STATE_FILE = "s3.json"
REGION = "us-east-1"
# s3proxy's jars bring logback without a configuration, which would log every request at DEBUG.
_LOGBACK = """<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d %level %logger{{36}} %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="file"/></root>
</configuration>
"""


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

    def request(self, method: str, path: str, query: str = "", body: bytes | None = None) -> bytes:
        """One S3 request signed with AWS signature version 2 (``path``: ``/bucket[/key]``), its response body."""
        date = email.utils.formatdate(usegmt=True)
        content_type = "application/octet-stream" if body is not None else ""
        signed = f"{method}\n\n{content_type}\n{date}\n{path}".encode()
        signature = base64.b64encode(hmac.new(self.secret_key.encode(), signed, hashlib.sha1).digest()).decode()
        url = self.endpoint + urllib.parse.quote(path) + (f"?{query}" if query else "")
        headers = {"Date": date, "Authorization": f"AWS {self.access_key}:{signature}"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return bytes(answer.read())

    def upload(self, directory: Path, bucket: str, prefix: str) -> int:
        """Every file under ``directory`` put at ``prefix/<its relative path>``; how many."""
        files = sorted(p for p in directory.rglob("*") if p.is_file())
        for file in files:
            self.request("PUT", f"/{bucket}/{prefix}/{file.relative_to(directory).as_posix()}", body=file.read_bytes())
        return len(files)

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket``; one this server already holds is left as it is."""
        try:
            self.request("PUT", f"/{bucket}")
        except urllib.error.HTTPError as error:
            if error.code != 409:  # BucketAlreadyOwnedByYou
                raise

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key of ``bucket`` under ``prefix`` (ListObjects, page after page)."""
        found: list[str] = []
        marker = ""
        while True:
            query = urllib.parse.urlencode({"prefix": prefix, "marker": marker})
            root = ElementTree.fromstring(self.request("GET", f"/{bucket}", query))
            namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            page = [element.text or "" for element in root.iter(f"{namespace}Key")]
            found += page
            if not page or root.findtext(f"{namespace}IsTruncated") != "true":
                return found
            marker = page[-1]


class LocalS3Server:
    """One s3proxy on 127.0.0.1, its logs and PID record under ``home``; ``backend`` is a jclouds provider."""

    def __init__(
        self,
        home: Path | str = DEFAULT_HOME,
        port: int | None = None,
        heap: str = "512m",
        backend: str = "transient",
        credentials: tuple[str, str] | None = None,  # (access key, secret); None: generated at start
    ) -> None:
        self.home = Path(home).resolve()
        self._backend = backend
        self._credentials = credentials
        self._port = port
        self._heap = heap

    @property
    def _record(self) -> PidRecord[S3ServerInfo]:
        return PidRecord(self.home / _STATE_FILE, S3ServerInfo, S3ServerError, "S3 server", private=True)

    def info(self) -> S3ServerInfo | None:
        """The running server recorded under ``home``, or None (stale records are ignored)."""
        return self._record.read()

    def start(self, timeout_s: float = 60.0) -> S3ServerInfo:
        """Start the server (or return the one already running under ``home``)."""
        running = self.info()
        if running is not None:
            return running
        port = self._port or free_port()
        if port_is_open(port):
            raise S3ServerError(f"port {port} on 127.0.0.1 is already in use; choose another")
        jvm_artifacts.jars("s3proxy")  # resolve on first use
        data, logs = self.home / "data", self.home / "logs"  # data: a filesystem backend's (backend=...)
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        access_key, secret_key = self._credentials or ("rrm-" + secrets.token_hex(6), secrets.token_hex(20))
        properties = self.home / "s3proxy.properties"
        properties.write_text(
            "".join(
                f"{k}={v}\n"
                for k, v in {
                    "s3proxy.endpoint": f"http://127.0.0.1:{port}",
                    "s3proxy.authorization": "aws-v2-or-v4",
                    "s3proxy.identity": access_key,
                    "s3proxy.credential": secret_key,
                    "jclouds.provider": self._backend,
                    "jclouds.identity": "local",  # the backend's own, unused by a local directory
                    "jclouds.credential": "local",
                    "jclouds.filesystem.basedir": str(data),
                    "jclouds.region": REGION,
                }.items()
            )
        )
        properties.chmod(0o600)
        logback = self.home / "logback.xml"
        logback.write_text(_LOGBACK.format(log=logs / "s3proxy.log"))
        stdout = open(logs / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [
                "java",
                f"-Xmx{self._heap}",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",  # a test server: C1 only, less start-up CPU
                f"-Dlogback.configurationFile={logback}",
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
        return self._record.started(info, lambda: self._wait_ready(info, process, timeout_s))

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the server by PID; True if one was running."""
        return self._record.stop(timeout_s)

    def _wait_ready(self, info: S3ServerInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                logs = [self.home / "logs" / name for name in ("stdout.log", "s3proxy.log")]
                log = "".join(path.read_text(errors="replace")[-1000:] for path in logs if path.exists())
                raise S3ServerError(f"s3proxy exited with {process.returncode}:\n{log}")
            try:
                urllib.request.urlopen(info.endpoint + "/", timeout=2).close()
                return
            except urllib.error.HTTPError:  # 403 for an unsigned request: it answers
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        raise S3ServerError(f"s3proxy did not answer on {info.endpoint} within {timeout_s:.0f} s")
