"""A frame store: every 84x84 frame held once (uint8), stacks built at sample time.

Layout: one contiguous uint8 array ``frames [N, 84, 84]`` with the Dopamine slots
of each loaded checkpoint (or subset) one after another, in chronological order,
padding frames included; per-slot ``action``/``reward``/``terminal``; and
``valid [M]``, the slots that are transitions (Dopamine's rule, see
:func:`ccvl_tf.data.dqn_replay.valid_indices`). For every valid slot ``i`` the
frames ``i-3 .. i+1`` lie in the same checkpoint chunk and no episode boundary
lies inside the stack ``i-3 .. i``, so stacks never cross episodes (the episode
start's zero padding takes the place of missing history, as in Dopamine).

Other datasets (see ``dqn_replay``): frames may be [N, H, W, C] (MinAtar: one
whole [10, 10, C] observation per slot) and the stack size is the dataset's
(``ccvl_dataset.json``; MinAtar: 1, so a state is just its slot's frame). Stacked
states are ``dqn_replay.stacked_shape(frame_shape, stack_size)``.

Memory: 7,056 bytes per frame + 9 bytes per slot (action int32, reward float32,
terminal uint8) + 8 bytes per valid slot (int64 index) ~= 7,073 bytes per
transition; 500k frames ~= 3.54 GB.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.data import dqn_replay

FRAME_SHAPE = (84, 84)


class FrameStore:
  """Frames + per-slot arrays + valid transition slots.

  Args:
    frames: uint8 [N, H, W] (or [N, H, W, C]).
    action, reward, terminal: [N] per slot.
    valid: int64 [M] slots i with ``stack_size - 1 <= i`` and ``i + 1 < N`` whose
      stack holds no episode boundary (callers use the Dopamine rule).
  """

  def __init__(self, frames: np.ndarray, action: np.ndarray, reward: np.ndarray,
               terminal: np.ndarray, valid: np.ndarray, stack_size: int = dqn_replay.STACK_SIZE):
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
  def from_replay(cls, replay_dir: str, subset: str = "all", *,
                  num_actions: Optional[int] = None,
                  suffixes: Optional[Sequence[int]] = None,
                  progress: Optional[Callable[[str], None]] = None,
                  cache_dir: Optional[str] = None) -> "FrameStore":
    """Loads a Dopamine replay directory (one run) or a subset of it.

    ``subset``: one of :data:`ccvl_tf.data.dqn_replay.SUBSETS` ("1%", "5%",
    "initial10%", "all"), or of the dataset's own table (``dqn_replay.subset_plan``).
    ``suffixes`` restricts to some checkpoints. Stack size and frame shape are the
    dataset's (``dqn_replay.dataset_format``).
    ``num_actions`` checks every action against the game's action set.
    Frames are decompressed straight into the store (peak memory ~ the store).

    A remote ``replay_dir`` (``gs://...``, ``ram://...``: ``dqn_replay.is_remote``)
    is read through ``tf.io.gfile``, only the checkpoints and leading rows the
    subset needs, and the store is cached locally (``ccvl_tf.data.store_cache``:
    ``cache_dir``, else ``$CCVL_CACHE_DIR``, else ``~/.cache/ccvl_tf``); a second
    call with the same arguments loads the cache after checking the remote listing
    and file sizes. Messages about the remote read and the cache go to
    ``progress`` (default: stderr). Local directories are read directly, uncached.
    """
    if dqn_replay.is_remote(replay_dir):
      from ccvl_tf.data import store_cache  # pylint: disable=g-import-not-at-top
      return store_cache.load_or_build(replay_dir, subset, num_actions=num_actions,
                                       suffixes=suffixes, cache_dir=cache_dir,
                                       progress=progress)
    info = dqn_replay.inspect_dir(replay_dir)
    plan = select_plan(info, subset, suffixes)
    return cls.from_plan(info.replay_dir, plan, num_actions=num_actions, progress=progress,
                         dir_info=info)

  # Over 80 lines with its docstring: two passes over the plan (small arrays and validity,
  # then frames decompressed into one preallocated array) that share their bookkeeping.
  @classmethod
  def from_plan(cls, replay_dir: str, plan: List[tuple], *,
                num_actions: Optional[int] = None,
                progress: Optional[Callable[[str], None]] = None,
                dir_info: Optional[dqn_replay.DirInfo] = None) -> "FrameStore":
    """Loads the checkpoints of ``plan`` (``dqn_replay.subset_plan``): entries
    ``(suffix, rows)`` (rows: batch_rl's capacity trick, None: whole checkpoint)
    or ``(suffix, rows, "prefix")`` (the first ``rows`` slots taken literally).

    Each observation file is opened once and read only as far as its chunk needs
    (local or remote alike); ``dir_info`` (``dqn_replay.inspect_dir``) saves listing
    the directory again."""
    if dir_info is None:
      dir_info = dqn_replay.inspect_dir(replay_dir)
    replay_dir = dir_info.replay_dir
    k = dir_info.stack_size
    frame_shape = None
    # Pass 1: small arrays + validity per checkpoint (frames not read yet).
    chunks = []
    for item in plan:
      suffix, rows, mode = item[0], item[1], tuple(item[2:])
      if mode not in ((), (dqn_replay.PREFIX,)):
        raise ValueError("plan entry {!r}: the third element must be {!r}".format(
            item, dqn_replay.PREFIX))
      meta = _load_small(dir_info, suffix, num_actions)
      frame_shape = meta.frame_shape
      cap = meta.capacity if rows is None or rows >= meta.capacity else rows
      if mode and rows is not None:
        cap = meta.capacity  # literal prefix: no modular view, slots [0, rows) only
        idx = dqn_replay.prefix_valid_indices(
            meta.terminal, meta.add_count, meta.invalid_range, rows, stack_size=k,
            episode_end_indices=meta.episode_end_indices)
      else:
        idx = dqn_replay.valid_indices(meta.terminal, meta.add_count, meta.invalid_range,
                                       replay_capacity=cap, stack_size=k,
                                       episode_end_indices=meta.episode_end_indices)
      cursor = meta.add_count % cap
      needs_wrap = idx.size > 0 and (idx.min() < k - 1 or idx.max() + 1 >= cap)
      if needs_wrap:  # reorder the circular buffer chronologically (oldest first)
        order = (cursor + np.arange(cap)) % cap
        idx = np.sort((idx - cursor) % cap)
        nrows = cap
      else:
        order = None
        nrows = int(idx.max()) + 2 if idx.size else 0
      sel = order if order is not None else slice(0, nrows)
      # Keep only the per-slot values the store holds (not the 1M-entry arrays).
      chunks.append((suffix, meta.capacity, order, idx, nrows,
                     (meta.action[sel].copy(), meta.reward[sel].copy(),
                      meta.terminal[sel].copy())))
      del meta
    total = sum(c[4] for c in chunks)
    if total == 0:
      raise dqn_replay.DatasetError("no valid transitions in {} for plan {}".format(
          replay_dir, plan))
    need = total * (int(np.prod(frame_shape)) + 9) + sum(c[3].size for c in chunks) * 8
    avail = _available_memory()
    if avail is not None and need > avail:
      raise MemoryError(
          "the frame store for {} ({} frames) needs {:.2f} GB but only {:.2f} GB is "
          "available; use a smaller subset (e.g. '1%') or fewer suffixes".format(
              replay_dir, total, need / 1e9, avail / 1e9))
    frames = np.empty((total,) + tuple(frame_shape), np.uint8)
    action = np.empty((total,), np.int32)
    reward = np.empty((total,), np.float32)
    terminal = np.empty((total,), np.uint8)
    valid = []
    off = 0
    # Pass 2: frames, decompressed into place.
    for suffix, stored_rows, order, idx, nrows, (act, rew, term) in chunks:
      if nrows == 0:
        continue
      path = dqn_replay.checkpoint_path(replay_dir, dqn_replay.STORE_PREFIX + "observation",
                                        suffix)
      dst = frames[off:off + nrows]
      _read_frames_into(path, dst, expected_rows=stored_rows)
      if order is not None:
        dst[...] = dst[order]
      sl = slice(off, off + nrows)
      action[sl], reward[sl], terminal[sl] = act, rew, term
      valid.append(idx + off)
      off += nrows
      if progress is not None:
        progress("loaded suffix {} ({} transitions, {} frames)".format(suffix, idx.size, nrows))
    return cls(frames, action, reward, terminal, np.concatenate(valid), stack_size=k)

  # ------------------------------------------------------------------ queries
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


def select_plan(dir_info: dqn_replay.DirInfo, subset: str,
                suffixes: Optional[Sequence[int]] = None) -> List[tuple]:
  """``dqn_replay.subset_plan`` of a subset, restricted to ``suffixes`` if given."""
  plan = dqn_replay.subset_plan(dir_info.replay_dir, subset, dir_info=dir_info)
  if suffixes is not None:
    wanted = set(int(s) for s in suffixes)
    plan = [p for p in plan if p[0] in wanted]
    if not plan:
      raise dqn_replay.DatasetError("none of suffixes {} in {}".format(sorted(wanted),
                                                                       dir_info.replay_dir))
  return plan


def _load_small(dir_info: dqn_replay.DirInfo, suffix: int, num_actions: Optional[int]):
  """A ReplayCheckpoint without frames (observation holds 0 rows; the observation
  file is not opened here: :func:`_read_frames_into` reads and checks it), validated."""
  return dqn_replay.load_checkpoint(dir_info.replay_dir, suffix, max_rows=0,
                                    num_actions=num_actions, dir_info=dir_info,
                                    read_observation=False)


def _read_frames_into(path: str, dst: np.ndarray, expected_rows: int) -> None:
  """Decompresses the first ``len(dst)`` frames of a gzipped .npy into ``dst``
  (local or remote: only that prefix of the file is read). The stored array must
  be uint8 [expected_rows, *dst.shape[1:]]."""
  try:
    with dqn_replay.open_gzip(path) as f:
      version = np.lib.format.read_magic(f)
      shape, fortran, dtype = np.lib.format._read_array_header(f, version)  # pylint: disable=protected-access
      if fortran or dtype != np.uint8 or tuple(shape[1:]) != dst.shape[1:]:
        raise dqn_replay.DatasetError("{}: expected uint8 frames [N, {}], got {} {}".format(
            path, ", ".join(str(d) for d in dst.shape[1:]), dtype, tuple(shape)))
      if shape[0] != expected_rows:
        raise dqn_replay.DatasetError(
            "arrays of different lengths: {} has {} frames, the suffix's action/reward/"
            "terminal arrays have {} entries".format(path, shape[0], expected_rows))
      view = memoryview(dst.reshape(-1))
      got = 0
      while got < view.nbytes:
        n = f.readinto(view[got:])
        if not n:
          raise EOFError("file ended after {} of {} bytes".format(got, view.nbytes))
        got += n
  except dqn_replay.DatasetError:
    raise
  except dqn_replay.not_found_errors() as e:
    raise dqn_replay.DatasetError("missing file: {}".format(path)) from e
  except dqn_replay.read_errors() as e:
    raise dqn_replay.DatasetError("cannot read {} (corrupt or truncated gzip/npy?): {}".format(
        path, dqn_replay.error_text(e))) from e
