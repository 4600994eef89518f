"""Per-step arrays (d3rlpy's ``MDPDataset`` layout) checked and turned into transitions: the
rules every reader of ``transitions.Transitions`` shares (docs/data.md "Your own data").

The per-step arrays, T steps of consecutive episodes:
  observations  [T, D] vectors (any int or float dtype, stored float32) or uint8 [T, H, W, C]
  actions       [T] (or [T, 1]) integers: the action taken at step t
  rewards       [T] (or [T, 1]): the reward that followed action t
  terminals     [T] 0/1: 1 where the episode terminated after step t (no bootstrap)
  timeouts      [T] 0/1 or None: 1 where the episode was cut after step t (a time limit)

An episode ends at a terminal or a time-out step. Step t is a transition (s_t, a_t, r_t, s')
with s' = observations[t + 1] of the same episode, except at the end of an episode: a terminal
step is a transition with terminal 1 (its s' is unused; the row of s is recorded); a timed-out
step has no next observation, so it is not a transition: its observation is only the s' of the
step before, and its action and reward are not read. This is d3rlpy's rule (``EpisodeGenerator``
splits at terminals or timeouts; ``Episode.transition_count`` is T for a terminated episode and
T - 1 for a timed-out one; ``BasicTransitionPicker`` sets terminal 1 only on the last step of a
terminated episode). Unlike d3rlpy, steps after the last episode end are refused, not dropped.

Only the values that become part of a transition are checked: the actions and rewards of the
transition steps, the observations of their s and s' rows.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional

import numpy as np

FIELDS = ("observations", "actions", "rewards", "terminals", "timeouts")


def row_locator(row: int) -> str:
  """A step of plain arrays in messages."""
  return "row {}".format(row)


@dataclasses.dataclass
class Steps:
  """Per-step arrays as a reader found them (module doc), with how to name them in messages:
  ``names`` maps the field names above to the source's own ('actions' -> 'action' for RLDS),
  ``where(row)`` names a step ('row 12', 'episode_3 step 5')."""
  observations: np.ndarray
  actions: np.ndarray
  rewards: np.ndarray
  terminals: np.ndarray
  timeouts: Optional[np.ndarray] = None
  names: Dict[str, str] = dataclasses.field(default_factory=dict)
  where: Callable[[int], str] = row_locator

  def name(self, field: str) -> str:
    return self.names.get(field, field)


@dataclasses.dataclass
class Derived:
  """The arrays of a ``Transitions`` (its docstring says what each holds)."""
  observations: np.ndarray   # [M, *shape] float32 or uint8
  obs_index: np.ndarray      # int64 [N]
  next_index: np.ndarray     # int64 [N]
  action: np.ndarray         # int32 [N]
  reward: np.ndarray         # float32 [N]
  terminal: np.ndarray       # float32 [N]
  episode: np.ndarray        # int64 [N]
  num_actions: int


def derive(steps: Steps, source: str, num_actions: Optional[int] = None) -> Derived:
  """The transitions of ``steps`` (module doc), or one ValueError line
  '<source>: <field>: <what was expected, what was found>'."""

  def fail(field, what):
    raise ValueError("{}: {}: {}".format(source, steps.name(field), what))

  obs = _observations(steps.observations, fail)
  t = obs.shape[0]
  if t == 0:
    fail("observations", "the dataset is empty (0 steps): expected at least one transition")
  actions = _per_step(steps.actions, "actions", t, fail)
  rewards = _per_step(steps.rewards, "rewards", t, fail)
  terminals = _flags(_per_step(steps.terminals, "terminals", t, fail), "terminals", steps, fail)
  if steps.timeouts is None:
    timeouts = np.zeros(t, bool)
  else:
    timeouts = _flags(_per_step(steps.timeouts, "timeouts", t, fail), "timeouts", steps, fail)
  both = np.flatnonzero(terminals & timeouts)
  if both.size:
    raise ValueError("{}: {}, {}: {} is both terminal and timed out (expected at most one of "
                     "the two per step; {} such steps)".format(
                         source, steps.name("terminals"), steps.name("timeouts"),
                         steps.where(int(both[0])), both.size))
  ends = terminals | timeouts
  if not ends[-1]:
    last_end = np.flatnonzero(ends)
    first_open = int(last_end[-1]) + 1 if last_end.size else 0
    raise ValueError(
        "{}: {}, {}: the last {} step(s) ({} to {}) end no episode: the last step must be "
        "terminal or timed out".format(source, steps.name("terminals"), steps.name("timeouts"),
                                       t - first_open, steps.where(first_open),
                                       steps.where(t - 1)))

  rows = np.flatnonzero(~timeouts)  # the transition steps: s of each transition
  if rows.size == 0:
    fail("timeouts", "0 transitions: every episode is a single timed-out step, which has no "
         "next observation (expected at least one transition)")
  terminal = terminals[rows]
  next_rows = np.where(terminal, rows, rows + 1)
  action, num_actions = _actions(actions[rows], rows, num_actions, steps, fail)
  reward = _rewards(rewards[rows], rows, steps, fail)
  _check_finite(obs, rows, next_rows, steps, fail)

  # Keep only the rows some transition uses (a one-step timed-out episode's row is not).
  used = np.union1d(rows, next_rows)
  if used.size != t:
    obs = obs[used]
    rows, next_rows = np.searchsorted(used, rows), np.searchsorted(used, next_rows)
  # Episodes numbered in order among those that give transitions.
  episode_of_step = np.cumsum(ends) - ends
  _, episode = np.unique(episode_of_step[rows], return_inverse=True)
  return Derived(observations=obs, obs_index=rows.astype(np.int64),
                 next_index=next_rows.astype(np.int64), action=action, reward=reward,
                 terminal=terminal.astype(np.float32), episode=episode.astype(np.int64),
                 num_actions=num_actions)


def _observations(obs, fail) -> np.ndarray:
  """float32 [T, D] or uint8 [T, H, W, C]; anything else one line."""
  try:
    obs = np.asarray(obs)
  except ValueError:  # rows of different shapes
    fail("observations", "rows of different shapes: expected one array [T, D] or uint8 "
         "[T, H, W, C]")
  if obs.dtype == object:
    fail("observations", "rows of different shapes or non-numbers (dtype object): expected "
         "one array [T, D] or uint8 [T, H, W, C]")
  if obs.ndim == 2 and obs.dtype.kind in "biuf":
    with np.errstate(over="ignore"):
      return obs.astype(np.float32, copy=False)
  if obs.ndim == 4 and obs.dtype == np.uint8:
    return obs
  hint = (" (images must be uint8)" if obs.ndim == 4 else
          " (greyscale images need a channel axis: [T, H, W, 1])" if obs.ndim == 3 else "")
  fail("observations", "expected [T, D] vectors (numbers) or uint8 [T, H, W, C] images, got "
       "{} {}{}".format(obs.dtype, list(obs.shape), hint))


def _per_step(a, field, t, fail) -> np.ndarray:
  """One value per step: [T] or [T, 1] -> [T]."""
  a = np.asarray(a)
  if a.ndim == 2 and a.shape[1] == 1:
    a = a[:, 0]
  if a.ndim != 1:
    fail(field, "expected one value per step, shape [{}], got {}".format(t, list(a.shape)))
  if a.shape[0] != t:
    fail(field, "expected {} rows (one per step, as observations), got {}".format(
        t, a.shape[0]))
  if a.dtype.kind not in "biuf":
    fail(field, "expected numbers, got dtype {}".format(a.dtype))
  return a


def _flags(a, field, steps, fail) -> np.ndarray:
  """0/1 per step -> bool."""
  bad = np.flatnonzero((a != 0) & (a != 1))
  if bad.size:
    fail(field, "expected 0 or 1, got {} at {}".format(a[bad[0]], steps.where(int(bad[0]))))
  return a != 0


# The most actions inferred from the data alone (the largest action + 1): a larger count is
# more often action ids that are not numbered 0..A-1 (a network with that many outputs) than a
# discrete action space; a given num_actions may be larger.
MAX_INFERRED_ACTIONS = 4096


def _actions(a, rows, num_actions, steps, fail):
  """The transitions' actions as int32, and num_actions (given, or max + 1)."""
  if a.dtype.kind == "f":
    with np.errstate(invalid="ignore"):
      bad = np.flatnonzero(~np.isfinite(a) | (a != np.floor(a)))
    if bad.size:
      fail("actions", "expected integers (discrete actions), got {} at {}".format(
          a[bad[0]], steps.where(int(rows[bad[0]]))))
  if a.dtype.kind in "fb":
    a = a.astype(np.int64)
  if num_actions is None:
    if a.min() < 0:
      i = int(np.argmax(a < 0))
      fail("actions", "expected integers >= 0, got {} at {}".format(a[i], steps.where(
          int(rows[i]))))
    num_actions = int(a.max()) + 1
    if num_actions > MAX_INFERRED_ACTIONS:
      i = int(np.argmax(a))
      fail("actions", "the largest action is {} (at {}), so the network would have {} "
           "outputs for {} distinct actions: expected actions numbered 0..A-1 with A <= {} "
           "when num_actions is not given (give num_actions to mean more)".format(
               a[i], steps.where(int(rows[i])), num_actions, np.unique(a).size,
               MAX_INFERRED_ACTIONS))
  else:
    if isinstance(num_actions, bool) or not isinstance(num_actions, (int, np.integer)) or (
        num_actions < 1):
      fail("num_actions", "expected an integer >= 1, got {!r}".format(num_actions))
    num_actions = int(num_actions)
    bad = np.flatnonzero((a < 0) | (a >= num_actions))
    if bad.size:
      fail("actions", "expected integers in [0, {}) (num_actions={}), got {} at {}".format(
          num_actions, num_actions, a[bad[0]], steps.where(int(rows[bad[0]]))))
  return a.astype(np.int32), num_actions


def _rewards(r, rows, steps, fail) -> np.ndarray:
  with np.errstate(over="ignore"):
    r = r.astype(np.float32)
  bad = np.flatnonzero(~np.isfinite(r))
  if bad.size:
    fail("rewards", "expected finite numbers (float32), got {} at {} (first of {})".format(
        r[bad[0]], steps.where(int(rows[bad[0]])), bad.size))
  return r


def _check_finite(obs, rows, next_rows, steps, fail) -> None:
  """No NaN / inf in an observation a transition uses (s or s')."""
  if obs.dtype != np.float32:
    return
  finite = np.isfinite(obs).reshape(obs.shape[0], -1).all(axis=1)
  if finite.all():
    return
  bad = np.intersect1d(np.flatnonzero(~finite), np.union1d(rows, next_rows))
  if bad.size:
    fail("observations", "expected finite numbers (float32), got {} at {} (first of {} rows)"
         .format(obs[bad[0]][~np.isfinite(obs[bad[0]])][0], steps.where(int(bad[0])),
                 bad.size))
