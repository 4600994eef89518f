"""Evaluating tabular policies online: Markov (fixed-delta, CQL) and confidence-adaptive.

The confidence-adaptive policy (paper Sec. "Confidence-Adaptive Policies", Eq. delta_selection)
keeps a belief b over the delta grid, updated after *every* observed transition with the
surrogate log-likelihood of `ccvl_tf.algorithm.belief` (b(delta) proportional to
exp(-sum of squared Bellman errors / temperature)). The belief is kept across the evaluation
episodes of one run (that is how it adapts over episodes, Fig. 1 right); the delta the agent
acts with is drawn from b at the start of each episode and held for that episode, so each
episode has one delta to report.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ccvl_tf.algorithm import belief
from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular import value_iteration as vi


class Episode(NamedTuple):
  discounted_return: float
  states: np.ndarray  # visited states, start first
  delta_index: int  # grid index acted with (-1 for a policy without delta)


def run_episode(env: GridWorld, policy: np.ndarray, rng: np.random.Generator, on_step=None):
  """One episode of a deterministic policy [S] from the start state, until the goal, lava or
  the horizon. `on_step(s, a, r, s2, terminal)` is called after each transition."""
  s, ret, states = env.start_state, 0.0, [env.start_state]
  for t in range(env.horizon):
    a = int(policy[s])
    s2 = int(env.sample_next_states(np.array([s]), np.array([a]), rng)[0])
    r = float(env.R[s, a, s2])
    terminal = bool(env.terminal_mask[s2])
    ret += env.gamma ** t * r
    states.append(s2)
    if on_step is not None:
      on_step(s, a, r, s2, terminal)
    s = s2
    if terminal:
      break
  return ret, np.array(states)


def optimal_return(env: GridWorld) -> float:
  """E[discounted return of an episode] of the optimal policy of `env`, horizon included: the
  normalizer of the paper's 'return normalized by the optimal return'."""
  q, _ = vi.value_iteration(env.P, env.R, env.gamma)
  return vi.finite_horizon_return(env.P, env.R, env.gamma, vi.greedy_policy(q), env.start_state,
                                  env.horizon)


def expected_return(env: GridWorld, q: np.ndarray) -> float:
  """Exact expected episode return of the greedy policy of Q [S, A] (no sampling noise)."""
  return vi.finite_horizon_return(env.P, env.R, env.gamma, vi.greedy_policy(q), env.start_state,
                                  env.horizon)


def auto_temperature(data_bellman_errors: np.ndarray) -> float:
  """Belief temperature from the offline data alone: T = 2 * sigma^2, with sigma^2 the smallest
  mean squared Bellman error over the grid (the residual variance of the best-fitting delta).
  This is the Gaussian log-likelihood scaling -e / (2 sigma^2) of a TD residual."""
  return float(2.0 * max(np.min(data_bellman_errors), 1e-8))


def run_adaptive(env: GridWorld, q_delta: np.ndarray, num_episodes: int, temperature: float,
                 rng: np.random.Generator, select: str = "sample",
                 log_belief: np.ndarray | None = None) -> tuple:
  """Run the confidence-adaptive policy for `num_episodes` episodes with one shared belief.

  Args:
    env: the evaluation environment.
    q_delta: learned Q(s, a, delta) on the grid, [K, S, A].
    num_episodes: episodes in this evaluation run (the belief carries across them).
    temperature: T of the surrogate likelihood.
    rng: randomness for the dynamics and for sampling delta.
    select: 'sample' (delta ~ b, as the paper) or 'argmax'.
    log_belief: the initial log b [K] (uniform by default).

  Returns:
    (episodes: list[Episode], log_beliefs: [num_episodes + 1, K] belief before each episode and
    at the end).
  """
  if select not in ("sample", "argmax"):
    raise ValueError(f"select must be 'sample' or 'argmax', got {select!r}")
  if int(num_episodes) != num_episodes or num_episodes < 1:
    raise ValueError(f"num_episodes must be an integer >= 1, got {num_episodes!r}")
  k = q_delta.shape[0]
  state = {"log_b": np.asarray(belief.uniform_log_belief(k) if log_belief is None else log_belief,
                               np.float32)}
  policies = np.stack([vi.greedy_policy(q) for q in q_delta])  # [K, S]
  v_delta = q_delta.max(axis=-1)  # [K, S]

  def on_step(s, a, r, s2, terminal):
    err = belief.bellman_sq_errors(q_delta[:, s, a], r, env.gamma * (1.0 - terminal), v_delta[:, s2])
    state["log_b"] = belief.update_log_belief(state["log_b"], err, temperature).numpy()

  episodes, history = [], [state["log_b"].copy()]
  for _ in range(int(num_episodes)):
    b = np.exp(state["log_b"].astype(np.float64))
    idx = int(rng.choice(k, p=b / b.sum())) if select == "sample" else int(np.argmax(b))
    ret, states = run_episode(env, policies[idx], rng, on_step)
    episodes.append(Episode(ret, states, idx))
    history.append(state["log_b"].copy())
  return episodes, np.stack(history)
