"""Object storage, through obstore: the one module that talks to a remote
store.

obstore (Rust's ``object_store`` crate behind a thin Python layer) does the
HTTP, the request signing, the connection pooling and the retries with
exponential backoff of connection errors, time-outs, HTTP 5xx and
throttling.  Its calls release the GIL for the whole transfer, so page
reads in background threads do not slow the loader's Python work, and it
needs no event loop.  ``docs/remote.md`` gives the measurement behind the
choice.

Everything here raises slipstream's exceptions, naming the URL:
:class:`~slipstream.errors.DatasetNotFoundError` for a missing object or
bucket, :class:`~slipstream.errors.StorageError` for refused credentials
and for requests that still fail after their retries.
"""

from __future__ import annotations

import configparser
import datetime
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from slipstream.errors import ArgumentError, DatasetNotFoundError, StorageError
from slipstream.format.remote import Remote, join

try:
    import obstore
    import obstore.exceptions as obstore_errors
    from obstore.store import from_url
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("reading or writing datasets at URLs needs obstore: pip install 'slipstream[s3]'") from exc

T = TypeVar("T")

_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
                "http1_only", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
                "proxy_ca_certificate", "proxy_excludes", "randomize_addresses", "read_timeout", "timeout",
                "user_agent"}
"""``storage_options`` keys that configure the HTTP client rather than the store
(in any case, and with ``aws_`` before them, as obstore takes the store's)."""


