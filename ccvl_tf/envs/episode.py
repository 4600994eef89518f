"""What the ALE and MinAtar environments share: their specs and the end of an agent step.

Both keep the same bookkeeping: the raw (unclipped) reward of the last step and the episode's
raw return, a reward clipped to [-1, 1] in the TimeStep (as Dopamine / the DQN Replay Dataset),
termination (discount 0) at a game over and truncation (discount 1) at the step cap.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts


class GameEnvironment(py_environment.PyEnvironment):
  """Base of AtariEnvironment and MinAtarEnvironment: uint8 observations, int32 actions
  0..num_actions-1 (indices into the game's minimal action set) and the step bookkeeping that
  `finish_step` updates."""

  def _init_game(self, observation_shape: Sequence[int], observation_max: int,
                 num_actions: int, max_steps: Optional[int], clip_rewards: bool) -> None:
    """The specs and a fresh episode's counters (call from __init__)."""
    self._max_steps = None if max_steps is None else int(max_steps)
    self._clip = bool(clip_rewards)
    self._start_episode()
    self._done = True  # no episode yet: the first step resets
    self._obs_spec = array_spec.BoundedArraySpec(tuple(observation_shape), np.uint8, 0,
                                                 observation_max, name="observation")
    self._act_spec = array_spec.BoundedArraySpec((), np.int32, 0, int(num_actions) - 1,
                                                 name="action")

  def observation_spec(self):
    return self._obs_spec

  def action_spec(self):
    return self._act_spec

  @property
  def num_actions(self) -> int:
    return int(self._act_spec.maximum) + 1

  def _start_episode(self) -> None:
    """Zeroes the step bookkeeping at the start of an episode (from `_reset`)."""
    self._steps = 0
    self._done = False
    self._truncated = False
    self.last_raw_reward = 0.0
    self.episode_raw_return = 0.0

  def _action_index(self, action, game_label: str) -> int:
    """`action` (a scalar of any int dtype) as an index into the minimal action set; a
    ValueError naming the index, the range and `game_label` when it lies outside."""
    a = int(np.asarray(action).reshape(()))
    if not 0 <= a < self.num_actions:
      raise ValueError("action {} outside [0, {}) for {}".format(a, self.num_actions,
                                                                  game_label))
    return a


def finish_step(env, raw_reward: float, game_over: bool, observation) -> ts.TimeStep:
  """Updates env's counters (`_steps`, `last_raw_reward`, `episode_raw_return`, `_done`,
  `_truncated`) after one agent step with raw reward `raw_reward` and returns the TimeStep:
  termination at a game over, truncation when `_steps` reaches `_max_steps`, else a
  transition. The env provides `_clip` (clip the TimeStep reward) and `_max_steps` (or None)."""
  # pylint: disable=protected-access
  env._steps += 1
  env.last_raw_reward = float(raw_reward)
  env.episode_raw_return += float(raw_reward)
  reward = np.float32(np.clip(raw_reward, -1.0, 1.0) if env._clip else raw_reward)
  if game_over:
    env._done = True
    return ts.termination(observation, reward)
  if env._max_steps is not None and env._steps >= env._max_steps:
    env._done = True
    env._truncated = True
    return ts.truncation(observation, reward)
  return ts.transition(observation, reward)
