"""Where a dataset lives: a local path or a URL, and the options of reading
one from object storage.

A path may be a URL wherever slipstream takes one: ``s3://bucket/prefix``
(and ``gs://``, ``az://``, ``http(s)://``: whatever the object-store client
supports), or ``file:///absolute/path``, which is the local path.  This
module only tells them apart and holds the options; the client itself lives
in :mod:`slipstream.format.objectstore`, imported when a URL is opened.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from slipstream.cache import cache_root
from slipstream.errors import ArgumentError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL of a remote store (not ``file://``)."""
    return isinstance(path, str) and bool(_SCHEME.match(path)) and not path.lower().startswith("file://")


def local_path(path: str | os.PathLike) -> Path:
    """A local path, from a path or a ``file://`` URL."""
    if isinstance(path, str) and path.lower().startswith("file://"):
        parsed = urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            raise ArgumentError(f"{path}: a file:// URL names a path on this machine (file:///path), not on "
                                f"host {parsed.netloc!r}")
        return Path(unquote(parsed.path))
    return Path(path)


def absolute(path: str | os.PathLike) -> str:
    """``path`` with a relative local path made absolute, against this
    process's folder (URLs as they are): for paths opened by other
    processes, which may run in other folders (Ray's workers)."""
    text = os.fspath(path)
    return text if _SCHEME.match(text) else os.path.abspath(text)


def join(base: str, name: str) -> str:
    """``name`` inside the folder or prefix ``base`` (a URL or a path)."""
    return f"{base.rstrip('/')}/{name}"


def parse_size(size: int | str | None, what: str) -> int | None:
    """Bytes from an int or a text such as ``"1GB"``, ``"512 MiB"`` (None stays None)."""
    if size is None or isinstance(size, int) and not isinstance(size, bool):
        if size is not None and size <= 0:
            raise ArgumentError(f"{what} must be positive, got {size}")
        return size
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(size))
    unit = match.group(2).upper() if match else ""
    if not match or unit not in _UNITS:
        raise ArgumentError(f"{what} must be a number of bytes or a text such as '1GB' or '512MiB', got {size!r}")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ArgumentError(f"{what} must be positive, got {size!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Remote:
    """How to read and write datasets in object storage.

    Everything has a default: credentials, endpoint and region come from
    the usual places (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_PROFILE`` and the ``~/.aws/credentials`` and ``~/.aws/config``
    files), so most jobs pass none of this.

    Example::

        remote = slipstream.Remote(cache_limit="200GB")
        loader = slipstream.Loader("s3://bucket/imagenet/train", 256, remote=remote)

    Attributes:
        storage_options: options of the object-store client, overriding the
            environment (for S3: ``endpoint``, ``region``,
            ``access_key_id``, ``secret_access_key``, ``session_token``,
            ``allow_http``...; the keys of ``obstore.store.S3Config``).
        cache_dir: the node-local page cache (default:
            ``$SLIPSTREAM_CACHE_DIR/pages``, else
            ``~/.cache/slipstream/pages``).  Every process of the node that
            names the same folder shares it: a page is downloaded once.
        cache_limit: bytes the page cache may hold (an int or a text such
            as ``"50GB"``; default: no limit).  When a new page does not fit,
            the pages this process needs farthest in the future go first.
        requests: ranged GETs in flight at once per process, at most; a
            loader's store also keeps the pages in flight under 64 MiB
            (8 at once of 8 MiB pages), so that the pages the next batch
            needs come first.
        retries: quick retries of a failing request by the client
            (connection errors, time-outs, HTTP 5xx, throttling), with
            exponential backoff.
        retry_timeout_s: how long a request that keeps failing for such a
            reason is tried again (with backoff up to 4 s) before it fails:
            a store that goes away and comes back within this time costs
            nothing but the wait.
        timeout_s: the longest one request may take, in seconds.
    """

    storage_options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cache_dir: str | os.PathLike | None = None
    cache_limit: int | str | None = None
    requests: int = 32
    retries: int = 10
    retry_timeout_s: float = 120.0
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        parse_size(self.cache_limit, "cache_limit")
        if not isinstance(self.requests, int) or self.requests < 1:
            raise ArgumentError(f"requests must be a positive integer, got {self.requests!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise ArgumentError(f"retries must be a non-negative integer, got {self.retries!r}")
        if not self.retry_timeout_s > 0 or not self.timeout_s > 0:
            raise ArgumentError("retry_timeout_s and timeout_s must be positive")
        object.__setattr__(self, "storage_options", {str(k): str(v) for k, v in dict(self.storage_options).items()})

    @property
    def cache_bytes(self) -> int | None:
        """``cache_limit`` in bytes (None: no limit)."""
        return parse_size(self.cache_limit, "cache_limit")

    @property
    def cache_path(self) -> Path:
        """The page cache's folder."""
        if self.cache_dir is not None:
            return Path(self.cache_dir)
        return cache_root() / "pages"
