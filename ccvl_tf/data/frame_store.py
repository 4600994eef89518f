"""Stage 4 of the replay data pipeline (docs/data.md): the frame store, every 84x84
frame held once (uint8), stacks built at sample time.

More in docs/data.md "Module notes", `ccvl_tf/data/frame_store.py`.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_validity
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_plan
from ccvl_tf.data import store_cache

FRAME_SHAPE = (84, 84)


@dataclasses.dataclass(frozen=True)
class Reserve:
  """What the caller of :meth:`FrameStore.from_replay` will need beside the store, checked
  before the frames are read (a store restored from the cache: once it is restored)."""
  nbytes: int            # memory, e.g. the batches in flight and a train step's tensors
  what: str              # names it in messages, e.g. "training on --batch_size=32 batches"
  min_transitions: int = 0  # fewer transitions in the dataset are refused

  def check(self, num_transitions: Optional[int], source: str = "", store_bytes: int = 0,
            store_what: str = "") -> None:
    """ValueError when the dataset holds fewer than ``min_transitions`` (None: not known
    yet); MemoryError when ``store_bytes`` (not yet allocated) and ``nbytes`` exceed the
    available memory."""
    if num_transitions is not None and num_transitions < self.min_transitions:
      raise ValueError("{} needs at least {:,} transitions, but {} holds {:,}".format(
          self.what, self.min_transitions, source, num_transitions))
    avail = _available_memory()
    if avail is None or store_bytes + self.nbytes <= avail:
      return
    parts = ["{} needs about {:.2f} GB".format(self.what, self.nbytes / 1e9)]
    if store_bytes:
      parts.insert(0, "the frame store {} needs {:.2f} GB".format(store_what, store_bytes / 1e9))
    raise MemoryError("{}, but only {:.2f} GB of memory is available".format(
        " and ".join(parts), avail / 1e9))


class FrameStore:
  """Frames + per-slot arrays + valid transition slots.

  Args:
    frames: uint8 [N, H, W] (or [N, H, W, C]).
    action, reward, terminal: [N] per slot.
    valid: int64 [M] slots i with ``stack_size - 1 <= i`` and ``i + 1 < N`` whose
      stack holds no episode boundary (callers use the Dopamine rule).
  """

  def __init__(self, frames: np.ndarray, action: np.ndarray, reward: np.ndarray,
               terminal: np.ndarray, valid: np.ndarray,
               stack_size: int = replay_validity.STACK_SIZE):
    n = frames.shape[0]
    if frames.dtype != np.uint8 or frames.ndim not in (3, 4):
      raise ValueError("frames must be uint8 [N, H, W] or [N, H, W, C], got {} {}".format(
          frames.dtype, frames.shape))
    if stack_size < 1:
      raise ValueError("stack_size must be >= 1, got {}".format(stack_size))
    for name, a in (("action", action), ("reward", reward), ("terminal", terminal)):
      if a.shape != (n,):
        raise ValueError("{} must have shape ({},), got {}".format(name, n, a.shape))
    valid = np.asarray(valid, np.int64)
    if valid.size == 0:
      raise ValueError("the frame store holds no valid transition")
    if valid.min() < stack_size - 1 or valid.max() + 1 >= n:
      raise ValueError("valid slots must lie in [{}, {})".format(stack_size - 1, n - 1))
    term = terminal != 0
    prev = valid[:, None] - np.arange(stack_size - 1, 0, -1)[None, :]
    if term[prev].any():
      raise ValueError("a valid slot's stack crosses an episode boundary")
    self.frames = frames
    self.action = action.astype(np.int32, copy=False)
    self.reward = reward.astype(np.float32, copy=False)
    self.terminal = term.astype(np.uint8)
    self.valid = valid
    self.stack_size = stack_size

  # ----------------------------------------------------------------- building
  @classmethod
  def from_replay(cls, replay_dir: replay_source.ReplayDir, subset: str = "all", *,
                  num_actions: Optional[int] = None,
                  suffixes: Optional[Sequence[int]] = None,
                  progress: Optional[Callable[[str], None]] = None,
                  cache_dir: Optional[str] = None,
                  reserve: Optional[Reserve] = None) -> "FrameStore":
    """Loads a Dopamine replay directory (one run) or a subset of it: ``replay_dir``, a
    path (an entry point: resolved here, once, when it is read; a remote store found in the
    cache needs only the path) or a ``replay_source.ReplaySource`` (e.g. ``open_dataset``'s)
    whose resolution and listing, made once, are the ones the cache check and the reader
    use.

    ``subset``: one of :data:`ccvl_tf.data.dqn_replay.SUBSETS` ("1%", "5%",
    "initial10%", "all"), or of the dataset's own table (``replay_plan.subset_plan``).
    ``suffixes`` restricts to some checkpoints. Stack size and frame shape are the
    dataset's (``dqn_replay.dataset_format``).
    ``num_actions`` checks every action against the game's action set.
    Frames are decompressed straight into the store (peak memory ~ the store).

    A remote ``replay_dir`` (``gs://...``, ``ram://...``: ``replay_files.is_remote``)
    is read through ``tf.io.gfile``, only the checkpoints and leading rows the
    subset needs, and the store is cached locally, compressed by default
    (``ccvl_tf.data.store_cache``: ``cache_dir``, else ``$CCVL_CACHE_DIR``, else
    ``~/.cache/ccvl_tf``; ``$CCVL_STORE_CACHE``: compressed, uncompressed or off); a second
    call with the same arguments loads the cache after checking the remote listing
    and file sizes. Messages about the remote read and the cache go to
    ``progress`` (default: stderr). Local directories are read directly, uncached.
    ``reserve``: what the caller needs beside the store (:class:`Reserve`).

    One pass: the directory is inspected once (``dqn_replay.inspect_dir``), the plan
    made once from what was found (``replay_plan.plan_from``), its checkpoints read once
    (``replay_plan.load_plan``, :meth:`from_loaded`); a remote directory's cache entry
    is looked up before and written after.
    """
    source = replay_source.replay_source(replay_dir)
    remote = source.remote
    if remote:
      progress = progress if progress is not None else _stderr
      key = store_cache.key_fields(source.path, subset, suffixes, num_actions)
      cached = store_cache.get(key, cache_dir, progress, source)
      if cached is not None:
        try:
          store = cls(**cached.arrays, stack_size=cached.stack_size)
        except (KeyError, TypeError, ValueError) as e:
          store_cache.reject(key, e, cache_dir, progress)
        else:
          if reserve is not None:  # a built store is checked before its frames are read
            reserve.check(store.num_transitions, "{} (subset {})".format(source.path, subset))
          return store
    info = dqn_replay.inspect_dir(source)
    plan = replay_plan.plan_from(info, subset, suffixes)
    if remote:
      record = store_cache.source_record(info, subset, plan)  # before reading
      progress("Reading {} (subset {}: {} checkpoint(s), only the rows it needs) through "
               "tf.io.gfile; {}.".format(info.replay_dir, subset, len(plan),
                                         store_cache.plan_text(key, cache_dir)))
    loaded = replay_plan.load_plan(info, plan, num_actions=num_actions)
    store = cls.from_loaded(loaded, progress=progress, reserve=reserve)
    if suffixes is None:  # after the reads: a damaged file is named first
      replay_plan.check_subset_is_part(info, subset, loaded)
    if remote:
      store_cache.put(key, store_cache.Cached(store.arrays(), store.stack_size), record,
                      cache_dir, progress)
    return store

  @classmethod
  def from_plan(cls, replay_dir: replay_source.ReplayDir, plan: List[tuple], *,
                num_actions: Optional[int] = None,
                progress: Optional[Callable[[str], None]] = None,
                dir_info: Optional[dqn_replay.DirInfo] = None,
                reserve: Optional[Reserve] = None) -> "FrameStore":
    """Loads the checkpoints of ``plan`` (``replay_plan.plan_from``) of ``replay_dir``:
    entries ``(suffix, rows)`` (rows: batch_rl's capacity trick, None: whole checkpoint)
    or ``(suffix, rows, "prefix")`` (the first ``rows`` slots taken literally).
    ``replay_dir``: a path (resolved here) or a ``replay_source.ReplaySource``;
    ``dir_info`` (``dqn_replay.inspect_dir``) saves inspecting the directory again.
    The rest is :meth:`from_loaded`'s."""
    if dir_info is None:
      dir_info = dqn_replay.inspect_dir(replay_source.replay_source(replay_dir))
    loaded = replay_plan.load_plan(dir_info, plan, num_actions=num_actions)
    return cls.from_loaded(loaded, progress=progress, reserve=reserve)

  @classmethod
  def from_loaded(cls, loaded: replay_plan.LoadedPlan, *,
                  progress: Optional[Callable[[str], None]] = None,
                  reserve: Optional[Reserve] = None) -> "FrameStore":
    """The store of a plan whose small arrays and transitions are read
    (``replay_plan.load_plan``): after checking that the store (and ``reserve``,
    :class:`Reserve`) fits in the available memory, the frames, decompressed straight
    into one preallocated array. Each observation file is opened once and read only as
    far as its chunk needs (local or remote alike); on first use a file read whole or
    mostly is read to its end for its CRC-32, a shorter prefix is not
    (``replay_files.verified_read``, ``replay_files.verifies_prefix``)."""
    total = loaded.num_frames
    need = total * (int(np.prod(loaded.frame_shape)) + 9) + loaded.num_transitions * 8
    avail = _available_memory()
    if avail is not None and need > avail:
      raise MemoryError(
          "the frame store for {} ({} frames) needs {:.2f} GB but only {:.2f} GB is "
          "available; use a smaller subset (e.g. '1%'), fewer suffixes, or a pool of a few "
          "checkpoints at a time (replay_pool; train_offline.py --pool_checkpoints=K)".format(
              loaded.replay_dir, total, need / 1e9, avail / 1e9))
    if reserve is not None:
      reserve.check(loaded.num_transitions, loaded.replay_dir, need,
                    "for {} ({:,} frames)".format(loaded.replay_dir, total))
    if progress is not None:
      unverified = [c for c in loaded.chunks if c.rows and not replay_files.is_verified(
          c.path, replay_files.file_identity(c.path))]
      whole = [c for c in unverified if replay_files.verifies_prefix(c.rows, c.stored_rows)]
      if whole:
        progress("Verifying {} observation file(s) on first use: each is read to its end once "
                 "to check its gzip CRC-32 and length (remembered in {}).".format(
                     len(whole), os.path.join(replay_files.cache_root(),
                                              replay_files.VERIFIED_DIR)))
      if len(whole) < len(unverified):
        progress("Reading only the leading rows of {} observation file(s): their .npy header, "
                 "shape, dtype and gzip length are checked, not their gzip CRC-32, which covers "
                 "the whole file ({}=1 reads them to their end once to check it).".format(
                     len(unverified) - len(whole), replay_files.VERIFY_PREFIXES_ENV))
    frames = np.empty((total,) + loaded.frame_shape, np.uint8)
    action = np.empty((total,), np.int32)
    reward = np.empty((total,), np.float32)
    terminal = np.empty((total,), np.uint8)
    valid = []
    off = 0
    for chunk in loaded.chunks:
      if chunk.rows == 0:
        continue
      sl = slice(off, off + chunk.rows)
      chunk.read_frames_into(frames[sl])
      action[sl], reward[sl], terminal[sl] = chunk.action, chunk.reward, chunk.terminal
      valid.append(chunk.slots + off)
      off += chunk.rows
      if progress is not None:
        progress("loaded suffix {} ({} transitions, {} frames)".format(
            chunk.suffix, chunk.slots.size, chunk.rows))
    return cls(frames, action, reward, terminal, np.concatenate(valid),
               stack_size=loaded.stack_size)

  # ------------------------------------------------------------------ queries
  def arrays(self) -> Dict[str, np.ndarray]:
    """The arrays the store is made of (``store_cache.ARRAYS``), by name."""
    return {name: getattr(self, name) for name in store_cache.ARRAYS}

  @property
  def num_frames(self) -> int:
    return int(self.frames.shape[0])

  @property
  def num_transitions(self) -> int:
    return int(self.valid.shape[0])

  @property
  def frame_shape(self) -> Tuple[int, ...]:
    """Shape of one stored frame: (84, 84) Atari, (10, 10, C) MinAtar."""
    return tuple(int(d) for d in self.frames.shape[1:])

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    """Shape of one stacked state: (84, 84, 4) Atari, (10, 10, C) MinAtar."""
    return dqn_replay.stacked_shape(self.frame_shape, self.stack_size)

  @property
  def nbytes(self) -> int:
    return int(self.frames.nbytes + self.action.nbytes + self.reward.nbytes +
               self.terminal.nbytes + self.valid.nbytes)

  @property
  def bytes_per_transition(self) -> float:
    return self.nbytes / self.num_transitions

  def _stack(self, slots: np.ndarray) -> np.ndarray:
    """uint8 [B, *observation_shape] stacks ending at ``slots`` (oldest frame
    first): [B, H, W, K] for 2-D frames, [B, H, W, K * C] for [H, W, C] frames."""
    k = self.stack_size
    if self.frames.ndim == 4:
      if k == 1:
        return self.frames[slots]  # [B, H, W, C]: the state is the slot's frame
      c = self.frames.shape[-1]
      out = np.empty((slots.shape[0],) + self.observation_shape, np.uint8)
      for j in range(k):  # frame j's channels at j*C .. j*C + C - 1
        out[..., j * c:(j + 1) * c] = self.frames[slots - (k - 1 - j)]
      return out
    out = np.empty((slots.shape[0],) + self.frames.shape[1:] + (k,), np.uint8)
    for j in range(k):  # per-channel strided writes: ~5x faster than moveaxis copies
      out[..., j] = self.frames[slots - (k - 1 - j)]
    return out

  def observations(self, positions: np.ndarray) -> np.ndarray:
    """The states s of the transitions at ``positions`` into ``valid``: uint8
    [B, *observation_shape] (``gather``'s 'observation' without the rest)."""
    return self._stack(self.valid[np.asarray(positions, np.int64)])

  def gather(self, positions: np.ndarray) -> Dict[str, np.ndarray]:
    """Transitions at ``positions`` into ``valid`` (0 <= p < num_transitions).

    Returns the "Transition batches" dict of docs/CONTRACTS.md: observation /
    next_observation uint8 [B, 84, 84, 4] (generally [B, *observation_shape];
    MinAtar [B, 10, 10, C]), action int32 [B], reward float32 [B],
    terminal float32 [B]. For terminal transitions next_observation is a copy of
    observation (any TD target multiplies it by 0)."""
    slots = self.valid[np.asarray(positions, np.int64)]
    term = self.terminal[slots]
    nxt = slots + (term == 0)
    return dict(observation=self._stack(slots), action=self.action[slots],
                reward=self.reward[slots], next_observation=self._stack(nxt),
                terminal=term.astype(np.float32))

  def sample(self, batch_size: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """Uniform sample with replacement over valid transitions."""
    return self.gather(rng.integers(0, self.num_transitions, size=batch_size))


def _stderr(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def _available_memory() -> Optional[int]:
  """MemAvailable from /proc/meminfo in bytes (None where unknown)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError):
    pass
  return None
