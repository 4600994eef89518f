"""A DQN Replay-format dataset as d3rlpy episodes, exactly the transitions our learners train on.

Runs in the project's own environment (numpy and ccvl_tf's frame store; no d3rlpy import).

Our frame store (ccvl_tf/data/frame_store.py) holds one 84x84 frame per Dopamine slot and builds
the 4-frame stack of a valid slot i from frames i-3..i; an episode starts with three zero padding
frames, so its first valid stack is [0, 0, 0, f]. d3rlpy's FrameStackTransitionPicker(n_frames=4)
builds the stack of step t of an episode from its observations t-3..t with zeros before the
episode's first observation. So each maximal run of consecutive valid slots becomes one d3rlpy
episode whose observations are the runs' last frames [T, 1, 84, 84]:

* a run that ends at a terminal slot is a terminated episode (d3rlpy: next observation zero,
  terminal 1; ours: terminal 1, the next observation unused);
* a run that ends without one (the collection stopped mid-episode, or the next slot is not a
  valid transition) gets the frame of the slot after its last as one more observation, with a
  timeout flag there: d3rlpy then has one transition per valid slot of the run, the last one's
  next observation being that frame, as in our store.

`check_stacks` rebuilds every observation and next observation with d3rlpy's rule and compares it
with the store's `gather` bit for bit, so the peer learners see exactly our transitions (or the
export refuses).
"""
from __future__ import annotations

import os
from typing import Dict

import numpy as np

from ccvl_tf.runtime import strict_json

FRAME_STACK = 4
ARRAYS = ("observations", "actions", "rewards", "terminals", "timeouts")


def episodes_from_store(store) -> Dict[str, np.ndarray]:
  """The store's valid transitions as d3rlpy MDPDataset arrays: observations uint8
  [T, 1, H, W] (one frame per step), actions int64 [T], rewards float32 [T], terminals and
  timeouts float32 [T] (1 at an episode's last step), and 'slot' int64 [T] (the store slot of
  each step, for checks)."""
  if store.frames.ndim != 3 or store.stack_size != FRAME_STACK:
    raise ValueError(f"expected 2-D frames stacked by {FRAME_STACK} (Atari), got frames "
                     f"{store.frames.shape} with stack size {store.stack_size}")
  valid = np.asarray(store.valid, np.int64)
  terminal = np.asarray(store.terminal) != 0
  # A run ends at a terminal slot or where the next valid slot is not the next slot.
  ends_run = terminal[valid] | np.append(np.diff(valid) != 1, True)
  slots, term_flags, timeout_flags, dummy = [], [], [], []
  start = 0
  for end in np.flatnonzero(ends_run):
    run = valid[start:end + 1]
    slots.append(run)
    n = run.size
    if terminal[run[-1]]:
      term_flags.append(np.eye(1, n, n - 1, dtype=np.float32)[0])
      timeout_flags.append(np.zeros(n, np.float32))
      dummy.append(np.zeros(n, bool))
    else:  # one more observation: the next state of the run's last transition
      slots.append(np.array([run[-1] + 1], np.int64))
      term_flags.append(np.zeros(n + 1, np.float32))
      timeout_flags.append(np.eye(1, n + 1, n, dtype=np.float32)[0])
      dummy.append(np.append(np.zeros(n, bool), True))
    start = end + 1
  slot = np.concatenate(slots)
  is_dummy = np.concatenate(dummy)
  return {
      "observations": store.frames[slot][:, None],
      # The appended next-state step takes no action; d3rlpy never samples it as a transition.
      "actions": np.where(is_dummy, 0, store.action[slot]).astype(np.int64),
      "rewards": np.where(is_dummy, 0.0, store.reward[slot]).astype(np.float32),
      "terminals": np.concatenate(term_flags),
      "timeouts": np.concatenate(timeout_flags),
      "slot": slot,
  }


def _episode_bounds(arrays) -> np.ndarray:
  """[E, 2] start (inclusive) and end (exclusive) step of each episode."""
  ends = np.flatnonzero((arrays["terminals"] + arrays["timeouts"]) > 0) + 1
  return np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1)


def d3rlpy_stacks(observations: np.ndarray, start: int, index: np.ndarray) -> np.ndarray:
  """uint8 [B, H, W, 4] stacks (oldest first, our layout) of steps `index` of the episode that
  starts at step `start`, by d3rlpy's frame-stacking rule: the last 4 observations of the
  episode up to the step, zeros before the episode's first."""
  index = np.asarray(index, np.int64)
  out = np.zeros((index.size,) + observations.shape[2:] + (FRAME_STACK,), np.uint8)
  for j in range(FRAME_STACK):
    src = index - (FRAME_STACK - 1 - j)
    ok = src >= start
    out[ok, ..., j] = observations[src[ok], 0]
  return out


def check_stacks(store, arrays, chunk: int = 4096) -> int:
  """Checks every transition of `arrays` (episodes_from_store) against the store: the same
  observation stack, action, reward and terminal, and (non-terminal ones) the same next
  observation stack, and that every valid slot appears once. Returns the number of
  transitions checked; raises ValueError at the first difference."""
  obs = arrays["observations"]
  positions = {int(s): p for p, s in enumerate(np.asarray(store.valid))}
  seen = 0
  for start, end in _episode_bounds(arrays):
    terminated = arrays["terminals"][end - 1] > 0
    steps = np.arange(start, end if terminated else end - 1)
    for lo in range(0, steps.size, chunk):
      idx = steps[lo:lo + chunk]
      try:
        pos = np.array([positions[int(s)] for s in arrays["slot"][idx]])
      except KeyError as e:
        raise ValueError(f"step of slot {e} is not a valid transition of the store") from e
      ours = store.gather(pos)
      last = idx == end - 1  # the terminal step: its next observation is unused
      checks = {
          "observation": (d3rlpy_stacks(obs, start, idx), ours["observation"]),
          "action": (arrays["actions"][idx], ours["action"]),
          "reward": (arrays["rewards"][idx], ours["reward"]),
          "terminal": (last & terminated, ours["terminal"] > 0),
          "next_observation": (d3rlpy_stacks(obs, start, idx[~last] + 1),
                               ours["next_observation"][~last]),
      }
      for name, (theirs, mine) in checks.items():
        if not np.array_equal(np.asarray(theirs), np.asarray(mine)):
          raise ValueError(f"the exported {name} differs from the frame store's in the episode "
                           f"starting at step {start}")
      seen += idx.size
  if seen != store.num_transitions:
    raise ValueError(f"{seen} transitions exported, the store has {store.num_transitions}")
  return seen


def write(arrays, out_dir: str, info: Dict[str, object]) -> None:
  """One .npy per array (loadable by any numpy) and info.json (game, action count, ...)."""
  os.makedirs(out_dir, exist_ok=True)
  for name in ARRAYS:
    np.save(os.path.join(out_dir, f"{name}.npy"), arrays[name])
  with open(os.path.join(out_dir, "info.json"), "w") as f:
    strict_json.dump(info, f, indent=1)
