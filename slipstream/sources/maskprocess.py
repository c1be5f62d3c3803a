"""COCO segmentations decoded by pycocotools in a helper process.

pycocotools' C code trusts its input: a polygon it cannot handle makes it
write through a failed allocation and kill the process (SIGSEGV).
:class:`~slipstream.sources.COCODetection` checks polygons before they get
there, but a crash on an input nobody foresaw must not take the caller
down with it (a training script, the writer): so every pycocotools call
runs here, in a process of its own, and a crash becomes a failure of the
one sample being decoded, which follows the writer's ``on_error``.

One helper serves a process (started on first use, again after a crash,
and anew in a forked child); it ends when its request pipe closes, that is
when its parent ends.  Samples read in order (as the writer reads them)
cost little more than decoding in the process: the next sample's request
is sent ahead, so that the helper decodes it while the caller encodes the
current one.  This file is also the helper's program: it imports nothing
of slipstream, so it starts in the time NumPy and pycocotools take.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import pickle
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, BinaryIO

import numpy as np

Segmentations = Sequence[tuple[str, Any]]
"""One sample's segmentations, as :class:`~slipstream.sources.COCODetection`
stores them: ``("polygons", arrays)``, ``("counts", runs)`` or
``("compressed", bytes)``."""

_STARTED = b"."
"""What the helper writes before each segmentation it starts on: after a
crash, their count says which one it was."""


class _Ended(Exception):
    """The helper ended in the middle of a request."""


class MaskProcess:
    """The caller's end of a helper process that decodes segmentations.

    A request is ``(height, width, segmentations)``; its reply, the
    :data:`_STARTED` marks and then ``(decoded, reason, packed)``: how many
    segmentations were decoded, why the next one failed (``""`` if none
    did) and, when none did, the pixels of the ``(n, H, W)`` masks packed 8
    to a byte (an eighth of the bytes through the pipe, for little work)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._requests: BinaryIO | None = None
        self._replies: BinaryIO | None = None
        self._ahead: tuple[Hashable, list[int]] | None = None  # a request sent ahead, its reply unread
        self._inherited: tuple[Any, ...] = ()
        atexit.register(self.close)
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child, the helper and any reply on its way are the
        parent's (and the lock may have been held by a parent's thread):
        the child starts afresh.  It keeps the parent's pipes as they are,
        unclosed: closing them would flush what the parent may have left
        in their buffers."""
        self._lock = threading.Lock()
        self._inherited += (self._process, self._requests, self._replies)
        self._forget()

    def decode(self, key: Hashable, segmentations: Segmentations, shape: tuple[int, int],
               ahead: tuple[Hashable, Segmentations, tuple[int, int]] | None = None
               ) -> tuple[np.ndarray, tuple[int, str] | None]:
        """The masks of ``segmentations`` in an image of ``shape`` (H, W).

        Args:
            key: names this request, as ``ahead`` named it when the request
                was sent ahead (its reply is then read, not asked for).
            segmentations: the sample's segmentations.
            shape: its image's height and width.
            ahead: ``(key, segmentations, (H, W))`` of the request likely
                to come next, sent now for the helper to decode meanwhile.

        Returns:
            The ``(n, H, W)`` uint8 masks and None; or, when segmentation
            ``k`` failed (pycocotools refused it, or crashed on it), an
            array of zeros and ``(k, reason)``.
        """
        with self._lock:
            wanted = _wanted(segmentations)
            reply = self._reply_sent_ahead(key)
            if reply is None:
                reply = self._ask(segmentations, wanted, shape)
            if ahead is not None:
                self._send_ahead(*ahead)
        return _masks(len(segmentations), shape, wanted, reply)

    def _reply_sent_ahead(self, key: Hashable) -> tuple[int, str, bytes] | None:
        """The reply to the request sent ahead if it was ``key``'s, else
        None (another's reply is read and dropped)."""
        if self._ahead is None:
            return None
        ahead_key, wanted = self._ahead
        self._ahead = None
        if not wanted:
            return (0, "", b"") if ahead_key == key else None
        try:
            reply = self._receive(len(wanted))
        except _Ended as ended:  # a crash on the sample sent ahead: its own, if it is the one asked for now
            reply = (ended.args[0], ended.args[1], b"")
        return reply if ahead_key == key else None

    def _ask(self, segmentations: Segmentations, wanted: list[int], shape: tuple[int, int]) -> tuple[int, str, bytes]:
        """Send a request and wait for its reply."""
        if not wanted:
            return 0, "", b""
        try:
            self._send(segmentations, wanted, shape)
            return self._receive(len(wanted))
        except _Ended as ended:
            return ended.args[0], ended.args[1], b""

    def _send_ahead(self, key: Hashable, segmentations: Segmentations, shape: tuple[int, int]) -> None:
        wanted = _wanted(segmentations)
        try:
            if wanted:
                self._send(segmentations, wanted, shape)
            self._ahead = key, wanted
        except _Ended:  # it is asked for again when it comes
            pass

    def _send(self, segmentations: Segmentations, wanted: list[int], shape: tuple[int, int]) -> None:
        """Send a request, to a new helper if the one there is has ended
        since its last reply (killed while it waited)."""
        why = ""
        for _ in range(2):
            try:
                if self._process is None:
                    self._start()
                assert self._requests is not None
                pickle.dump((*shape, [segmentations[k] for k in wanted]), self._requests, protocol=5)
                self._requests.flush()
                return
            except OSError as exc:
                if self._process is None:
                    raise _Ended(0, f"the helper process that runs pycocotools cannot be started: {exc}") from None
                why = self._ended()
        raise _Ended(0, why)

    def _receive(self, count: int) -> tuple[int, str, bytes]:
        """The reply to a request of ``count`` segmentations.

        Raises:
            _Ended: ``(k, why)``: the helper ended while on segmentation ``k``.
        """
        assert self._replies is not None
        started = 0
        try:
            while self._replies.peek(1)[:1] == _STARTED:
                self._replies.read(1)
                started += 1
            return pickle.load(self._replies)
        except (EOFError, OSError, pickle.UnpicklingError):
            raise _Ended(max(0, started - 1), self._ended()) from None

    def _start(self) -> None:
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        _widen(reply_write)
        try:
            self._process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), str(request_read), str(reply_write)],
                pass_fds=(request_read, reply_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            for descriptor in (request_read, request_write, reply_read, reply_write):
                os.close(descriptor)
            raise
        os.close(request_read)
        os.close(reply_write)
        self._requests, self._replies = open(request_write, "wb"), open(reply_read, "rb")
        pickle.dump(sys.path, self._requests)  # so that it imports pycocotools from where this process does

    def _ended(self) -> str:
        """Why the helper ended in the middle of a request (it is reaped,
        and the next request starts another)."""
        process = self._process
        self._drop()
        code = _reap(process) if process is not None else None
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"pycocotools crashed on it ({name}; in a helper process, which is restarted)"
        return f"the helper process decoding it with pycocotools ended (exit status {code})"

    def _drop(self) -> None:
        """Close this end of the helper's pipes (it ends when its request
        pipe closes) and forget it."""
        for pipe in (self._requests, self._replies):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:  # the helper is gone: what was buffered for it goes nowhere
                    pass
        self._forget()

    def _forget(self) -> None:
        self._process = self._requests = self._replies = self._ahead = None

    def close(self) -> None:
        """End this process's helper, if it has one (at exit)."""
        with self._lock:
            process = self._process
            if process is not None:
                self._drop()
                _reap(process)


def _widen(pipe: int) -> None:
    """Let ``pipe`` hold a whole reply where Linux allows (its default 64
    KiB is less than the masks of a few annotations), so that the helper
    finishes a request sent ahead without waiting for it to be read."""
    set_pipe_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_pipe_size is not None:
        try:
            fcntl.fcntl(pipe, set_pipe_size, _PIPE_SIZE)
        except OSError:  # over the system's limit (/proc/sys/fs/pipe-max-size): replies then wait to be read
            pass


_PIPE_SIZE = 1 << 20


def _reap(process: subprocess.Popen) -> int:
    """The exit status of a helper whose request pipe is closed: it ends
    once it has finished what it was decoding."""
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:  # stuck inside pycocotools
        process.kill()
        return process.wait()


def _wanted(segmentations: Segmentations) -> list[int]:
    """The segmentations that decode to something (a polygon annotation
    whose polygons all lacked an area has an empty mask)."""
    return [k for k, (kind, data) in enumerate(segmentations) if kind != "polygons" or len(data)]


def _masks(count: int, shape: tuple[int, int], wanted: list[int],
           reply: tuple[int, str, bytes]) -> tuple[np.ndarray, tuple[int, str] | None]:
    """The masks of a reply, and the failure it reports."""
    decoded, reason, packed = reply
    if decoded < len(wanted):
        return np.zeros((count, *shape), np.uint8), (wanted[decoded], reason)
    masks = np.unpackbits(np.frombuffer(packed, np.uint8), count=len(wanted) * shape[0] * shape[1])
    masks = masks.reshape(len(wanted), *shape)
    if len(wanted) == count:
        return masks, None
    every = np.zeros((count, *shape), np.uint8)  # the masks of polygons without an area stay empty
    every[wanted] = masks
    return every, None


MASKS = MaskProcess()
"""The helper of this process."""


# ---------------------------------------------------------------- the helper's side


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer requests until the request pipe closes (or the reply pipe)."""
    sys.path[:] = pickle.load(requests)
    from pycocotools import mask as api

    while True:
        try:
            height, width, segmentations = pickle.load(requests)
        except EOFError:
            return
        masks = np.empty((len(segmentations), height, width), np.uint8)
        decoded, reason = 0, ""
        for kind, data in segmentations:
            replies.write(_STARTED)
            try:
                masks[decoded] = _decode(api, kind, data, height, width)
            except Exception as exc:  # pycocotools raises bare Exceptions and ValueErrors
                reason = f"{type(exc).__name__}: {exc}"
                break
            decoded += 1
        packed = np.packbits(masks).tobytes() if not reason else b""  # a failed sample's masks are not used
        pickle.dump((decoded, reason, packed), replies, protocol=5)


def _decode(api: Any, kind: str, data: Any, height: int, width: int) -> Any:
    """One segmentation's ``(H, W)`` mask, by pycocotools."""
    if kind == "polygons":
        rle = api.merge(api.frPyObjects(list(data), height, width))
    elif kind == "counts":
        rle = api.frPyObjects({"counts": data, "size": [height, width]}, height, width)
    else:
        rle = {"counts": data, "size": [height, width]}
    with warnings.catch_warnings():
        # pycocotools' decoder, built before NumPy 2, asks for an array copy in a way NumPy 2 deprecates;
        # the masks are right, and the warning says nothing the user can act on.
        warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy", DeprecationWarning)
        return api.decode(rle)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which ends this by closing the pipe
    with open(int(sys.argv[1]), "rb") as request_pipe, open(int(sys.argv[2]), "wb", buffering=0) as reply_pipe:
        try:
            serve(request_pipe, reply_pipe)
        except BrokenPipeError:  # the parent is gone
            pass