class ObjectPrefix:
    """The objects under one URL prefix (a sharded dataset's "folder").

    Args:
        url: ``scheme://bucket/prefix``.
        remote: client options, retries and time-outs.
    """

    def __init__(self, url: str, remote: Remote) -> None:
        self.url = url.rstrip("/")
        self._retry_timeout = remote.retry_timeout_s
        config, client = _options(self.url, remote.storage_options)
        client.setdefault("timeout", datetime.timedelta(seconds=remote.timeout_s))
        client.setdefault("connect_timeout", datetime.timedelta(seconds=min(10.0, remote.timeout_s)))
        client.setdefault("pool_max_idle_per_host", str(max(8, remote.requests)))
        retry = {"max_retries": remote.retries, "retry_timeout": datetime.timedelta(seconds=remote.retry_timeout_s),
                 "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                             "max_backoff": datetime.timedelta(seconds=5), "base": 2}}
        try:
            self._store = from_url(self.url, config=config, client_options=client, retry_config=retry)
        except (obstore_errors.BaseError, ValueError) as exc:
            raise ArgumentError(f"{self.url}: cannot make an object-store client: {_first_line(exc)}") from None

    def url_of(self, name: str) -> str:
        """The URL of object ``name`` under the prefix."""
        return join(self.url, name)

    def local_folder(self) -> None:
        return None

    def read(self, name: str, start: int, end: int) -> memoryview:
        """Bytes ``[start, end)`` of object ``name``, by one ranged GET."""
        return self._retrying(name, lambda: memoryview(obstore.get_range(self._store, name, start=start, end=end)))

    def read_all(self, name: str) -> bytes:
        """The whole of object ``name``."""
        return self._retrying(name, lambda: bytes(obstore.get(self._store, name).bytes()))

    def read_head(self, name: str, length: int) -> tuple[memoryview, int]:
        """The first ``length`` bytes of object ``name`` (all of it when it is
        shorter) and the object's size, by one ranged GET: the size comes
        with the bytes (``Content-Range``), so knowing it costs no request."""
        return self._retrying(name, lambda: self._head(name, length))

    def _head(self, name: str, length: int) -> tuple[memoryview, int]:
        try:
            result = obstore.get(self._store, name, options={"range": (0, length)})
        except obstore_errors.GenericError as exc:
            if "InvalidRange" not in str(exc):
                raise
            return memoryview(b""), 0  # only an empty object has no first byte to send
        return memoryview(result.bytes()), int(result.meta["size"])

    def size(self, name: str) -> int:
        """The size of object ``name`` in bytes."""
        return self.head(name)[0]

    def head(self, name: str) -> tuple[int, str | None]:
        """The size of object ``name`` in bytes and its ETag (None where the
        store gives none): what changes when the object is written again."""
        meta = self._retrying(name, lambda: obstore.head(self._store, name))
        return int(meta["size"]), meta.get("e_tag")

    def _retrying(self, name: str, request: Callable[[], T]) -> T:
        """``request()``, tried again while it fails for a reason that may
        pass (the store unreachable, overloaded or failing) and the time
        budget lasts.  The client retries each request a few times within
        seconds; this outer loop carries a request over an outage of a
        store that restarts, with backoff up to a few seconds."""
        deadline = time.monotonic() + self._retry_timeout
        pause = 0.25
        while True:
            try:
                with self._errors(name):
                    return request()
            except _Unreachable:
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 4.0)

    def exists(self, name: str) -> bool:
        """Whether object ``name`` exists (errors other than "not found" raise)."""
        try:
            self.size(name)
        except DatasetNotFoundError:
            return False
        return True

    def put_file(self, name: str, path: Path) -> None:
        """Upload a local file as object ``name`` (multipart when large; the
        object appears whole or not at all)."""
        with self._errors(name):
            obstore.put(self._store, name, Path(path), chunk_size=16 << 20, max_concurrency=8)

    def put_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` as object ``name``, atomically."""
        with self._errors(name):
            obstore.put(self._store, name, data, use_multipart=False)

    def delete(self, name: str) -> None:
        """Delete object ``name`` (no error when it does not exist)."""
        try:
            with self._errors(name):
                obstore.delete(self._store, name)
        except DatasetNotFoundError:
            pass

    def names(self) -> list[str]:
        """The names of the objects directly under the prefix."""
        return sorted(self.listing())

    def listing(self) -> dict[str, tuple[int, str | None]]:
        """Each object directly under the prefix: name -> (size, ETag or None).
        A folder's marker (a key ending in ``/``, which some stores keep for
        a folder emptied, and consoles create) is not one."""
        with self._errors(""):
            listing = obstore.list_with_delimiter(self._store, None)
        named = ((str(o["path"]).rsplit("/", 1)[-1], o) for o in listing["objects"])
        return {name: (int(o["size"]), o.get("e_tag")) for name, o in named if name}

    def _errors(self, name: str) -> _Translate:
        return _Translate(self.url_of(name) if name else self.url)


class _Unreachable(StorageError):
    """A request failed for a reason that may pass: the store unreachable,
    a time-out, HTTP 5xx or throttling (not refused credentials, nor any
    other HTTP 4xx: see :data:`_STATUS`)."""


class _Translate:
    """Turns obstore's exceptions into slipstream's, naming the URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, (obstore_errors.BaseError, OSError)) or isinstance(
                exc, (StorageError, DatasetNotFoundError)):
            return False
        text = _first_line(exc)
        if isinstance(exc, (obstore_errors.NotFoundError, FileNotFoundError)):
            missing = "the bucket does not exist" if "NoSuchBucket" in str(exc) else "no such object"
            raise DatasetNotFoundError(f"{self.url}: {missing} ({text})") from None
        status = _STATUS.search(str(exc))
        # By the status obstore reports and S3's error codes, never by digits
        # anywhere in the text: "in 2.740384894s" is no HTTP 403.
        if isinstance(exc, (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError)) or (
                status and status[1] in ("401", "403")) or any(
                word in str(exc) for word in ("AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId")):
            raise StorageError(f"{self.url}: access denied: check the credentials (AWS_ACCESS_KEY_ID, "
                               f"AWS_SECRET_ACCESS_KEY, AWS_PROFILE or storage_options) and the bucket's "
                               f"permissions ({text})") from None
        if "NoSuchBucket" in str(exc):
            raise DatasetNotFoundError(f"{self.url}: the bucket does not exist ({text})") from None
        if status and status[1] == "416":
            raise StorageError(f"{self.url}: the object is shorter than the bytes asked for (HTTP 416): it was "
                               f"truncated or replaced since it was opened ({text})") from None
        if status and status[1].startswith("4") and status[1] not in ("408", "429"):
            raise StorageError(f"{self.url}: the store refused the request (HTTP {status[1]}): {text}") from None
        raise _Unreachable(f"{self.url}: the request failed after its retries: {text}") from None


_STATUS = re.compile(r"status code: ([1-5][0-9][0-9])\b")
"""The HTTP status in obstore's message of a request the store answered with
an error.  A 4xx status other than 408 (time-out) and 429 (throttling) will
not pass with time: it is not retried."""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])[:500] or type(exc).__name__


def is_true(value: Any) -> bool:
    """Whether a storage option's text (or an environment variable's)
    says yes: ``1``, ``true`` or ``yes``, in any case."""
    return str(value).lower() in ("1", "true", "yes")


def _options(url: str, given: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The store's configuration and the HTTP client's, from
    ``storage_options`` over the AWS configuration files (for ``s3://``;
    obstore itself reads the environment variables)."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    if url.lower().startswith("s3://"):
        config.update(_aws_files())
    for key, value in given.items():
        name = key.lower().removeprefix("aws_")
        if name in _CLIENT_KEYS:
            client[name] = value
        else:
            config[key] = value
    if "allow_http" in client:
        client["allow_http"] = is_true(client["allow_http"])
    elif is_true(os.environ.get("AWS_ALLOW_HTTP", "")) or url.lower().startswith("http://") \
            or str(config.get("endpoint", os.environ.get("AWS_ENDPOINT_URL", os.environ.get("AWS_ENDPOINT", "")))
                   ).startswith("http://"):
        client["allow_http"] = True  # an http:// URL or endpoint given on purpose (a local or on-premise server)
    return config, client


def _aws_files() -> dict[str, str]:
    """Credentials, region and endpoint of ``$AWS_PROFILE`` (default
    ``default``) from ``~/.aws/credentials`` and ``~/.aws/config``, for what
    the environment does not set."""
    profile = os.environ.get("AWS_PROFILE", os.environ.get("AWS_DEFAULT_PROFILE", "default"))
    found: dict[str, str] = {}
    wanted = {"aws_access_key_id": ("AWS_ACCESS_KEY_ID", "access_key_id"),
              "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
              "aws_session_token": ("AWS_SESSION_TOKEN", "token"),
              "region": ("AWS_REGION", "region"), "endpoint_url": ("AWS_ENDPOINT_URL", "endpoint")}
    files = [(Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", Path.home() / ".aws" / "credentials")), profile),
             (Path(os.environ.get("AWS_CONFIG_FILE", Path.home() / ".aws" / "config")),
              profile if profile == "default" else f"profile {profile}")]
    for path, section in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if not parser.has_section(section):
            continue
        for key, (variable, option) in wanted.items():
            if parser.has_option(section, key) and variable not in os.environ and option not in found:
                found[option] = parser.get(section, key)
    if "region" not in found and "AWS_REGION" not in os.environ and "AWS_DEFAULT_REGION" in os.environ:
        found["region"] = os.environ["AWS_DEFAULT_REGION"]
    return found
