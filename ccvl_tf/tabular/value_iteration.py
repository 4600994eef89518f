"""Exact dynamic programming on a known tabular MDP (P, R, gamma).

Conventions (shared by the whole `ccvl_tf.tabular` package):
  P: [S, A, S'] transition probabilities, rows sum to 1.
  R: [S, A, S'] reward received on the transition (s, a) -> s'.
  Absorbing zero-reward states (goal after arrival, lava) are modelled as self-loops with
  reward 0, so their value is exactly 0 for every policy.
"""
from __future__ import annotations

import numpy as np


def expected_reward(P: np.ndarray, R: np.ndarray) -> np.ndarray:
  """r(s, a) = sum_s' P(s'|s,a) R(s,a,s'), [S, A]."""
  return np.einsum("ijk,ijk->ij", P, R)


def _check(P, R, gamma):
  P = np.asarray(P, np.float64)
  R = np.asarray(R, np.float64)
  if P.ndim != 3 or P.shape[0] != P.shape[2]:
    raise ValueError(f"P must have shape [S, A, S], got {P.shape}")
  if R.shape != P.shape:
    raise ValueError(f"R must have the shape of P {P.shape}, got {R.shape}")
  if not np.allclose(P.sum(-1), 1.0, atol=1e-8):
    raise ValueError("every row P[s, a, :] must sum to 1")
  if not 0.0 <= gamma < 1.0:
    raise ValueError(f"gamma must be in [0, 1), got {gamma!r}")
  return P, R


def value_iteration(P, R, gamma: float, tol: float = 1e-10, max_iters: int = 100_000):
  """Q* by value iteration: Q(s,a) <- r(s,a) + gamma sum_s' P(s'|s,a) max_a' Q(s',a').

  Returns:
    (Q* [S, A], V* [S]) converged to `tol` in the sup norm.
  """
  P, R = _check(P, R, gamma)
  r = expected_reward(P, R)
  q = np.zeros_like(r)
  for _ in range(max_iters):
    q_new = r + gamma * P @ q.max(axis=1)  # [S, A, S'] @ [S'] -> [S, A]
    if np.max(np.abs(q_new - q)) < tol:
      q = q_new
      break
    q = q_new
  else:
    raise RuntimeError(f"value iteration did not converge to {tol} in {max_iters} iterations")
  return q, q.max(axis=1)


def greedy_policy(q: np.ndarray, tol: float = 1e-9) -> np.ndarray:
  """Deterministic greedy policy, ties broken towards the lowest action index. [S] int."""
  q = np.asarray(q, np.float64)
  best = q.max(axis=1, keepdims=True)
  return np.argmax(q >= best - tol, axis=1)


def policy_matrix(policy, num_actions: int) -> np.ndarray:
  """A deterministic policy [S] (ints) or a stochastic one [S, A] as a matrix pi[s, a]."""
  policy = np.asarray(policy)
  if policy.ndim == 1:
    return np.eye(num_actions)[policy]
  return policy.astype(np.float64)


def policy_evaluation(P, R, gamma: float, policy) -> np.ndarray:
  """Exact V^pi [S] for a stationary policy (deterministic [S] or stochastic [S, A])."""
  P, R = _check(P, R, gamma)
  pi = policy_matrix(policy, P.shape[1])
  r_pi = np.einsum("sa,sa->s", pi, expected_reward(P, R))
  p_pi = np.einsum("sa,sat->st", pi, P)
  return np.linalg.solve(np.eye(P.shape[0]) - gamma * p_pi, r_pi)


def finite_horizon_return(P, R, gamma: float, policy, start_state: int, horizon: int) -> float:
  """E[sum_{t < horizon} gamma^t r_t] from `start_state` under a stationary policy.

  This is exactly what an evaluation episode truncated at `horizon` steps measures, so it is
  the right normalizer for sampled evaluation returns.
  """
  P, R = _check(P, R, gamma)
  pi = policy_matrix(policy, P.shape[1])
  r_pi = np.einsum("sa,sa->s", pi, expected_reward(P, R))
  p_pi = np.einsum("sa,sat->st", pi, P)
  v = np.zeros(P.shape[0])
  for _ in range(horizon):  # backward induction: v_{h+1} = r_pi + gamma P_pi v_h
    v = r_pi + gamma * p_pi @ v
  return float(v[start_state])
