"""Stage 4 of the replay data pipeline (docs/data.md), for data larger than memory: a pool of
K checkpoints of one or more runs held as one frame store, a new draw every N batches.

batch_rl's ``FixedReplayBuffer`` keeps 5 of a run's 50 checkpoints in memory and its runner
draws 5 new ones (``reload_buffer(num_buffers=5)``) at every iteration of 250,000 agent
steps (62,500 gradient steps at its ``update_period`` 4). :class:`CheckpointPool` does the
same with a draw that is a function of (seed, draw number) alone, so that a resumed run holds
the same checkpoints at the same batch without any saved state:

  * the checkpoints (units) are every plan entry (``replay_plan.plan_from`` of the subset) of
    every run that holds a transition, in run order then suffix order; M of them;
  * draw ``j`` covers batches ``[j N, (j + 1) N)``; draws come in epochs of ``ceil(M / K)``:
    epoch ``e`` is the permutation ``np.random.default_rng([seed, e]).permutation(M)`` and
    draw ``c`` of the epoch takes its entries ``c K .. c K + K - 1`` (modulo M: the last draw
    of an epoch is filled from the epoch's start). Every checkpoint is drawn at least once in
    every ``ceil(M / K)`` draws, and a draw never holds a checkpoint twice (batch_rl draws
    each reload independently, so some checkpoints may go unseen);
  * batch ``i`` is sampled uniformly over the transitions of the pool of draw ``i // N`` with
    ``np.random.default_rng([batch_seed, i])`` (``pipeline.sample_batch``), as the whole
    store's batches are (batch_rl first picks one of the K buffers uniformly and takes the
    whole batch from it).

Only one draw is in memory: a swap drops the pool's store before the next one is read (the
batches already sampled are copies). The checkpoints' small arrays are read once when the pool
is made (the size of each checkpoint: |D| of the whole data, and the memory the K largest need,
checked before anything else is read), and of each observation file what can be checked without
reading its frames (``dqn_replay.check_frames_file``: its .npy header, and its gzip trailer's
length, so that a file cut short is named then, not when a draw reaches it); a swap reads its K
checkpoints' files again, and what fails then is a DatasetError naming the draw and the file.

A pool is used by one batch stream at a time (:meth:`open_stream`): a stream opened later
makes the earlier one's calls fail (``StaleStream``) instead of swapping draws under it.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_plan
from ccvl_tf.data import replay_source
from ccvl_tf.data.frame_store import FrameStore, Reserve
from ccvl_tf.data.replay_files import DatasetError

# One reload per batch_rl iteration: 250,000 agent steps at update_period 4.
BATCH_RL_SWAP_STEPS = 62_500


class StaleStream(RuntimeError):
  """A batch stream asked the pool for data after a newer stream was opened on it."""


@dataclasses.dataclass(frozen=True)
class Unit:
  """One checkpoint of the pool: run ``run`` (index into the pool's runs), its plan entry."""
  run: int
  entry: tuple                 # replay_plan entry: (suffix, rows[, "prefix"])
  num_frames: int
  num_transitions: int

  @property
  def suffix(self) -> int:
    return int(self.entry[0])


def _unit_bytes(unit: Unit, frame_bytes: int) -> int:
  """The frame store's memory for ``unit`` (FrameStore.from_loaded's estimate)."""
  return unit.num_frames * (frame_bytes + 9) + unit.num_transitions * 8


def _refuse_a_run_given_twice(sources: Sequence[replay_source.ReplaySource]) -> None:
  """ValueError naming both when two of the pool's runs are one: the same directory however
  spelled (a symlink, '..': the resolved path), or a byte-identical copy (the same files,
  sizes and records: `replay_source.listing_sha256`, the hash a run's identity records).
  Pooled twice, a run's transitions would count twice in |D| (and so in n(s)^-1) and be drawn
  twice as often."""
  seen = {}
  for source in sources:
    where = source.replay_dir
    keys = [("path", where.rstrip("/") if source.remote else os.path.realpath(where))]
    if not source.remote and source.names is not None:  # (remote: a stat per file, skipped)
      keys.append(("data", replay_source.listing_sha256(where, source.names, source.remote)))
    for kind, key in keys:
      if (kind, key) in seen:
        same = ("is the same directory as {}".format(seen[(kind, key)]) if kind == "path" else
                "holds the same data as {} (the same files, sizes and records: listing hash "
                "{})".format(seen[(kind, key)], key))
        raise ValueError("--dataset_dir: {} {}; a run given twice would be pooled twice, its "
                         "transitions counted twice: give each run once".format(where, same))
      seen[(kind, key)] = where


class CheckpointPool:
  """K checkpoints of the runs ``replay_dirs`` (paths or ``replay_source.ReplaySource``), of
  ``subset``, in memory as one :class:`FrameStore`, drawn anew every ``swap_steps`` batches
  (see the module doc).

  Raises ValueError naming the setting for K < 1, K larger than the number of checkpoints, a
  swap period < 1, runs of different stack sizes or frame shapes; DatasetError (from the
  readers) for a damaged checkpoint (a truncated observation file included); MemoryError when the K largest checkpoints and
  ``reserve`` do not fit in the available memory.
  """

  def __init__(self, replay_dirs: Sequence[replay_source.ReplayDir], subset: str,
               pool_checkpoints: int, swap_steps: int, seed: int, *,
               num_actions: Optional[int] = None,
               progress: Optional[Callable[[str], None]] = None,
               reserve: Optional[Reserve] = None):
    if not replay_dirs:
      raise ValueError("a checkpoint pool needs at least one replay directory")
    if int(pool_checkpoints) < 1:
      raise ValueError("--pool_checkpoints must be >= 1 for a checkpoint pool, got {}".format(
          pool_checkpoints))
    if int(swap_steps) < 1:
      raise ValueError("--pool_swap_steps must be >= 1, got {}".format(swap_steps))
    self.k = int(pool_checkpoints)
    self.swap_steps = int(swap_steps)
    self.seed = int(seed)
    self.subset = subset
    self.num_actions = num_actions
    self._progress = progress
    sources = [replay_source.replay_source(d) for d in replay_dirs]
    _refuse_a_run_given_twice(sources)
    self.infos = [dqn_replay.inspect_dir(s) for s in sources]
    first = self.infos[0]
    for info in self.infos[1:]:
      if (info.stack_size, info.observation_shape) != (first.stack_size,
                                                        first.observation_shape):
        raise ValueError(
            "the runs of a checkpoint pool must share one format: {} stacks {} frames of "
            "shape {}, {} stacks {} of shape {}".format(
                first.replay_dir, first.stack_size, list(first.observation_shape),
                info.replay_dir, info.stack_size, list(info.observation_shape)))
    self.stack_size = first.stack_size
    self.frame_shape = tuple(first.observation_shape)
    plans = [replay_plan.plan_from(info, subset) for info in self.infos]
    self._check_count(sum(len(p) for p in plans), "")  # before anything is read
    self.units = self._survey(plans)
    self._check_count(len(self.units), " with transitions")
    frame_bytes = int(np.prod(self.frame_shape))
    self.max_pool_bytes = sum(sorted((_unit_bytes(u, frame_bytes) for u in self.units),
                                     reverse=True)[:self.k])
    if reserve is not None:
      reserve.check(self.num_transitions, self.describe(), self.max_pool_bytes,
                    "of the {} largest checkpoint(s) of the pool".format(self.k))
    self._lock = threading.Lock()
    self._stream = 0
    self._draw: Optional[int] = None
    self._store: Optional[FrameStore] = None
    self.swap_seconds: List[float] = []
    # What the last failed draw of the current stream raised (activate), else None.
    self.failure: Optional[BaseException] = None

  # ------------------------------------------------------------------- survey
  def _check_count(self, m: int, what: str) -> None:
    """ValueError naming --pool_checkpoints when K exceeds the ``m`` checkpoints ``what``."""
    if self.k > m:
      raise ValueError(
          "--pool_checkpoints={} is more than the {} checkpoint(s){} of subset {!r} in {}; give "
          "at most {} (or leave the pool off, --pool_checkpoints=0, to hold the whole "
          "dataset)".format(self.k, m, what, self.subset,
                            ", ".join(i.replay_dir for i in self.infos), m))

  def _survey(self, plans: List[List[tuple]]) -> List[Unit]:
    """Every checkpoint of ``plans`` (one per run), its frames and transitions counted from
    its small arrays (each checked as the frame store checks it)."""
    units = []
    for r, (info, plan) in enumerate(zip(self.infos, plans)):
      slim = []
      for entry in plan:
        chunk = replay_plan.load_plan(info, [entry], num_actions=self.num_actions,
                                      allow_empty=True).chunks[0]
        if chunk.slots.size:  # a checkpoint without transitions adds nothing to a pool
          # Its frames are read only when a draw holds it, maybe hours into a run (or never):
          # what can be checked without reading them is checked now.
          dqn_replay.check_frames_file(chunk.path, self.frame_shape, chunk.stored_rows)
          units.append(Unit(run=r, entry=tuple(entry), num_frames=chunk.rows,
                            num_transitions=int(chunk.slots.size)))
        slim.append(dataclasses.replace(
            chunk, order=None, slots=np.zeros(0, np.int64), action=np.zeros(0, np.int32),
            reward=np.zeros(0, np.float32), terminal=np.zeros(0, np.uint8)))
      replay_plan.check_subset_is_part(info, self.subset, replay_plan.LoadedPlan(
          replay_dir=info.replay_dir, stack_size=info.stack_size,
          frame_shape=tuple(info.observation_shape), chunks=slim))
    return units

  # ------------------------------------------------------------------- queries
  @property
  def num_checkpoints(self) -> int:
    return len(self.units)

  @property
  def num_transitions(self) -> int:
    """|D|: the transitions of every checkpoint of every run (not only the pool's)."""
    return sum(u.num_transitions for u in self.units)

  @property
  def draws_per_epoch(self) -> int:
    """Draws after which every checkpoint has been in the pool: ceil(M / K)."""
    return -(-len(self.units) // self.k)

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return dqn_replay.stacked_shape(self.frame_shape, self.stack_size)

  def describe(self) -> str:
    return "{} (subset {}, {} checkpoint(s), pools of {})".format(
        ", ".join(i.replay_dir for i in self.infos), self.subset, len(self.units), self.k)

  def draw_of_batch(self, batch_number: int) -> int:
    return int(batch_number) // self.swap_steps

  def draw(self, index: int) -> Tuple[int, ...]:
    """The units (indices into ``units``, ascending) of draw ``index``: a function of
    (seed, index) alone (module doc)."""
    if int(index) < 0:
      raise ValueError("draw index must be >= 0, got {}".format(index))
    m = len(self.units)
    epoch, c = divmod(int(index), self.draws_per_epoch)
    perm = np.random.default_rng([self.seed, epoch]).permutation(m)
    return tuple(sorted(int(u) for u in perm[(c * self.k + np.arange(self.k)) % m]))

  def draw_names(self, index: int) -> List[Tuple[str, int]]:
    """(replay_dir, suffix) of each checkpoint of draw ``index``."""
    return [(self.infos[self.units[u].run].replay_dir, self.units[u].suffix)
            for u in self.draw(index)]

  @property
  def current_draw(self) -> Optional[int]:
    return self._draw

  # ------------------------------------------------------------------- loading
  def open_stream(self) -> int:
    """A token for a new batch stream; the streams opened before it are stale from now."""
    with self._lock:
      self._stream += 1
      self.failure = None
      return self._stream

  def activate(self, stream: int, index: int) -> None:
    """Makes draw ``index`` the pool's store for ``stream`` (a swap when another is held).
    What a failed load raises is also kept as :attr:`failure` (the batch stream that called
    this inside tf.data raises it, not the tf.data error that carries it)."""
    with self._lock:
      if stream != self._stream:
        raise StaleStream("a newer batch stream was opened on this checkpoint pool")
      try:
        self._load(int(index))
      except Exception as e:  # pylint: disable=broad-except
        self.failure = e
        raise

  def store_for_batch(self, stream: int, batch_number: int) -> FrameStore:
    """The store batch ``batch_number`` of ``stream`` is sampled from; RuntimeError when the
    pool holds another draw (the stream must :meth:`activate` its draws in order)."""
    store, draw = self._store, self._draw
    if stream != self._stream:
      raise StaleStream("a newer batch stream was opened on this checkpoint pool")
    want = self.draw_of_batch(batch_number)
    if store is None or draw != want:
      raise RuntimeError("batch {} needs draw {} of the checkpoint pool, which holds draw "
                         "{}".format(batch_number, want, draw))
    return store

  def store_of_draw(self, index: int) -> FrameStore:
    """The store of draw ``index``, loaded unless held (and the streams opened so far stale:
    this moves the pool)."""
    with self._lock:
      self._stream += 1
      self._load(int(index))
      return self._store

  def _load(self, index: int) -> None:
    if self._draw == index and self._store is not None:
      return
    t0 = time.perf_counter()
    self._store, self._draw = None, None  # the old frames are freed before the new ones
    chunks = []
    by_run = {}
    for u in self.draw(index):
      by_run.setdefault(self.units[u].run, []).append(self.units[u].entry)
    try:
      for r in sorted(by_run):
        chunks += replay_plan.load_plan(self.infos[r], by_run[r],
                                        num_actions=self.num_actions).chunks
      loaded = replay_plan.LoadedPlan(
          replay_dir="checkpoint pool draw {} of {}".format(index, self.describe()),
          stack_size=self.stack_size, frame_shape=self.frame_shape, chunks=chunks)
      self._store = FrameStore.from_loaded(loaded)
    except DatasetError as e:  # a file changed since the survey, or damage only a read finds
      raise DatasetError("checkpoint pool draw {} (batches {:,} to {:,}): {}".format(
          index, index * self.swap_steps, (index + 1) * self.swap_steps - 1, e)) from e
    self._draw = index
    seconds = time.perf_counter() - t0
    self.swap_seconds.append(seconds)
    if self._progress is not None:
      names = ["{}:{}".format(r, s) for r, s in (
          (self.units[u].run, self.units[u].suffix) for u in self.draw(index))]
      self._progress(
          "Checkpoint pool draw {} (batches {:,} to {:,}): run:suffix {}; {:,} transitions, "
          "{:.1f} MiB, read in {:.1f} s.".format(
              index, index * self.swap_steps, (index + 1) * self.swap_steps - 1,
              " ".join(names), self._store.num_transitions, self._store.nbytes / 2**20,
              seconds))
