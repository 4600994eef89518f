"""Collecting a dataset in a Gymnasium environment (ccvl_tf.envs.gymnasium_env) as per-step
arrays with the meaning of d3rlpy's MDPDataset, and saving them as an .npz.

`collect_steps(env, num_steps, ...)` plays a uniformly random policy, or a TF-Agents policy /
loaded SavedModel epsilon-greedily, for `num_steps` agent steps and returns, for step t:
  observations [T, ...]  the observation the action was chosen on (the env's dtype)
  actions      [T]       int32, the action taken (0..num_actions-1)
  rewards      [T]       float32, the reward the environment gave for it (raw)
  terminals    [T]       bool, the episode terminated after this step (discount 0)
  timeouts     [T]       bool, the episode was truncated after this step (time limit), or the
                         collection stopped here in an unfinished episode (its last step), so
                         the data ends at an episode boundary
  num_actions            int
At most one of terminals[t], timeouts[t] is set. `save_npz` writes the five arrays and
num_actions with np.savez_compressed: the .npz that ccvl_tf.data.transitions.Transitions.from_npz
and train_offline.py --dataset read. `ccvl_tf.collect` (experiments/offline/gym_dataset.py) is
the call by the environment's name, with a policy by its SavedModel directory too.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Callable, Dict, Optional

import numpy as np


ARRAYS = ("observations", "actions", "rewards", "terminals", "timeouts")


class _PolicyActor:
  """A TF-Agents policy or loaded SavedModel called with batch-1 TimeSteps, its state begun
  at each episode's first step and carried within the episode."""

  def __init__(self, policy):
    # Here: TensorFlow only for a policy (a random collection does not load it).
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
    self._tf, self._ts = tf, ts
    self._policy = policy
    self._action = policy.action
    self._state = None

  def __call__(self, time_step) -> int:
    tf = self._tf
    if time_step.is_first() or self._state is None:
      self._state = self._policy.get_initial_state(batch_size=1)
    batched = self._ts.TimeStep(
        tf.constant([time_step.step_type], tf.int32),
        tf.constant([time_step.reward], tf.float32),
        tf.constant([time_step.discount], tf.float32),
        tf.constant(np.asarray(time_step.observation)[np.newaxis]))
    step = self._action(batched, self._state)
    self._state = step.state
    return int(np.asarray(step.action).reshape(-1)[0])

  def executed(self, action: int) -> None:
    """Records that `action` (a random one) replaced the policy's: a state's 'prev_action' is
    set to it, so that a belief scores what really happened."""
    if isinstance(self._state, Mapping) and "prev_action" in self._state:
      state = dict(self._state)
      state["prev_action"] = self._tf.constant([action], state["prev_action"].dtype)
      self._state = state


def collect_steps(env, num_steps: int, *, policy=None, epsilon: float = 0.0, seed: int = 0,
                  progress: Optional[Callable[[dict], None]] = None,
                  progress_every: int = 1000) -> Dict[str, object]:
  """Plays `num_steps` agent steps in `env` (an unbatched TF-Agents PyEnvironment with a scalar
  int action 0..n-1, e.g. a GymnasiumEnvironment) and returns the module docstring's arrays.

  Args:
    env: the environment, reset here first.
    num_steps: >= 1.
    policy: None: uniformly random actions; else a TF-Agents policy or a SavedModel loaded with
      tf.saved_model.load (`get_initial_state(batch_size)`, `action(time_step, state)`),
      batch size 1, its state begun at each episode's start. Its `action` is called as it
      is: a SavedModel's runs as a graph, a TF-Agents policy's eagerly (for a long collection
      pass ccvl_tf.evaluation.rollouts.CompiledPolicy(policy), one tf.function).
    epsilon: with a policy, the probability of a uniformly random action instead of its own.
    seed: seeds the random actions (numpy); the environment is seeded where it was made.
    progress: called with dict(step, num_steps, episodes, mean_return) every
      `progress_every` steps and at the end.
  """
  if int(num_steps) != num_steps or num_steps < 1:
    raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}")
  if not 0.0 <= float(epsilon) <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  spec = env.action_spec()
  num_actions = int(spec.maximum) - int(spec.minimum) + 1
  rng = np.random.default_rng(seed)
  actor = None if policy is None else _PolicyActor(policy)
  obs_spec = env.observation_spec()
  n = int(num_steps)
  out = dict(observations=np.zeros((n,) + tuple(obs_spec.shape), obs_spec.dtype),
             actions=np.zeros((n,), np.int32), rewards=np.zeros((n,), np.float32),
             terminals=np.zeros((n,), bool), timeouts=np.zeros((n,), bool))
  returns, ep_return = [], 0.0
  time_step = env.reset()
  for t in range(n):
    if actor is not None:
      action = actor(time_step)
      if epsilon > 0.0 and rng.random() < epsilon:
        action = int(rng.integers(num_actions))
        actor.executed(action)
    else:
      action = int(rng.integers(num_actions))
    nxt = env.step(np.asarray(int(spec.minimum) + action, spec.dtype))
    out["observations"][t] = time_step.observation
    out["actions"][t] = action
    out["rewards"][t] = nxt.reward
    ep_return += float(nxt.reward)
    if nxt.is_last():
      out["terminals"][t] = float(nxt.discount) == 0.0
      out["timeouts"][t] = float(nxt.discount) != 0.0
      returns.append(ep_return)
      ep_return = 0.0
      time_step = env.reset()
    else:
      time_step = nxt
    if progress is not None and ((t + 1) % int(progress_every) == 0 or t + 1 == n):
      progress(dict(step=t + 1, num_steps=n, episodes=len(returns),
                    mean_return=float(np.mean(returns)) if returns else None))
  if not (out["terminals"][-1] or out["timeouts"][-1]):
    out["timeouts"][-1] = True
  out["num_actions"] = num_actions
  return out


def save_npz(path: str, data: Mapping) -> None:
  """Writes the arrays of `data` (ARRAYS) and its num_actions to `path` with
  np.savez_compressed, through `path`.tmp renamed into place (an interrupted write leaves no
  partial `path`)."""
  tmp = path + ".tmp"
  try:
    with open(tmp, "wb") as f:
      np.savez_compressed(f, num_actions=np.int64(data["num_actions"]),
                          **{k: np.asarray(data[k]) for k in ARRAYS})
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
