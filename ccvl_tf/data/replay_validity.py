"""Stage 2 of the replay data pipeline (docs/data.md), its rules: which slots of a
Dopamine replay checkpoint are transitions, and the checks of the values there.

More in docs/data.md "Module notes", `ccvl_tf/data/replay_validity.py`.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ccvl_tf.data.replay_files import STORE_PREFIX, DatasetError

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


def dopamine_invalid_range(cursor: int, capacity: int, stack_size: int = STACK_SIZE,
                           update_horizon: int = UPDATE_HORIZON) -> np.ndarray:
  """Dopamine's ``invalid_range(cursor, replay_capacity, stack_size, update_horizon)``: the
  slots around the write cursor, ``(cursor - n + i) % capacity`` for ``i < stack_size + n``,
  the cursor at index ``n``. ``add`` stores exactly this after every transition."""
  return np.array([(int(cursor) - update_horizon + i) % int(capacity)
                   for i in range(int(stack_size) + update_horizon)], np.int64)


def check_bookkeeping(add_count: int, invalid_range: np.ndarray, capacity: int,
                      paths: Dict[str, str], *, stack_size: int = STACK_SIZE) -> None:
  """Raises DatasetError unless a checkpoint's counters are what Dopamine writes for a buffer
  of ``capacity`` slots: every ``invalid_range`` slot inside ``[0, capacity)``, and
  ``invalid_range`` exactly :func:`dopamine_invalid_range` of the write cursor
  ``add_count % capacity`` (``add`` recomputes it from the cursor at every step; a buffer
  nothing was added to keeps its initial ``stack_size`` zeros). ``add_count`` may exceed the
  capacity (a buffer that wrapped), so only this agreement tells an ``add_count`` that cannot
  be true, e.g. one that would make a half-written buffer read as full (its never-written slots
  as transitions) or a full one read as empty (its transitions dropped). The message names the
  file (``paths["add_count"]`` / ``["invalid_range"]``) and both numbers."""
  inv = np.asarray(invalid_range, np.int64).reshape(-1)
  outside = (inv < 0) | (inv >= capacity)
  if outside.any():
    raise DatasetError("{}: invalid_range slot {} is outside the buffer of {} slots [0, {}) "
                       "(its values {})".format(paths["invalid_range"], int(inv[outside][0]),
                                                capacity, capacity, inv.tolist()))
  cursor = int(add_count) % int(capacity)
  expected = dopamine_invalid_range(cursor, capacity, stack_size)
  if int(add_count) == 0 and inv.tolist() == [0] * int(stack_size):
    return  # Dopamine's initial invalid_range: nothing added yet
  if inv.tolist() != expected.tolist():
    raise DatasetError(
        "{}: add_count {} puts the write cursor at slot {} of the {} slots, but {} marks the "
        "slots {} around the cursor, where Dopamine writes {} for that cursor (it recomputes "
        "them from the cursor at every add): the two cannot both be true; the file is damaged "
        "or was not written by Dopamine's replay buffer".format(
            paths["add_count"], int(add_count), cursor, capacity, paths["invalid_range"],
            inv.tolist(), expected.tolist()))


def check_logged_schedule(add_count: int, capacity: int, suffix: int, record: dict,
                          paths: Dict[str, str], record_path: str, *,
                          stack_size: int = STACK_SIZE) -> None:
  """Raises DatasetError unless the ``add_count`` of checkpoint ``suffix`` is one the writer
  of the dataset record ``record`` (replay_writer.DopamineReplayWriter, batch_rl's
  OutOfGraphLoggedReplayBuffer schedule) can have stored there, within the record's ``steps``.

  The writer logs a checkpoint whenever an add leaves ``add_count % C == C - 1`` (``C`` the
  capacity; an episode's padding can step over that point, so a wrap may go unlogged), and its
  last one, the final partial buffer, with ``add_count`` set to the cursor (``< C``; batch_rl's
  ``log_final_buffer``). So suffix ``N`` holds ``add_count % C == C - 1`` with
  ``add_count >= (N + 1) * C - 1`` (the ``N + 1``-th log), and the last suffix the record
  lists may instead hold a cursor below ``C``. Each of the record's ``steps`` adds one
  transition and up to ``stack_size - 1`` padding slots, so no ``add_count`` exceeds
  ``stack_size * steps``. The record's ``replay_capacity`` must be ``C``."""
  def refuse(why: str) -> None:
    raise DatasetError("{}: add_count {} {}, as recorded in {}; the file is damaged or the "
                       "record is not this dataset's".format(paths["add_count"], int(add_count),
                                                             why, record_path))
  ac, cap = int(add_count), int(capacity)
  recorded_cap = record.get("replay_capacity")
  if recorded_cap is not None and int(recorded_cap) != cap:
    raise DatasetError("{}: the checkpoint has {} slots, but {} records replay_capacity {}; "
                       "the file is damaged or the record is not this dataset's".format(
                           paths[STORE_PREFIX + "terminal"], cap, record_path, recorded_cap))
  listed = sorted(int(s) for s in record.get("suffixes") or [suffix])
  final = int(suffix) == listed[-1]
  first_log = (int(suffix) + 1) * cap - 1
  logged_full = ac % cap == cap - 1 and ac >= first_log
  if not logged_full and not (final and ac < cap):
    want = ("add_count % {c} == {c1} and add_count >= {f} (suffix {s} is log {n} of a writer "
            "that logs when add_count % {c} reaches {c1})".format(
                c=cap, c1=cap - 1, f=first_log, s=suffix, n=int(suffix) + 1))
    if final:
      want += ", or, the final buffer, its write cursor below {}".format(cap)
    refuse("is not one the writer stores in suffix {} of the checkpoints {}: it stores "
           "{}".format(suffix, listed, want))
  steps = record.get("steps")
  if steps is not None and ac > int(stack_size) * int(steps):
    refuse("counts more transitions than {} steps can add: at most {} (one transition each, "
           "and up to {} padding slots per episode)".format(
               steps, int(stack_size) * int(steps), int(stack_size) - 1))


def _where(bad: np.ndarray, slots: np.ndarray) -> str:
  """"index i (n of the m transitions read)": the first slot of ``slots`` where the
  mask ``bad`` (over ``slots``) is set, and how many are."""
  return "index {} ({} of the {} transitions read)".format(
      int(slots[np.flatnonzero(bad)[0]]), int(bad.sum()), slots.size)


def check_slot_values(action: np.ndarray, reward: np.ndarray, terminal: np.ndarray,
                      slots: np.ndarray, paths: Dict[str, str],
                      num_actions: Optional[int] = None, clipped_rewards: bool = True) -> None:
  """Raises DatasetError unless, at every slot of ``slots`` (the transitions a
  reader yields, storage order), the reward is finite with ``|r| <= 1e9`` and, with
  ``clipped_rewards``, in [-1, 1] (Dopamine stores clipped rewards), the
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
  bad = np.abs(r) > 1.0
  if clipped_rewards and bad.any():
    raise DatasetError(
        "{}: rewards must lie in [-1, 1] (Dopamine clips rewards before storing them, and the "
        "learners are tuned for clipped rewards), got {!r} at {}; clip them when writing the "
        "dataset, or record \"reward_clipping\": false in its {} to train on them as "
        "stored".format(paths["reward"], float(r[bad][0]), _where(bad, slots),
                        "ccvl_dataset.json"))
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
