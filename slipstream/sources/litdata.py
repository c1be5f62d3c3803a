"""LitData optimized datasets (written by ``litdata.optimize``) as a
source with random access, local or in object storage.

The dataset is read through ``litdata.StreamingDataset`` with its JPEG
values handed over as their stored bytes instead of decoded, so that the
writer keeps their coefficients instead of re-encoding pixels (and no
torchvision is needed to read them).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slipstream.errors import ArgumentError, FormatError
from slipstream.files import read_head

if TYPE_CHECKING:
    from slipstream.format.remote import Remote
    from slipstream.sources.adapters import IndexableSource


class _StoredJPEG:
    """A LitData serializer that reads a stored JPEG as its bytes."""

    def serialize(self, item: Any) -> tuple[bytes, None]:
        raise TypeError("this serializer only reads")

    def deserialize(self, data: bytes) -> bytes:
        return bytes(data)

    def can_serialize(self, item: Any) -> bool:
        return False

    def setup(self, data_format: Any) -> None:
        pass


FETCHING_OPTIONS = frozenset({"storage_options", "cache_dir", "max_cache_size", "max_pre_download", "session_options"})
"""``StreamingDataset`` options that say only where and how the chunks are fetched and kept."""


class LitData:
    """The samples of a LitData optimized dataset: ``len()``, ``[i]`` (the
    item as ``litdata.optimize`` stored it: a dict, a tuple or one value)
    and :meth:`describe`, as :func:`slipstream.write` reads them.

    Example::

        slipstream.write("imagenet.slip", LitData("s3://bucket/imagenet-litdata"))

    Args:
        input_dir: the dataset's folder or URL, as ``StreamingDataset`` takes it.
        remote: for an ``s3://`` URL, the object store's options
            (:class:`slipstream.Remote`: endpoint, region, credentials,
            retries, time-out and cache folder), given to litdata's S3 client
            as its ``storage_options`` (see :func:`boto3_options`) unless
            ``options`` has its own; ``index.json`` is read with them too.
            None, or a ``Remote()`` that changes nothing: litdata's own
            defaults (the environment's credentials and endpoint).
        **options: further ``litdata.StreamingDataset`` arguments (e.g.
            ``storage_options``, boto3's client arguments); shuffling is
            always off.

    Raises:
        ArgumentError: ``remote`` has a storage option that litdata's
            client cannot take (naming it).
    """

    def __init__(self, input_dir: str, remote: Remote | None = None, **options: Any) -> None:
        import litdata

        from slipstream.format.remote import Remote, is_url

        self.input_dir = input_dir
        self.remote = remote or Remote()
        if remote is not None and remote != Remote() and is_url(input_dir):  # else litdata's own defaults
            options.setdefault("storage_options", boto3_options(remote, input_dir))
            if remote.cache_dir is not None:
                options.setdefault("cache_dir", str(Path(remote.cache_dir) / "litdata"))
        self.options = options
        self._lock = threading.Lock()
        if not is_url(input_dir):
            try:
                self.index_bytes()  # litdata's own open of a FIFO index.json would wait for a writer forever
            except FileNotFoundError:
                pass  # litdata says what is missing
        self.dataset = litdata.StreamingDataset(input_dir, shuffle=False, serializers={"jpeg": _StoredJPEG()},
                                                **options)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __getitem__(self, index: int) -> Any:
        # litdata's StreamingDataset gives wrong items when read from several threads at once.
        with self._lock:
            return self.dataset[index]

    def chunk_ranges(self) -> list[tuple[int, int]]:
        """The item ranges ``[start, stop)`` of the dataset's chunks, in
        order: a range's items are read from one chunk."""
        ranges, start = [], 0
        for first, end in self.dataset.region_of_interest:
            ranges.append((start, start + end - first))
            start += end - first
        return ranges

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the dataset file by: its
        location (a folder's resolved path; a URL without a trailing ``/``),
        the SHA-256 of its ``index.json``, which lists every
        chunk with its size and item count (``litdata.optimize`` writes a new
        one whenever it writes the dataset), and the options that change
        which items it yields or what they hold (``subsample``, ``seed``,
        ``transform``...; all but those of :data:`FETCHING_OPTIONS`).  An
        option that is not a plain value (a ``transform`` function) counts
        by its ``repr``, which changes from process to process: such a
        dataset's file is written again by each run rather than taken for
        another's."""
        options = {name: value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
                   for name, value in sorted(self.options.items()) if name not in FETCHING_OPTIONS}
        return {"litdata": _location(self.input_dir), "index": hashlib.sha256(self.index_bytes()).hexdigest(), **(
            {"options": options} if options else {})}

    def index_bytes(self) -> bytes:
        """The dataset's ``index.json``, as stored."""
        from slipstream.format.remote import is_url, local_path

        if is_url(self.input_dir):
            from slipstream.format.objectstore import ObjectPrefix

            return ObjectPrefix(self.input_dir, self.remote).read_all("index.json")
        return read_head(Path(local_path(self.input_dir)) / "index.json", error=FormatError)

    def cache_name(self) -> str:
        """The dataset folder's name, which starts the cached file's name."""
        return self.input_dir.rstrip("/").rsplit("/", 1)[-1]

    def describe(self, index: int) -> str:
        """``item i of the LitData dataset at <dir>``, for error messages."""
        return f"item {index} of the LitData dataset at {self.input_dir}"

    def default_fields(self) -> dict[str, Any]:
        """Fields inferred from the first item, a dict
        (:func:`~slipstream.sources.adapters.infer_fields`).

        Raises:
            ArgumentError: the items are not dicts, or hold a value no field stores.
        """
        from slipstream.sources.adapters import infer_fields

        return infer_fields(self[0])

    def user_metadata(self) -> dict[str, Any]:
        """Nothing: a LitData dataset carries no metadata slipstream stores."""
        return {}

    def samples_for(self, fields: Mapping[str, Any]) -> IndexableSource:
        """The items' values for ``fields``: by name from dict items, in
        order from tuple items (see :class:`~slipstream.sources.IndexableSource`)."""
        from slipstream.sources.adapters import IndexableSource

        return IndexableSource(self, list(fields))

    def __repr__(self) -> str:
        return f"LitData({self.input_dir!r}, {len(self)} items)"


_BOTO3_KEYS = {"endpoint": "endpoint_url", "endpoint_url": "endpoint_url", "region": "region_name",
               "default_region": "region_name", "access_key_id": "aws_access_key_id",
               "secret_access_key": "aws_secret_access_key", "session_token": "aws_session_token",
               "token": "aws_session_token"}
"""``Remote.storage_options`` keys (obstore's, without their ``aws_``
prefix) -> the boto3 client's arguments."""


def boto3_options(remote: Remote, url: str) -> dict[str, Any]:
    """``remote`` as the ``storage_options`` of litdata's S3 client (the
    arguments of ``boto3.client("s3", ...)``): the endpoint, region and
    credentials of its ``storage_options``, and a ``botocore`` config with
    its retries, time-out, addressing style (``virtual_hosted_style_request``)
    and signing (``skip_signature``).  ``allow_http`` needs nothing: boto3
    speaks HTTP to an ``http://`` endpoint.

    Raises:
        ArgumentError: ``url`` is not ``s3://`` and ``remote`` has storage
            options, or one of them has no boto3 equivalent (naming it).
    """
    options = {key.lower().removeprefix("aws_"): value for key, value in remote.storage_options.items()}
    if not url.startswith("s3://"):
        if options:
            raise ArgumentError(f"LitData reads {url} with litdata's own client, whose options for this store are not "
                                f"slipstream.Remote's: pass them as LitData(url, storage_options=...)")
        return {}
    from botocore import UNSIGNED
    from botocore.config import Config

    from slipstream.format.objectstore import is_true

    client: dict[str, Any] = {}
    config: dict[str, Any] = {"retries": {"max_attempts": remote.retries + 1, "mode": "adaptive"},
                              "connect_timeout": remote.timeout_s, "read_timeout": remote.timeout_s}
    for key, value in options.items():
        if key in _BOTO3_KEYS:
            client[_BOTO3_KEYS[key]] = value
        elif key == "virtual_hosted_style_request":
            config["s3"] = {"addressing_style": "virtual" if is_true(value) else "path"}
        elif key == "skip_signature":
            if is_true(value):
                config["signature_version"] = UNSIGNED
        elif key == "allow_invalid_certificates":
            client["verify"] = not is_true(value)
        elif key != "allow_http":
            raise ArgumentError(f"LitData reads {url} with boto3, which has no equivalent of the storage option "
                                f"{key!r} of slipstream.Remote: pass boto3's client arguments as LitData(url, "
                                f"storage_options=...)")
    return {**client, "config": Config(**config)}


def _location(input_dir: str) -> str:
    """``input_dir`` as one text per place: a URL without a trailing
    ``/``, a local folder's resolved path."""
    from slipstream.format.remote import is_url, local_path

    return input_dir.rstrip("/") if is_url(input_dir) else str(Path(local_path(input_dir)).resolve())
