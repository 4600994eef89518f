"""An RLDS dataset's steps as per-step arrays (``step_arrays.Steps``) for
``Transitions.from_rlds``.

RLDS (github.com/google-research/rlds, README "Dataset Format"): a ``tf.data.Dataset`` of
episodes, each a dict whose 'steps' is a ``tf.data.Dataset`` of step dicts:
  observation   the observation at this step
  action        the action taken at it; reward: what followed that action
  is_first      the episode's first step
  is_last       the episode's last step: it holds the final observation, and its action and
                reward are not valid
  is_terminal   the episode ended in a terminal state (on the is_last step); an is_last step
                without it is a truncation
Read as the per-step arrays of d3rlpy's meaning: the steps before is_last are steps; the is_last
step of a truncated episode is a timed-out step (its observation is the s' of the step before;
its action and reward are not read); that of a terminated episode is dropped and the step before
it is terminal. Other step fields (discount, metadata) are not read; a dict or tuple
observation is refused.
"""
from __future__ import annotations

import numpy as np

from ccvl_tf.data import step_arrays

FIELDS = ("observation", "action", "reward", "is_first", "is_last", "is_terminal")
# step_arrays' field names -> the RLDS fields they come from, for messages
NAMES = dict(observations="observation", actions="action", rewards="reward",
             terminals="is_terminal", timeouts="is_last")
CHUNK = 1 << 16  # steps per tf.data batch while reading


def read(episodes, source: str) -> step_arrays.Steps:
  """The steps of ``episodes`` (module doc), checked: one ValueError line naming the field."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def fail(field, what):
    raise ValueError("{}: {}: {}".format(source, field, what))

  if not isinstance(episodes, tf.data.Dataset):
    fail("episodes", "expected a tf.data.Dataset of RLDS episodes, got {}".format(
        type(episodes).__name__))
  spec = episodes.element_spec
  if not isinstance(spec, dict) or not isinstance(spec.get("steps"), tf.data.DatasetSpec):
    fail("steps", "expected each episode to be a dict with a 'steps' tf.data.Dataset, got "
         "element_spec {}".format(spec))
  step_spec = spec["steps"].element_spec
  if not isinstance(step_spec, dict):
    fail("steps", "expected each step to be a dict, got {}".format(step_spec))
  missing = [k for k in FIELDS if k not in step_spec]
  if missing:
    fail("steps", "missing field(s) {}: expected {} (an RLDS dataset without is_terminal: add "
         "it, True on the is_last step of a terminated episode)".format(
             ", ".join(missing), ", ".join(FIELDS)))
  for k in FIELDS:
    if not isinstance(step_spec[k], tf.TensorSpec):
      fail(k, "expected one tensor per step, got {} (dict and tuple observations are not "
           "read)".format(step_spec[k]))

  def steps_of(i, episode):
    return episode["steps"].map(lambda s: dict({k: s[k] for k in FIELDS}, episode=i))

  chunks = list(episodes.enumerate().flat_map(steps_of).batch(CHUNK).as_numpy_iterator())
  if not chunks:
    fail("steps", "the dataset is empty (0 steps): expected at least one transition")
  a = {k: np.concatenate([c[k] for c in chunks]) for k in FIELDS + ("episode",)}
  return _steps(a, fail)


def _steps(a, fail) -> step_arrays.Steps:
  """The arrays of all steps in order (each field [S], 'episode' the episode's position) as
  step_arrays.Steps, after checking the episode flags."""
  ep = a["episode"]
  first = np.r_[True, ep[1:] != ep[:-1]]
  last = np.r_[ep[1:] != ep[:-1], True]
  starts = np.flatnonzero(first)
  step = np.arange(ep.size) - starts[np.cumsum(first) - 1]
  is_first, is_last, is_terminal = (a[k].astype(bool) for k in ("is_first", "is_last",
                                                                 "is_terminal"))

  def at(i):
    return "episode {} step {}".format(ep[i], step[i])

  bad = np.flatnonzero(is_first != first)
  if bad.size:
    i = bad[0]
    fail("is_first", "{} is not marked is_first (expected on each episode's first step)"
         .format(at(i)) if first[i] else "set at {} (expected only on the episode's first "
         "step)".format(at(i)))
  bad = np.flatnonzero(is_last & ~last)
  if bad.size:
    fail("is_last", "set at {}, before the episode's last step (expected only on the last "
         "step)".format(at(bad[0])))
  bad = np.flatnonzero(last & ~is_last)
  if bad.size:
    fail("is_last", "episode {} never ends: its last step ({}) is not is_last (expected "
         "is_last on the last step, which holds the final observation)".format(
             ep[bad[0]], step[bad[0]]))
  bad = np.flatnonzero(is_terminal & ~is_last)
  if bad.size:
    fail("is_terminal", "set at {}, which is not is_last (expected only on an episode's last "
         "step)".format(at(bad[0])))

  final_terminal = is_last & is_terminal   # dropped: a terminal state, nothing taken there
  keep = ~final_terminal
  terminals = np.r_[final_terminal[1:], False] & ~last
  timeouts = is_last & ~is_terminal
  kept_ep, kept_step = ep[keep], step[keep]
  return step_arrays.Steps(
      observations=a["observation"][keep], actions=a["action"][keep],
      rewards=a["reward"][keep], terminals=terminals[keep], timeouts=timeouts[keep],
      names=NAMES, where=lambda r: "episode {} step {}".format(kept_ep[r], kept_step[r]))
