"""Stage 2 of the replay data pipeline (docs/data.md), its rules: which slots of a
Dopamine replay checkpoint are transitions, and the checks of the values there.

More in docs/data.md "Module notes", `ccvl_tf/data/replay_validity.py`.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ccvl_tf.data.replay_files import DatasetError

STACK_SIZE = 4
UPDATE_HORIZON = 1
MAX_ABS_REWARD = 1e9  # a stored (clipped) reward beyond this is garbage, not data


def valid_indices(terminal: np.ndarray, add_count: int, invalid_range: np.ndarray, *,
                  replay_capacity: Optional[int] = None, stack_size: int = STACK_SIZE,
                  update_horizon: int = UPDATE_HORIZON,
                  episode_end_indices: Optional[np.ndarray] = None) -> np.ndarray:
  """Slots Dopamine's sampler can return, sorted (storage order), int64.

  Vectorized ``OutOfGraphReplayBuffer.sample_index_batch`` candidate range and
  ``is_valid_transition``. ``replay_capacity`` smaller than the arrays reproduces
  batch_rl's subset trick (only slots ``[0, replay_capacity)`` are addressable).
  """
  terminal = np.asarray(terminal)
  cap = int(terminal.shape[0] if replay_capacity is None else replay_capacity)
  if cap > terminal.shape[0] or cap < stack_size + update_horizon:
    raise ValueError("replay_capacity {} must be in [{}, {}]".format(
        cap, stack_size + update_horizon, terminal.shape[0]))
  term = terminal[:cap] != 0
  add_count = int(add_count)
  cursor = add_count % cap
  if add_count >= cap:  # is_full()
    min_id = cursor - cap + stack_size - 1
    max_id = cursor - update_horizon
  else:
    min_id = stack_size - 1
    max_id = cursor - update_horizon
  if max_id <= min_id:
    return np.zeros((0,), np.int64)
  cand = np.arange(min_id, max_id, dtype=np.int64) % cap
  keep = ~np.isin(cand, np.asarray(invalid_range, np.int64))
  # No terminal in the stack except possibly its last frame.
  prev = (cand[:, None] - np.arange(stack_size - 1, 0, -1)[None, :]) % cap
  keep &= ~term[prev].any(axis=1)
  if episode_end_indices is not None and len(episode_end_indices):
    ends = np.zeros(cap, bool)
    e = np.asarray(episode_end_indices, np.int64)
    ends[e[(e >= 0) & (e < cap)]] = True
    truncated = ends & ~term
    traj = (cand[:, None] + np.arange(update_horizon)[None, :]) % cap
    keep &= ~truncated[traj].any(axis=1)   # Dopamine's rule
    keep &= ~truncated[prev].any(axis=1)   # ours: never a stack across a truncation
  return np.sort(cand[keep])


def prefix_valid_indices(terminal: np.ndarray, add_count: int, invalid_range: np.ndarray,
                         rows: int, *, stack_size: int = STACK_SIZE,
                         update_horizon: int = UPDATE_HORIZON,
                         episode_end_indices: Optional[np.ndarray] = None) -> np.ndarray:
  """The transitions of the checkpoint's first ``rows`` slots, taken literally.

  Dopamine's valid slots (:func:`valid_indices` at the stored capacity) whose
  whole stack ``i-K+1 .. i`` and next slot ``i+1`` (``i + n``) lie in
  ``[0, rows)``. Unlike batch_rl's capacity trick (``replay_capacity=rows``), no
  slot is read modulo ``rows``, so no transition joins two slots that are not
  consecutive in the real buffer. int64 [M], sorted.
  """
  idx = valid_indices(terminal, add_count, invalid_range, stack_size=stack_size,
                      update_horizon=update_horizon, episode_end_indices=episode_end_indices)
  return idx[(idx >= stack_size - 1) & (idx + update_horizon < int(rows))]


def view_indices(terminal: np.ndarray, add_count: int, invalid_range: np.ndarray, *,
                 replay_capacity: Optional[int] = None, prefix_rows: Optional[int] = None,
                 stack_size: int = STACK_SIZE, update_horizon: int = UPDATE_HORIZON,
                 episode_end_indices: Optional[np.ndarray] = None) -> np.ndarray:
  """The transitions of one view of a checkpoint, int64 [M] sorted: the whole of it
  (neither argument), batch_rl's subset trick (``replay_capacity`` below the stored
  capacity: :func:`valid_indices` at that capacity; at or above it: the whole), or
  a literal prefix (``prefix_rows``: :func:`prefix_valid_indices`)."""
  kw = dict(stack_size=stack_size, update_horizon=update_horizon,
            episode_end_indices=episode_end_indices)
  if prefix_rows is not None:
    if replay_capacity is not None:
      raise ValueError("a view is a replay_capacity or a prefix, not both")
    return prefix_valid_indices(terminal, add_count, invalid_range, prefix_rows, **kw)
  if replay_capacity is not None and replay_capacity >= np.asarray(terminal).shape[0]:
    replay_capacity = None
  return valid_indices(terminal, add_count, invalid_range, replay_capacity=replay_capacity, **kw)


def check_bookkeeping(add_count: int, invalid_range: np.ndarray, capacity: int,
                      paths: Dict[str, str]) -> None:
  """Raises DatasetError unless a checkpoint's counters can be true of a buffer of
  ``capacity`` slots: every ``invalid_range`` slot inside ``[0, capacity)``, and the write
  cursor ``add_count % capacity`` among them (Dopamine's ``add`` recomputes ``invalid_range``
  around the cursor at every step: ``(cursor - n + i) % capacity``, which holds the cursor
  itself; a fresh buffer's is zeros, cursor 0). ``add_count`` may exceed the capacity (a
  buffer that wrapped), so only this agreement tells an ``add_count`` that cannot be true, e.g.
  one that would make a half-written buffer read as full, its never-written slots as
  transitions. The message names the file (``paths["add_count"]`` / ``["invalid_range"]``)
  and both numbers."""
  inv = np.asarray(invalid_range, np.int64).reshape(-1)
  outside = (inv < 0) | (inv >= capacity)
  if outside.any():
    raise DatasetError("{}: invalid_range slot {} is outside the buffer of {} slots [0, {}) "
                       "(its values {})".format(paths["invalid_range"], int(inv[outside][0]),
                                                capacity, capacity, inv.tolist()))
  cursor = int(add_count) % int(capacity)
  if inv.size and cursor not in set(inv.tolist()):
    raise DatasetError(
        "{}: add_count {} puts the write cursor at slot {} of the {} slots, but {} marks the "
        "slots {} around the cursor (Dopamine recomputes them from the cursor at every add): "
        "the two cannot both be true; the file is damaged or was not written by Dopamine's "
        "replay buffer".format(paths["add_count"], int(add_count), cursor, capacity,
                               paths["invalid_range"], inv.tolist()))


def _where(bad: np.ndarray, slots: np.ndarray) -> str:
  """"index i (n of the m transitions read)": the first slot of ``slots`` where the
  mask ``bad`` (over ``slots``) is set, and how many are."""
  return "index {} ({} of the {} transitions read)".format(
      int(slots[np.flatnonzero(bad)[0]]), int(bad.sum()), slots.size)


def check_slot_values(action: np.ndarray, reward: np.ndarray, terminal: np.ndarray,
                      slots: np.ndarray, paths: Dict[str, str],
                      num_actions: Optional[int] = None) -> None:
  """Raises DatasetError unless, at every slot of ``slots`` (the transitions a
  reader yields, storage order), the reward is finite with ``|r| <= 1e9``, the
  terminal flag is 0 or 1 and the action is ``>= 0`` (and ``< num_actions`` when
  given). The message names the file (``paths["reward"]`` / ``["terminal"]`` /
  ``["action"]``) and the first bad slot. Slots outside ``slots`` are not looked at:
  they may hold anything (see the module notes)."""
  slots = np.asarray(slots, np.int64)
  r = reward[slots].astype(np.float64)
  bad = ~np.isfinite(r) | (np.abs(r) > MAX_ABS_REWARD)
  if bad.any():
    raise DatasetError("{}: rewards must be finite numbers (|r| <= 1e9), got {!r} at {}".format(
        paths["reward"], float(r[bad][0]), _where(bad, slots)))
  t = terminal[slots]
  bad = (t != 0) & (t != 1)
  if bad.any():
    raise DatasetError("{}: terminal flags must be 0 or 1, got {} at {}".format(
        paths["terminal"], int(t[bad][0]), _where(bad, slots)))
  a = action[slots].astype(np.int64)
  if num_actions is not None:
    bad = (a < 0) | (a >= num_actions)
    if bad.any():
      raise DatasetError(
          "{}: actions outside the game's action set [0, {}): got {} at {}, min {}, max {}; "
          "is this a dataset of another game?".format(
              paths["action"], num_actions, int(a[bad][0]), _where(bad, slots),
              int(a.min()), int(a.max())))
  bad = a < 0
  if bad.any():
    raise DatasetError("{}: actions must be >= 0 (indices into the game's action set), got "
                       "{} at {}".format(paths["action"], int(a[bad][0]), _where(bad, slots)))
