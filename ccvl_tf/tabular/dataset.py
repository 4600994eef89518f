"""Offline datasets for the tabular gridworld (paper: 2.5k transitions, behavior policy that takes
the optimal action with probability 0.5 and a uniformly random action otherwise).
"""
from __future__ import annotations

from typing import Dict, NamedTuple

import numpy as np

from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular import value_iteration as vi

NUM_TRANSITIONS = 2500
OPTIMAL_ACTION_PROB = 0.5


class Transitions(NamedTuple):
  """Offline transitions (s, a, r, s', terminal); integer states. Arrays share one shape:
  [N] for one dataset, [D, N] for a stack of D datasets."""
  state: np.ndarray
  action: np.ndarray
  reward: np.ndarray
  next_state: np.ndarray
  terminal: np.ndarray  # 1.0 when s' is the goal or lava (value exactly 0 after it)

  def __len__(self):
    return self.state.shape[-1]

  def dataset(self, i: int) -> "Transitions":
    """The i-th dataset of a stack [D, N]."""
    return Transitions(*(x[i] for x in self))


def behavior_policy(env: GridWorld, optimal_action_prob: float = OPTIMAL_ACTION_PROB) -> np.ndarray:
  """pi_beta [S, A]: the optimal action of `env` w.p. `optimal_action_prob`, uniform otherwise.

  "Optimal" is the greedy policy of exact value iteration on `env` (the data environment,
  p = 0.3), so the optimal action's total probability is 0.5 + 0.5 / 4 = 0.625.
  """
  if not 0.0 <= optimal_action_prob <= 1.0:
    raise ValueError(f"optimal_action_prob must be in [0, 1], got {optimal_action_prob!r}")
  q, _ = vi.value_iteration(env.P, env.R, env.gamma)
  opt = np.eye(env.num_actions)[vi.greedy_policy(q)]
  uniform = np.full_like(opt, 1.0 / env.num_actions)
  return optimal_action_prob * opt + (1.0 - optimal_action_prob) * uniform


def collect(env: GridWorld, policy: np.ndarray, num_transitions: int = NUM_TRANSITIONS,
            seed: int = 0, num_datasets: int | None = None) -> Transitions:
  """Roll out `policy` [S, A] in `env` from the start state until `num_transitions` transitions.

  Episodes end on entering the goal or lava (terminal = 1) or after `env.horizon` steps
  (a time-out: terminal = 0), then restart at the start state. With `num_datasets=D` it
  simulates D independent datasets in lock step (vectorized) and returns arrays [D, N];
  otherwise [N]. Deterministic given `seed`.
  """
  if int(num_transitions) != num_transitions or num_transitions < 1:
    raise ValueError(f"num_transitions must be an integer >= 1, got {num_transitions!r}")
  policy = np.asarray(policy, np.float64)
  if policy.shape != (env.num_states, env.num_actions):
    raise ValueError(f"policy must be [S, A] = {(env.num_states, env.num_actions)}, "
                     f"got {policy.shape}")
  d = 1 if num_datasets is None else int(num_datasets)
  if d < 1:
    raise ValueError(f"num_datasets must be >= 1, got {num_datasets!r}")
  rng = np.random.default_rng(seed)
  n = int(num_transitions)
  out = {k: np.zeros((d, n), np.int64) for k in ("state", "action", "next_state")}
  reward = np.zeros((d, n), np.float32)
  terminal = np.zeros((d, n), np.float32)
  pcdf = np.cumsum(policy, axis=1)
  s = np.full(d, env.start_state)
  t_in_episode = np.zeros(d, np.int64)
  for t in range(n):
    a = np.minimum((rng.random(d)[:, None] > pcdf[s]).sum(-1), env.num_actions - 1)
    s2 = env.sample_next_states(s, a, rng)
    out["state"][:, t], out["action"][:, t], out["next_state"][:, t] = s, a, s2
    reward[:, t] = env.R[s, a, s2]
    done = env.terminal_mask[s2]
    terminal[:, t] = done
    t_in_episode += 1
    reset = done | (t_in_episode >= env.horizon)
    s = np.where(reset, env.start_state, s2)
    t_in_episode[reset] = 0
  tr = Transitions(out["state"], out["action"], reward, out["next_state"], terminal)
  return tr.dataset(0) if num_datasets is None else tr


def make_gridworld_dataset(seed: int = 0, num_transitions: int = NUM_TRANSITIONS,
                           env: GridWorld | None = None) -> Transitions:
  """The paper's offline dataset: 2,500 transitions from the behavior policy in the p = 0.3
  gridworld, seeded."""
  env = env or GridWorld()
  return collect(env, behavior_policy(env), num_transitions, seed)


def one_hot_batch(env: GridWorld, transitions: Transitions, idx) -> Dict[str, np.ndarray]:
  """The transitions at indices `idx` [B] as a learner batch: one-hot observation and
  next_observation float32 [B, S], action int32 [B], reward and terminal float32 [B]."""
  return dict(observation=env.one_hot(transitions.state[idx]),
              action=transitions.action[idx].astype(np.int32),
              reward=transitions.reward[idx].astype(np.float32),
              next_observation=env.one_hot(transitions.next_state[idx]),
              terminal=transitions.terminal[idx].astype(np.float32))
