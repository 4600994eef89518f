"""The lava gridworld of ccvl_tf/tabular/gridworld.py as a TF-Agents PyEnvironment, and its
score.

tabular/gridworld.py stays numpy-only (the tabular learners use it without TensorFlow); this
module adds the TF-Agents side: `GridWorldEnvironment` (what the networks' learners, the exported
policies and the online actors run in) and `normalized_return`, the gridworld's normalized
score: 100 x the episode's discounted return / the optimal policy's expected discounted return
(the paper's gridworld figure).
"""
from __future__ import annotations

import functools

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.tabular import gridworld
from ccvl_tf.tabular import evaluation as tabular_eval


def eval_world(horizon: int = gridworld.HORIZON) -> gridworld.GridWorld:
  """The paper's gridworld at its evaluation slip probability (0.15)."""
  return gridworld.GridWorld(slip_prob=gridworld.EVAL_SLIP_PROB, horizon=int(horizon))


class GridWorldEnvironment(py_environment.PyEnvironment):
  """A ccvl_tf.tabular.gridworld.GridWorld as an unbatched TF-Agents PyEnvironment.

  observation: one-hot float32 [S]; action: int32 in [0, 4). Entering the goal or lava ends
  the episode (termination, discount 0); `horizon` steps end it by truncation (discount 1).
  get_info() has 'episode_discounted_return' (gamma^t-discounted, as the tabular evaluation and
  the paper's gridworld normalization use).
  """

  def __init__(self, world: gridworld.GridWorld, seed: int = 0):
    super().__init__(handle_auto_reset=True)
    self.world = world
    self._rng = np.random.default_rng(seed)
    self._obs_spec = array_spec.BoundedArraySpec((world.num_states,), np.float32, 0.0, 1.0,
                                                 name="observation")
    self._act_spec = array_spec.BoundedArraySpec((), np.int32, 0, world.num_actions - 1,
                                                 name="action")
    self._s, self._t, self._disc_return = world.start_state, 0, 0.0

  def observation_spec(self):
    return self._obs_spec

  def action_spec(self):
    return self._act_spec

  def get_info(self):
    return {"episode_discounted_return": self._disc_return, "state": self._s, "t": self._t}

  def _reset(self):
    self._s, self._t, self._disc_return = self.world.start_state, 0, 0.0
    return ts.restart(self.world.one_hot(self._s))

  def _step(self, action):
    a = int(np.asarray(action).reshape(()))
    if not 0 <= a < self.world.num_actions:
      raise ValueError(f"action {a} outside [0, {self.world.num_actions})")
    s2 = int(self.world.sample_next_states(np.array([self._s]), np.array([a]), self._rng)[0])
    r = float(self.world.R[self._s, a, s2])
    self._disc_return += self.world.gamma ** self._t * r
    self._s, self._t = s2, self._t + 1
    obs = self.world.one_hot(s2)
    if bool(self.world.terminal_mask[s2]):
      return ts.termination(obs, np.float32(r))
    if self._t >= self.world.horizon:
      return ts.truncation(obs, np.float32(r))
    return ts.transition(obs, np.float32(r))


@functools.lru_cache(maxsize=8)
def _optimal_return(world: gridworld.GridWorld) -> float:
  # GridWorld is a frozen dataclass: hashed and compared by (slip_prob, gamma, horizon, layout).
  return tabular_eval.optimal_return(world)


def normalized_return(score, world: gridworld.GridWorld) -> np.ndarray:
  """100 x discounted return(s) `score` / the expected discounted return of `world`'s optimal
  policy, horizon included (ccvl_tf.tabular.evaluation.optimal_return); float64."""
  return 100.0 * np.asarray(score, np.float64) / _optimal_return(world)
