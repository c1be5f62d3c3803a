"""The Loader: a dataset file, a compiled pipeline per output, an order,
and an epoch iterator that yields batches of torch tensors."""

from __future__ import annotations

import atexit
import enum
import functools
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream import cache_files, cache_use
from slipstream.compiler.graph import Graph
from slipstream.compiler.pipeline import CompiledPipeline
from slipstream.compiler.operation import torch_device
from slipstream.errors import ArgumentError, CacheWarning, NativeMemoryError, SlipstreamError
from slipstream.fields.decoders import DecodeSource, IncompleteTables
from slipstream.format import Reader
from slipstream.loader import orders, resolution, resume
from slipstream.loader.epoch_sources import EpochSource, FileEpochs, first_epoch_source
from slipstream.loader.epoch_zero import EPOCH_ZEROS, OVER_FILE, STREAMED, EpochZero, stream_name
from slipstream.loader.iterator import EpochIterator, EpochPlan, FailureLog
from slipstream.loader.options import GROUPS, LoaderOptions, Memory, Order, Sharding, _integer, unknown_keyword
from slipstream.loader.outputs import resolve_outputs
from slipstream.loader.stats import LOG as STATS_LOG, LoaderStats, StatsRecorder
from slipstream.format.remote import Remote
from slipstream.format.sharded import open_dataset
from slipstream.format.writer import SampleStream
from slipstream.convert import LOADER_KEYWORDS
from slipstream.loader.first_epoch import FirstEpoch
from slipstream.loader.first_epoch_ranks import claim, group_is
from slipstream.sources.paths import find_source

ON_ERROR = ("raise", "skip", "replace")
"""The ``on_error`` policies of :class:`Loader`."""

_open_loaders: weakref.WeakSet = weakref.WeakSet()

def _option(group: str, field: str, doc: str) -> property:
    """A read-only loader attribute that reads ``field`` of the option group ``group``."""
    return property(lambda self: getattr(getattr(self.options, group), field), doc=doc)


