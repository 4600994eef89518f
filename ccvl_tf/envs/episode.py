"""The end of an agent step, shared by the ALE and MinAtar environments.

Both keep the same bookkeeping: the raw (unclipped) reward of the last step and the episode's
raw return, a reward clipped to [-1, 1] in the TimeStep (as Dopamine / the DQN Replay Dataset),
termination (discount 0) at a game over and truncation (discount 1) at the step cap.
"""
from __future__ import annotations

import numpy as np
from tf_agents.trajectories import time_step as ts


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