class Loader:
    """Batches of a dataset, decoded and transformed by compiled pipelines.

    Example::

        from slipstream.ops import presets
        loader = slipstream.Loader("train.slip", batch_size=256, pipelines=presets.imagenet_train(224),
                                   order=slipstream.Order("random", seed=0))
        for epoch in range(epochs):
            for images, labels in loader:   # float16 (256, 3, 224, 224), int64 (256,)
                ...

    Iterating gives one epoch: a tuple per batch with one torch tensor per
    output, in the order ``pipelines`` names them, then the fields it does
    not name in the dataset's order (``as_dict=True``: a dict by output
    name).  Each ``iter()`` starts the next epoch; ``set_epoch`` chooses
    one.  A background thread prepares ``memory.batches_ahead`` batches; a
    batch stays as it is until the next one is taken (its memory, used
    again ``batches_ahead + 2`` batches later, is filled from then on), so
    ``.clone()`` a batch to keep it longer.
    ``state_dict()``/``load_state_dict()`` save and restore the position in
    an epoch; ``explain()`` shows the generated code and memory plan;
    ``close()`` (or leaving a ``with`` block) stops the thread.

    Args:
        path_or_reader: a dataset file (slipstream or FFCV ``.beton``), a
            sharded dataset (its folder or manifest), a URL of either
            (``s3://bucket/prefix``), a :class:`slipstream.Reader`, or a
            source :func:`slipstream.write` takes: an image folder,
            WebDataset tar shards (a ``.tar`` file, a folder or URL prefix
            of them, a shard index ``.json``, or
            :class:`slipstream.WebDataset`), a LitData dataset (its folder
            or URL, or :class:`slipstream.LitData`), a Hugging Face
            dataset...  A source's dataset file is kept in the
            cache of :func:`slipstream.cached`; when it is not there yet,
            the first epoch reads the source as it trains and writes the
            file, which later epochs read (in ``"sequential"`` and
            ``"random"`` order; a stream, such as tar shards, in its own
            order through a bounded shuffle: on several ranks when it says
            how many samples it holds (local shards do, and shards in
            object storage that a shard index lists or ``img2dataset``
            counted), otherwise on one rank, where the first epoch has no
            ``len()`` until the stream ends, and without ``indices`` or
            repeats; otherwise the file is written first; see
            :mod:`slipstream.loader.first_epoch`).
        batch_size: samples per batch.
        pipelines: output name -> list of operations.  A list for a field
            that does not start with a decoder gets the field's default
            decoder in front; ``None`` drops the field; fields not named get
            their default decoder.  Another output that reads a field (a
            second view) is declared as ``slipstream.View(field, [...])``;
            any other name must start with a decoder or a ``RefNode``.  A
            name that is none of these is refused, naming the closest field
            (see :mod:`slipstream.loader.outputs`).  Any of these given as
            ``slipstream.Internal(...)`` is read by other outputs (through
            a ``RefNode``) but not yielded.
        order: which samples an epoch visits, in what sequence, with what
            seed: a :class:`slipstream.Order` (default ``Order("random",
            seed=0)``), or its kind alone (``"sequential"``, ``"random"``
            or ``"quasi_random"``), short for ``Order(kind)``.
            ``Order("random", repeats=4)`` is repeated augmentation: each
            sample of an epoch 4 times, on different ranks and with
            different random draws, an epoch as long as one without repeats
            (torchvision's and timm's rule; see :class:`slipstream.Order`).
        sharding: how epochs are shared among ranks and cut into batches
            (``drop_last``): a :class:`slipstream.Sharding` (default: ranks
            from ``torch.distributed``, last batch kept).
        memory: how the bytes of upcoming batches are held, and how many
            batches are prepared ahead: a :class:`slipstream.Memory`
            (default: the file mapped, 3 batches ahead).
        remote: object-store options and the node-local page cache
            (:class:`slipstream.Remote`) for a URL; the defaults read
            credentials from the environment.
        device: where batches go (e.g. ``"cuda"``), copied on a side stream.
        as_dict: yield dicts by output name instead of tuples.
        verbose: a progress bar while the first batch compiles the pipeline
            (only on a terminal, and only when it takes over half a second).
        on_error: what a sample that cannot be decoded (a corrupt, truncated
            or unsupported image) does.  ``"raise"`` (default): the batch
            raises :class:`DecodeError` naming the file, the sample index and
            the cause, and the epoch ends.  ``"skip"``: the sample is left out
            of its batch, which comes out smaller (a batch of nothing but
            failed samples is not yielded at all).  ``"replace"``: the
            sample stays, its image replaced by zeros (black) before the rest
            of its pipeline runs (so after ``Normalize`` it is
            ``-mean/std``), its other fields as stored.  Both record the
            failures (``failures``, ``failure_count``) and warn
            (:class:`SampleWarning`) at the end of each epoch that had any.
            A crop never reads the rows below it, so a truncated file whose
            crop lies above the cut decodes correctly and does not fail.
            A sample whose bytes lie in a data page that fails its checksum
            (checked the first time the process reads the page; for a remote
            dataset, in every download of it) fails too.
            A dataset file changed, truncated or removed under the loader
            raises :class:`FormatError` naming it, whatever the policy.
        indices: the dataset indices to load, integers (default: all).
            An index given ``k`` times is ``k`` samples of each epoch, each
            with its own random draws: ``np.repeat(np.arange(n), 4)`` takes
            four windows of every video (:class:`slipstream.VideoWindow`),
            four crops of every image; an epoch is as long as the indices.
        num_threads: threads of the compiled pipelines (default: Numba's),
            from 1 to ``NUMBA_NUM_THREADS`` (by default the cores).
        cache_dir: for a source, the folder its dataset file is kept in,
            under the name :func:`slipstream.cached` gives it (default:
            :func:`slipstream.convert.default_cache_dir`): a fast local
            disk, or a file system every node of a job shares; or a URL
            (``s3://bucket/prefix``, with ``remote``'s options) where the
            file is shared: a machine that finds it there downloads it into
            the default folder, and the file a first epoch writes is
            uploaded there (see docs/first_epoch.md).
        fields, write_mode, name, version, page_size, workers: for a
            source, what its dataset file holds and how it is written, as
            :func:`slipstream.cached` takes them (e.g. ``write_mode="yuv420"``
            stores the images as planes); ``workers`` encodes in that many
            processes when the file is written first, in that many threads
            when the first epoch writes it.

    A source's dataset file is a copy of it in the cache: the
    ``slipstream.cache`` logger says where it goes and about how big it
    will be; ``slipstream cache list`` shows the cache and ``slipstream
    cache prune`` empties it (see :mod:`slipstream.cache`).  While the
    loader reads a file it holds it (a shared lock): no prune, and no newer
    copy of the same source, removes it.

    Every argument after ``pipelines`` is a keyword.  Another loader's
    keyword (``num_workers``, ``shuffle``...) or one of an earlier release
    (``seed``, ``drop_last``...) is an :class:`ArgumentError` that says
    what to pass instead.

    Attributes:
        options: the option groups it runs with
            (:class:`slipstream.loader.LoaderOptions`, ranks resolved);
            ``order``, ``seed``, ``window_pages``, ``drop_last``, ``rank``,
            ``world_size`` and ``batches_ahead`` read them.
    """

    def __init__(self, path_or_reader: Any, batch_size: int,
                 pipelines: Mapping[str, Sequence[Any] | None] | None = None, *,
                 order: Order | str | None = None, sharding: Sharding | None = None,
                 memory: Memory | None = None, remote: Remote | None = None, device: Any = None,
                 as_dict: bool = False, verbose: bool = True, on_error: str = "raise",
                 indices: Sequence[int] | None = None, num_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None, **unknown: Any) -> None:
        # slipstream.cached's arguments, for a source's file: declared there, taken here as they are.
        cached_options = {name: unknown.pop(name) for name in LOADER_KEYWORDS if name in unknown}
        if unknown:  # another loader's keyword (or one of an earlier release): say what to pass instead
            raise ArgumentError(unknown_keyword(next(iter(unknown))))
        batch_size = _integer(batch_size, "batch_size", 1)
        _check_threads(num_threads)
        order, sharding, memory = _option_groups(order, sharding, memory)
        if on_error not in ON_ERROR:
            raise ArgumentError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.on_error = on_error
        self.failure_log = FailureLog()
        self._stats = StatsRecorder()
        self._pid = os.getpid()
        self.options = LoaderOptions(order, sharding.resolve(), memory, remote)
        self.batch_size, self.num_threads, self.as_dict = batch_size, num_threads, as_dict
        self._pipelines, self._verbose = dict(pipelines or {}), verbose
        # A source without its file yet streams its epochs until the file is
        # complete (see slipstream.loader.first_epoch), alone or with ranks
        # that can exchange what each has (torch.distributed).
        streams = self.world_size == 1 or group_is(self.rank, self.world_size)
        self._epochs: EpochSource = _open(path_or_reader, self.options, batch_size,
                                          (self.rank, self.world_size) if streams else None, on_error, cache_dir,
                                          cached_options)
        try:
            self._set_up(indices, device, verbose)
        except BaseException:
            self._epochs.abandon()  # a first epoch still this loader's: its lock, stream, threads, temporary file
            raise
        self._held: int | None = None
        self._hold_file()
        _open_loaders.add(self)

    def _set_up(self, indices: Sequence[int] | None, device: Any, verbose: bool) -> None:
        """The rest of :meth:`__init__`, over the epoch source :func:`_open` chose."""
        self._epoch = 0
        self._resolution: tuple[int, int] | None = None  # set_resolution's size (None: each crop's own)
        self.reader = self._epochs.reader
        if not self._epochs.serves(indices is not None, self.repeats):
            self._write_file_now(verbose)
        self._indices = self._check_indices(indices)
        self._check_repeated_length()
        self.device = _device(device)
        try:
            self._bind()
        except (IncompleteTables, MemoryError) as exc:
            if not self._epochs.yields_to_file(exc):
                raise
            self._write_file_now(verbose)
            self._indices = self._check_indices(indices)
            self._bind()
        # How epoch 0 is ordered: as the first epoch writing the file can follow it, here or in the run a state
        # resumes (see slipstream.loader.epoch_zero).
        self._epoch_zero: EpochZero = self._epochs.epoch_zero(self.order)
        self._pages = self._sample_pages()
        self._epoch, self._resume_at = 0, 0
        self._segments: list[tuple[int, list[int]]] = []  # earlier runs of this epoch on other world sizes
        self._left: int | None = None  # where the last iteration of this epoch stopped before its end
        self._iteration = 0  # counts iterations started, so that an earlier one stopping later is not recorded
        self._iterator: weakref.ref | None = None  # weak: a dropped iterator stops its thread
        self._starting = threading.Lock()  # iter() from two threads at once: one epoch after the other

    # ---------------------------------------------------------------- options

    order = _option("order", "kind", 'The order\'s kind: ``"random"``, ``"sequential"`` or ``"quasi_random"``.')
    seed = _option("order", "seed", "Seed of the order and of every random operation.")
    window_pages = _option("order", "window_pages", 'Pages shuffled together by ``"quasi_random"``.')
    repeats = _option("order", "repeats", "Copies of each sample in an epoch (repeated augmentation; 1: none).")
    selected_round = _option("order", "selected_round", "The rounding of an epoch's length under repeated "
                                                        "augmentation (see :class:`slipstream.Order`).")
    drop_last = _option("sharding", "drop_last", "Whether incomplete batches (and samples that do not divide "
                                                 "among ranks) are dropped.")
    rank = _option("sharding", "rank", "This loader's rank (0 when not distributed).")
    world_size = _option("sharding", "world_size", "The number of ranks sharing each epoch (1 when not "
                                                   "distributed).")
    batches_ahead = _option("memory", "batches_ahead", "Batches prepared while the training step runs.")

    @property
    def _draws_apart(self) -> bool:
        """Whether an epoch holds copies of a sample that draw apart
        (repeated augmentation, or an index given more than once), so that
        its places are draw identities rather than dataset indices."""
        return self.repeats > 1 or self._copies_given

    @property
    def indices(self) -> np.ndarray:
        """The dataset indices each epoch visits (before its order).

        Raises:
            TypeError: epoch 0 streams from a source that does not say how
                many samples it holds, and has not reached its end.
        """
        if self._indices is None:
            self._indices = np.arange(len(self.reader), dtype=np.int64)
        return self._indices

    # ---------------------------------------------------------------- set-up

    def _write_file_now(self, verbose: bool) -> None:
        """Give the first epoch up for the file, written now (from the source) and read from the start."""
        self._epochs = self._epochs.written_now(verbose)
        self.reader = self._epochs.reader

    def _hold_file(self) -> None:
        """Hold the dataset file this loader reads (not a first epoch's
        file in progress, nor a file of its own out of the cache), so
        that no prune or newer copy removes it while the loader lives."""
        cache_files.let_go(self._held)
        self._held = None
        path = self._epochs.held_file()
        if path is not None:
            self._held = cache_files.hold(path)

    def _bind(self) -> None:
        """Read the epoch source's dataset through its stager: the
        decoders' source and the compiled pipelines."""
        reader = self.reader = self._epochs.reader
        self.memory = self._epochs.stager
        self.source = DecodeSource(reader, self.memory.storage, samples=self._epochs.columns())
        resolved = resolve_outputs(self._pipelines, reader.fields, self.source, reader.path)
        self._resolved, self._sizes = resolved, None
        # resolve_outputs checked and folded each list already (a Pipeline would do it again): straight to the graph,
        # compiled with every resizable crop at its largest size (the code and the memory plan).
        graph = Graph(resolution.at_sizes(resolved, resolution.largest))
        self.output_names = list(graph.outputs)
        self.compiled = CompiledPipeline(graph, self.batch_size, self.seed, self.batches_ahead + 2,
                                         single=False, verbose=self._verbose, threads=self.num_threads)
        self._apply_sizes(self._epoch)

    def _apply_sizes(self, epoch: int) -> None:
        """Run the resizable crops at their sizes for ``epoch``
        (:mod:`slipstream.loader.resolution`): the compiled pipeline takes
        the shapes and values of that graph, compiling nothing."""
        crops = resolution.resizable_crops(self._resolved)
        size_of = resolution.epoch_sizes(self._resolution, epoch)
        sizes = [size_of(crop) for crop in crops]
        if sizes == self._sizes:
            return
        self.compiled.reshape(Graph(resolution.at_sizes(self._resolved, size_of)))
        self._sizes = sizes

    def set_resolution(self, size: Any) -> None:
        """Decode every resizable crop (a ``RandomResizedCrop`` or
        ``CenterCrop`` given a ``max_size`` or a
        :class:`~slipstream.ops.ResolutionSchedule`) at ``size`` from the
        next ``iter()`` on: progressive resizing without compiling anything,
        in memory planned for the crops' largest size.  ``size`` is an int
        or (height, width); None goes back to each crop's own size (its
        schedule's at the epoch).  ``state_dict()`` records it, so that a
        resumed run decodes at the same size.

        Raises:
            ArgumentError: no crop can change its size, or ``size`` is
                larger than a crop's largest (its ``max_size``).
        """
        self._resolution = resolution.checked_resolution(size, resolution.resizable_crops(self._resolved),
                                                         "set_resolution")

    @property
    def resolution(self) -> tuple[int, int] | None:
        """The size :meth:`set_resolution` set (None: each crop's own)."""
        return self._resolution

    def _take_up(self, step: Callable[[], EpochSource]) -> None:
        """Read from the source ``step`` gives (the epoch source's next
        step) from now on: the finished file's, bound in place of the
        first epoch's; or the same source.  When the step fails for good,
        nothing is left to read: the loader is closed, and says why when
        asked for an epoch again."""
        epochs = self._epochs
        try:
            after = step()
        except BaseException as exc:
            refusal = epochs.failed_to_finish(exc)
            if refusal is None:
                raise
            self._epochs = refusal
            epochs.abandon()
            self.close()
            raise
        if after is epochs:
            return
        self._epochs = after
        self._hold_file()
        self._bind()
        self._pages = self._sample_pages()

    def _check_repeated_length(self) -> None:
        """Refuse repeated augmentation whose length rule leaves each rank
        no sample of a dataset that has some (torchvision's sampler gives
        such an epoch silently)."""
        if self.repeats == 1:
            return
        samples = self.indices.size
        if not samples or orders.selected(samples, self.world_size, self.selected_round):
            return
        raise ArgumentError(f"Order(repeats={self.repeats}, selected_round={self.selected_round}) gives each of "
                            f"{self.world_size} ranks ({samples} // {self.selected_round} * "
                            f"{self.selected_round}) // {self.world_size} = 0 samples per epoch of "
                            f"{self.reader.path}: pass a smaller selected_round (0: ceil(samples / ranks))")

    def _check_indices(self, indices: Sequence[int] | None) -> np.ndarray | None:
        """The ``indices`` given, checked against the dataset; None (every
        index) stays None until the dataset's length is known
        (:attr:`indices`): a stream of unknown length learns it at its end.
        Notes whether an index is given more than once (its occurrences
        then draw apart: :meth:`_epoch_order`)."""
        self._copies_given = False
        if indices is None:
            return None
        n = len(self.reader)
        given = np.asarray(indices)
        if given.size and given.dtype.kind not in "iu":
            # A boolean mask would become the indices 0 and 1, floats would be cut to integers.
            mask = " (for a boolean mask, pass np.flatnonzero(mask))" if given.dtype.kind == "b" else ""
            raise ArgumentError(f"indices must be integer dataset indices in [0, {n}) for {self.reader.path}, "
                                f"got an array of {given.dtype}{mask}")
        chosen = given.astype(np.int64).reshape(-1)
        if chosen.size and (chosen.min() < 0 or chosen.max() >= n):
            raise ArgumentError(f"indices must lie in [0, {n}) for {self.reader.path}")
        most = int(np.unique(chosen, return_counts=True)[1].max()) if chosen.size else 1
        if most * self.repeats > orders.MAX_REPEATS:
            raise ArgumentError(f"an index given {most} times, each repeated {self.repeats} times, makes more than "
                                f"{orders.MAX_REPEATS} copies of a sample in an epoch of {self.reader.path}")
        self._copies_given = most > 1
        return chosen

    # ---------------------------------------------------------------- epochs

    def _sample_pages(self) -> np.ndarray | None:
        """What ``"quasi_random"`` orders by: the first page of each sample
        in the file (None: not quasi-random, or no file yet)."""
        return self._epochs.sample_pages() if self.order == "quasi_random" else None

    def _epoch_order(self, epoch: int, world_size: int, zero: EpochZero) -> np.ndarray:
        """The places epoch ``epoch`` hands out when it starts on
        ``world_size`` ranks, as draw identities (the dataset indices
        themselves without repeats or an index given twice; see
        :func:`orders.numbered_copies` and :func:`orders.repeated`); epoch 0
        as ``zero`` orders it.  ``"quasi_random"`` without a file at all
        (given up for memory: docs/first_epoch.md) is random."""
        kind = "random" if self.order == "quasi_random" and self._pages is None else self.order
        if epoch == 0:
            order = zero.order(kind, self.indices, self._pages, self.seed, self.window_pages, len(self.reader))
        else:
            order = orders.epoch_order(kind, self.indices, self._pages, self.seed, epoch, self.window_pages)
        if self._copies_given:
            order = orders.numbered_copies(order)
        return orders.repeated(order, self.repeats, world_size, self.selected_round)

    def _strided(self, epoch: int, zero: EpochZero) -> bool:
        """Whether ranks share epoch ``epoch``'s order place by place
        (:func:`orders.shard`) rather than in blocks: under repeated
        augmentation, and in a stream's epoch 0 (``zero`` as for
        :meth:`_epoch_order`), where a rank's block would start far into
        the stream, each rank's ``k``-th sample is the order's
        ``k * world_size + rank``-th."""
        return self.repeats > 1 or (epoch == 0 and zero.strided)

    def epoch_draws(self, epoch: int) -> np.ndarray:
        """This rank's draw identities for ``epoch``, in order: the dataset
        indices of :meth:`epoch_samples`, except that under repeated
        augmentation copy ``c`` of sample ``i`` is ``i + (c << 48)`` (what
        its random operations draw from).

        Raises:
            TypeError: epoch 0 streams from a source that does not say how
                many samples it holds, and has not reached its end (as for
                :meth:`epoch_samples`, :meth:`epoch_batches` and ``len()``).
        """
        resumed = epoch == self._epoch and bool(self._segments)
        order = self._epoch_order(epoch, self._segments[0][0] if resumed else self.world_size, self._epoch_zero)
        strided = self._strided(epoch, self._epoch_zero)
        if resumed:
            order = orders.remaining(order, self._segments, self.batch_size, self.drop_last, strided)
        return orders.shard(order, self.rank, self.world_size, self.drop_last, strided)

    def epoch_samples(self, epoch: int) -> np.ndarray:
        """This rank's samples for ``epoch``, in order (for an epoch resumed
        on another number of ranks, its share of what was left)."""
        draws = self.epoch_draws(epoch)
        return orders.sample_of(draws) if self._draws_apart else draws

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches for ``epoch``."""
        return orders.batches(self.epoch_samples(epoch), self.batch_size, self.drop_last)

    def __len__(self) -> int:
        """Batches per epoch (this rank's).

        Raises:
            TypeError: epoch 0 streams from a source that does not say how
                many samples it holds, and has not reached its end.
        """
        if self.repeats > 1:
            per_rank = orders.selected(self.indices.size, self.world_size, self.selected_round)
        else:
            per_rank = orders.share_size(self.indices.size, self.world_size, self.drop_last)
        return orders.batch_count(per_rank, self.batch_size, self.drop_last)

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` run epoch ``epoch`` from its start, or,
        for the epoch a loaded state resumes (:meth:`load_state_dict`), from
        where the state says: the usual ``loader.set_epoch(epoch)`` at the
        top of each epoch keeps a resume, as torch's samplers' ``set_epoch``
        does under torchdata's ``StatefulDataLoader``.

        Raises:
            ArgumentError: ``epoch`` is not an integer in ``[0, 2**63 - 1]``
                (the epochs a state records).
        """
        number = _integer(epoch, "epoch", 0)
        if number > resume.MAX_EPOCH:
            raise ArgumentError(f"epoch must be at most {resume.MAX_EPOCH}, got {epoch}")
        if number == self._epoch:
            self._go_to(number, self._resume_at, self._segments)
        else:
            self._go_to(number, 0, [])

    def _go_to(self, epoch: int, batch: int, segments: list[tuple[int, list[int]]]) -> None:
        """Make the next ``iter()`` run ``epoch`` from ``batch`` (after the
        runs ``segments``); where an earlier iteration stopped no longer
        counts."""
        self._epoch, self._resume_at, self._segments = epoch, batch, segments
        self._left, self._iteration = None, self._iteration + 1

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` runs (or the one running)."""
        return self._epoch

    def __iter__(self) -> EpochIterator:
        """The batches of the current epoch.  After a complete epoch the
        next ``iter()`` runs the following one; an iteration left early
        starts its epoch again (or resumes it, after ``load_state_dict``).
        An iterator still running ends (``StopIteration``) when the next
        ``iter()`` starts, whichever thread calls it: one epoch runs at a time."""
        with self._starting:
            return self._start_epoch()

    def _start_epoch(self) -> EpochIterator:
        if os.getpid() != self._pid:  # a forked child has the loader's memory but none of its threads
            raise SlipstreamError(f"this Loader of {self.reader.path} was created in another process (pid "
                                  f"{self._pid}); a forked process, such as a DataLoader worker, must create a "
                                  f"Loader of its own (e.g. on first use, or in worker_init_fn)")
        running = self._running()
        stopping = running is not None and not running.closed
        self._stop_iterator()
        if stopping:  # stopped mid-epoch by this call (from another thread, say): the batch its user holds stays
            self.compiled.renew_outputs()
        self._take_up(functools.partial(self._epochs.for_epoch, self._epoch))
        self.reader.verify()  # planning an epoch reads the file's tables: not from a changed file
        if self._held is None:  # not held yet (its writer's lock lasted): no prune removes it while it is read
            self._hold_file()
        self._apply_sizes(self._epoch)
        start = self._resume_at
        self._go_to(self._epoch, 0, self._segments)
        # With copies of a sample, the draw identities of each batch, which its random operations draw from.
        draws = tuple(orders.batches(self.epoch_draws(self._epoch), self.batch_size, self.drop_last)[start:]) \
            if self._draws_apart else None
        batches, stop_batches = self._epochs.batches(start, functools.partial(self._ordered_batches, start, draws))
        plan = EpochPlan(epoch=self._epoch, batches=batches, first_batch=start, stop_batches=stop_batches,
                         pipeline=self.compiled, memory=self.memory, source=self.source, reader=self.reader,
                         names=tuple(self.output_names), as_dict=self.as_dict, device=self.device,
                         on_error=self.on_error, failures=self.failure_log, batches_ahead=self.batches_ahead,
                         draws=draws, on_stop=functools.partial(self._stopped, self._iteration),
                         on_fail=self._epoch_failed, stats=self._stats)
        self._epoch_began = self.stats()  # what the epoch's log line counts from
        iterator = EpochIterator(plan, on_end=self._epoch_finished)
        self._iterator = weakref.ref(iterator)
        return iterator

    def _ordered_batches(self, start: int, draws: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...]:
        """The running epoch's batches from batch ``start`` on, as its order
        cuts them: the samples of ``draws`` when copies of samples drew
        them."""
        if draws is not None:
            return tuple(orders.sample_of(b) for b in draws)
        return tuple(orders.batches(self.epoch_draws(self._epoch), self.batch_size, self.drop_last)[start:])

    def _running(self) -> EpochIterator | None:
        return self._iterator() if self._iterator is not None else None

    def _epoch_finished(self, iterator: EpochIterator) -> None:
        self.failure_log.warn(self.reader.path, iterator.epoch, self.on_error)
        if STATS_LOG.isEnabledFor(logging.INFO):
            STATS_LOG.info("%s: %s", self.reader.path, self.stats() - self._epoch_began)
        if iterator is self._running():
            self._go_to(self._epoch + 1, 0, [])
            self._iterator = None

    def _epoch_failed(self, error: BaseException) -> None:
        """An error ended an epoch: when the epoch source says so (epoch 0
        of a first epoch, on one process), close the loader, letting go of
        its dataset (see :meth:`EpochSource.failed_epoch`); it runs no more
        epochs."""
        refusal = self._epochs.failed_epoch(error, self._epoch)
        if refusal is None:
            return
        try:
            self.close()
        except Exception:  # completing the file failed too: the error that ended the epoch is the one to see
            pass
        finally:
            self._epochs = refusal

    def _stopped(self, iteration: int, position: int) -> None:
        """Iteration ``iteration`` stopped before its epoch's end, ``position``
        batches into it: where ``state_dict()`` says the loader is, if it is
        the last one started and nothing moved the loader since."""
        if iteration == self._iteration:
            self._left = position

    def stats(self, reset: bool = False) -> LoaderStats:
        """What the loader did since it was made (or last reset): how long
        the training loop waited for batches against the time between them
        (``waiting_share``, ``bottleneck``), samples per second, where the
        loader thread's time went (reading pages, the compiled pipeline,
        each of its stages and each operation's share of them, checks, the
        copy to the device, waiting with its batches ahead made) and the
        samples skipped
        (:mod:`slipstream.loader.stats`).  ``print(loader.stats())`` shows
        them in words; ``logging.getLogger("slipstream.loader")`` at
        ``INFO`` logs them at each epoch's end.

        Args:
            reset: start the figures again from zero after taking them.
        """
        totals = (self.compiled.stage_seconds(), self.compiled.operation_seconds(), self.compiled.compile_seconds,
                  self.failure_log.count)
        taken = self._stats.snapshot(self._epoch, *totals)
        if reset:
            self._stats.reset(*totals)
        return taken

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: load it into a fresh loader (same dataset,
        indices, order, seed, batch size and ``drop_last``) to continue with
        exactly the batches that would have come next, on the same number of
        ranks or another (see :meth:`load_state_dict`).  After an iteration
        left early (a ``break``, an exception out of the loop), where it
        stopped, as torchdata's ``StatefulDataLoader`` says, until the
        loader moves (``iter()``, which starts that epoch again,
        ``set_epoch`` or ``load_state_dict``).  A plain dict of
        ints, strings and lists (see :mod:`slipstream.loader.resume`)."""
        running = self._running()
        if running is not None and not running.closed:
            batch = running.position
        else:
            batch = self._resume_at if self._left is None else self._left
        sizes = None if self._resolution is None else list(self._resolution)
        return {"epoch": self._epoch, "batch": int(batch), "world_size": self.world_size, "rank": self.rank,
                "segments": [[w, list(p)] for w, p in self._segments], "resolution": sizes, **self._identity()}

    def _identity(self) -> dict[str, Any]:
        """What a state must share with this loader to load into it
        (:data:`slipstream.loader.resume.IDENTITY`): the dataset, indices
        and samples as the epoch source names them, and the options."""
        options = {"order": self.order, "seed": self.seed, "window_pages": self.window_pages, "repeats": self.repeats,
                   "selected_round": self.selected_round, "batch_size": self.batch_size, "drop_last": self.drop_last}
        return {**self._epochs.identity(self._epoch_zero, self._epoch, lambda: self.indices), **options}

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Continue from ``state_dict()``: the next ``iter()`` starts where
        the saved loader stopped.

        On the same number of ranks, each rank continues with exactly the
        batches its saved self would have given next.  On another number
        (elastic resume: a job stopped on W ranks restarts on W'), the rest
        of the epoch is shared among the new ranks: they hand out exactly
        the samples the W ranks had not handed out yet, each once across
        them (padded or cut to equal shares as usual, by ``drop_last``), in
        the epoch order; later epochs are those of a fresh W'-rank run.
        What was handed out is known from the ranks' positions: in
        lockstep training (DDP) every rank has given the same number of
        batches, so any rank's state serves; otherwise pass the list of
        every rank's state (e.g. from ``torch.distributed.all_gather_object``).

        The whole state is checked before anything changes: a refused state
        leaves the loader as it was.

        Raises:
            ArgumentError: the state is not one ``state_dict()`` writes (a
                field missing, of another type or out of range, a position
                beyond its epoch), or it was taken over another dataset,
                other indices, order, seed, window, repeats, batch size or
                ``drop_last``; the message names the field, the state's value
                and this loader's (or what is allowed).  A state written
                before slipstream recorded its dataset, indices and window
                resumes only a loader over the whole dataset, in its order,
                with the default window for ``"quasi_random"``; one written
                before repeated augmentation only a loader without repeats.

        During epoch 0 over a stream that does not say its length, a state
        of that epoch taken on one rank resumes it as the stream is read
        again (its position checked once the stream ends); any other state
        needs the stream's length: the rest of the stream is read and the
        file completed first.
        """
        given = resume.states_of(state)
        # The stream's epoch 0 of a state taken before its length was known (by the file's name).
        streamed = stream_name(self.reader)
        if not self._epochs.counted:
            if self._resume_stream(given, streamed):
                return
            # Any other state needs the stream's length: what can be checked without it is, first.
            self._check_without_length(given)
            self._stop_iterator()
            self._take_up(self._epochs.finished)
        mine = self._identity()
        # A state taken while the first epoch wrote this file resumes a loader over the file (or one writing
        # it again); a first epoch in an order of its own (a stream's) is resumed in that order.
        written = {zero.name(self.reader): zero for zero in EPOCH_ZEROS}
        written[streamed] = STREAMED
        named = [written[one["dataset"]] for one in given if one.get("dataset") in written]
        states = [{**one, "dataset": mine["dataset"]} if one.get("dataset") in written else one for one in given]
        if self._unrecorded("indices") is None:  # over every sample, as the stream's epoch 0 is
            states = [{**one, "indices": mine["indices"], "samples": mine["samples"]}
                      if one.get("dataset") == mine["dataset"] and one.get("indices") == "all" else one
                      for one in states]
        saved = resume.positions(states, mine, self._unrecorded)
        first = saved[0]
        first_resolution = given[0].get("resolution")  # states written before resizing have none
        zero = next((one for one in named if one is not OVER_FILE), self._epoch_zero)
        order = self._epoch_order(first.epoch, first.segments[0][0] if first.segments else first.world_size, zero)
        point = resume.resume_point(saved, order, self.world_size, self.batch_size, self.drop_last,
                                    self._strided(first.epoch, zero))
        sizes = resolution.checked_resolution(first_resolution, resolution.resizable_crops(self._resolved),
                                              "cannot resume: the state's resolution")
        self._stop_iterator()
        self._go_to(point.epoch, point.batch, point.segments)
        self._epoch_zero = zero
        self._resolution = sizes

    def _resume_stream(self, given: list[Mapping[str, Any]], streamed: str) -> bool:
        """Resume epoch 0 over a stream that does not say its length from
        the one state ``given`` of it, if that is what it is (the stream's
        dataset identity ``streamed``, epoch 0): True once done.  The
        position is checked once the stream has ended."""
        if len(given) != 1 or given[0].get("dataset") != streamed:
            return False
        resume.check_identity(given[0], self._identity(), self._unrecorded)
        saved = resume.position(given[0])
        if saved.epoch != 0:
            return False
        if saved.world_size != 1 or saved.segments:
            raise ArgumentError(f"the state has world_size={saved.world_size} and {len(saved.segments)} segments, "
                                f"but epoch 0 streams from a source that does not say how many samples it holds "
                                f"on one rank only")
        self._stop_iterator()
        self._go_to(0, saved.batch, [])
        return True

    def _check_without_length(self, given: list[Mapping[str, Any]]) -> None:
        """Refuse states that cannot resume this loader for a reason other
        than their dataset, indices and sample count, which need the length
        of the stream this loader's first epoch reads (see
        :meth:`load_state_dict`)."""
        mine = self._identity()
        unknown = ("dataset", "indices", "samples")
        resume.positions([{**one, **{key: mine[key] for key in unknown if key in one}} for one in given], mine,
                         lambda key: None if key in unknown else self._unrecorded(key))

    def _unrecorded(self, key: str) -> str | None:
        """Why a state that does not record ``key`` (written before slipstream
        recorded it) cannot stand in for this loader's value, or ``None``
        when it can: when this loader has the value every loader had unless
        told otherwise.  Its dataset cannot be checked (its sample count
        still is)."""
        if key == "indices" and self._indices is not None and \
                not np.array_equal(self._indices, np.arange(len(self.reader))):
            return "this loader does not load the whole dataset in its order"
        default = orders.DEFAULT_WINDOW_PAGES
        if key == "window_pages" and self.order == "quasi_random" and self.window_pages != default:
            return f"this loader's quasi_random order uses a window other than the default {default}"
        if key in resume.REPEATS and self.repeats > 1:
            return f"this loader repeats each sample {self.repeats} times"
        return None

    # ---------------------------------------------------------------- clean-up

    def _stop_iterator(self) -> None:
        running = self._running()
        if running is not None:
            running.close()
        self._iterator = None

    def close(self) -> None:
        """Stop the loader's thread and release its pages (the stager and its
        store).  During a first epoch, the file is completed when every
        sample has arrived, else given up (no dataset file is left)."""
        self._stop_iterator()
        cache_files.let_go(self.__dict__.get("_held"))
        self._held = None
        self._epochs.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def explain(self) -> str:
        """What the loader runs: the generated source of every compiled
        stage (one fused, parallel function per stage) and the memory plan
        (each buffer's shape, dtype and bytes)."""
        return self.compiled.explain()

    @property
    def failures(self) -> dict[int, str]:
        """Dataset index -> why it could not be decoded, for every sample
        skipped or replaced so far (``on_error="skip"`` or ``"replace"``)."""
        return dict(self.failure_log.reasons)

    @property
    def failure_count(self) -> int:
        """Samples skipped or replaced so far, over all epochs (a sample that
        fails in every epoch counts once per epoch)."""
        return self.failure_log.count

    def __repr__(self) -> str:
        try:
            length = f"{len(self)} batches per epoch"
        except TypeError:
            length = "epoch 0's length not known yet"
        return (f"Loader({str(self.reader.path)!r}, batch_size={self.batch_size}, order={self.order!r}, "
                f"outputs={self.output_names}, {length}, rank {self.rank}/{self.world_size})")


@atexit.register
def _close_all() -> None:
    """No loader thread outlives the interpreter's shutdown."""
    for loader in list(_open_loaders):
        loader.close()


def _open(source: Any, options: LoaderOptions, batch_size: int, ranks: tuple[int, int] | None, on_error: str,
          cache_dir: str | os.PathLike | None, cached_options: dict[str, Any]) -> EpochSource:
    """The source of a loader's epochs (with its ``options`` and
    ``batch_size``): a dataset's file, or, for a source whose file is not in
    the cache (``cache_dir``, None: the default) yet, a first epoch that
    writes it (when the loader streams, on ``ranks``: its ``(rank,
    world_size)``; the source reads in any order, or is a stream, which on
    several ranks must say its length and read alike in every process; and
    no other process is writing the file), treating samples it cannot
    encode by the loader's ``on_error``; ``cached_options``: the arguments
    of :func:`slipstream.cached` given (:data:`slipstream.convert.LOADER_KEYWORDS`)."""
    remote = options.remote
    found = find_source(source, remote) if isinstance(source, (str, os.PathLike)) else source
    if isinstance(source, Reader) or found is None:
        if cache_dir is not None:
            raise ArgumentError(f"cache_dir= is the folder a source's dataset file is kept in, but {source} is a "
                                f"dataset already: leave cache_dir out")
        if cached_options:  # what a source's file is written with: no keyword of a loader over a dataset
            raise ArgumentError(unknown_keyword(next(iter(cached_options))))
        return FileEpochs(source if isinstance(source, Reader) else open_dataset(source, remote=remote),
                          options.memory)
    source = found
    from slipstream.convert import UnidentifiedSource, build, cache_entry

    written = dict(cached_options)
    workers = written.pop("workers", None)
    try:
        entry = cache_entry(source, cache_dir=cache_dir, remote=remote, **written)
    except UnidentifiedSource:
        raise ArgumentError(f"Loader cannot tell what a {type(source).__name__} holds, so it cannot find or keep its "
                            f"dataset file in the cache: write the file once with ss.cached(source, name=...) "
                            f"(and version= when the content changes) and give the Loader the path it "
                            f"returns") from None
    # A stream streams its first epoch on one rank; on several, when it says how many samples it holds and each
    # rank reads the same samples from it.
    samples = entry.samples
    streams = not isinstance(samples, SampleStream) or \
        (ranks is not None and (ranks[1] == 1 or (samples.length_hint() is not None and samples.repeatable())))
    if ranks is not None and streams:
        lock = claim(entry, *ranks)
        if lock is not None:
            try:
                first = FirstEpoch(entry, lock, ranks if ranks[1] > 1 else None, on_error,
                                   workers=None if workers is None else max(workers, 1))
                cache_use.announce(entry, "written by the loader's first epoch as it trains")
                return first_epoch_source(first, options, batch_size)
            except BaseException as exc:  # nothing streams: the next Loader, or another process, may write it
                lock.__exit__(None, None, None)
                if not isinstance(exc, NativeMemoryError) or ranks[1] > 1:
                    raise
                # The address space a first epoch reserves for its pages is refused (a limit such as ulimit -v).
                warnings.warn(f"{exc}: the first epoch cannot stream from {entry.samples!r} under this process's "
                              f"limits, so its dataset file is written first", CacheWarning, stacklevel=3)
    return FileEpochs(Reader(build(entry, workers=workers)), options.memory)


def _check_threads(num_threads: int | None) -> None:
    """Refuse a ``num_threads`` that Numba cannot run (ArgumentError naming the range)."""
    from numba import config

    if num_threads is not None and (not isinstance(num_threads, int) or isinstance(num_threads, bool)
                                    or not 1 <= num_threads <= config.NUMBA_NUM_THREADS):
        raise ArgumentError(f"num_threads must be None or an integer from 1 to {config.NUMBA_NUM_THREADS} "
                            f"(NUMBA_NUM_THREADS), got {num_threads!r}")


def _option_groups(order: Order | str | None, sharding: Sharding | None,
                   memory: Memory | None) -> tuple[Order, Sharding, Memory]:
    """The loader's option groups as given, defaults for those not given;
    an order's kind alone (``"random"``) is short for ``Order(kind)``.

    Raises:
        ArgumentError: a group is not of its class (an enum such as FFCV's
            ``OrderOption`` is refused by :class:`Order`, naming the kinds).
    """
    if isinstance(order, (str, enum.Enum)):
        order = Order(order)
    groups = {"order": order, "sharding": sharding, "memory": memory}
    for group, kind in GROUPS.items():
        given = groups[group]
        if given is not None and not isinstance(given, kind):
            raise ArgumentError(f"{group} must be a slipstream.{kind.__name__}"
                                f"{' or one of ' + str(orders.ORDERS) if kind is Order else ''}, got {given!r}")
        groups[group] = given if given is not None else kind()
    return groups["order"], groups["sharding"], groups["memory"]


def _device(device: Any) -> Any:
    """``device`` as a checked ``torch.device``, None for the CPU."""
    if device is None:
        return None
    checked = torch_device(device)
    return None if checked.type == "cpu" else checked
