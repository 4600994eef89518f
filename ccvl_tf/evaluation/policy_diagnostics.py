"""Policy-level diagnostics: what the greedy policies of a trained agent do on dataset states.

A CQL(H)-type penalty on dataset states reshapes the *action preferences* of Q(s, ., delta)
(at its fixed point it moves Q(s, a) by about w (pi(a|s) / pi_beta(a|s) - 1)) more than the
value V(s, delta) = max_a Q(s, a, delta); so whether CCVL's confidence family is a family of
different *policies* shows in its greedy actions, not in V. On held-out dataset
states s_i with the data's actions a_i:

  * `greedy_action_stats` (one delta): does the greedy policy depend on the state at all
    (greedy_mode_share: the largest share of one greedy action; 1.0 = one action everywhere),
    and how often does it pick the data's action (behaviour_agreement);
  * `family_action_stats` (the policy's delta grid): the share of states whose greedy action
    differs between the grid's smallest and largest delta (differs_ends) and anywhere along
    the grid (differs_any), and per grid delta the agreement with the data's action, the
    greedy mode share and the CQL gap logsumexp_a Q(s, a, delta) - Q(s, a_D, delta).

Both take the contract Q-model {'observation': [B, ...], 'delta': [B, K]} -> Q [B, K, A], so
they apply to CCVL and to the delta-free baselines (whose Q ignores delta: differs_* = 0).
"""
from __future__ import annotations

from typing import Dict, List

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

from ccvl_tf.tabular import learners


def q_at_deltas(q_model, observations, grid32: np.ndarray, batch_size: int) -> np.ndarray:
  """Q(s, a, delta) for observations [S, ...] at every grid delta -> float64 [S, K, A]."""
  s = int(observations.shape[0])
  k = int(grid32.shape[0])
  out = []
  for i in range(0, s, batch_size):
    obs = observations[i:i + batch_size]
    deltas = np.broadcast_to(grid32[np.newaxis, :], (obs.shape[0], k))  # [K] -> [B, K]
    q = np.asarray(q_model({"observation": tf.convert_to_tensor(obs),
                            "delta": tf.constant(deltas, tf.float32)}, training=False),
                   np.float64)
    if q.ndim != 3 or q.shape[:2] != (obs.shape[0], k):
      raise ValueError(f"q_model must return Q [B, K, A] = [{obs.shape[0]}, {k}, A], got "
                       f"shape {q.shape}")
    out.append(q)
  return np.concatenate(out, axis=0)                                  # [S, K, A]


def _check_actions(actions, num_states: int) -> np.ndarray:
  actions = np.asarray(actions, np.int64).reshape(-1)
  if actions.shape[0] != num_states:
    raise ValueError(f"{actions.shape[0]} actions for {num_states} observations")
  return actions


def _mode_share(a: np.ndarray, num_actions: int) -> float:
  """The largest share of one value in `a` (ints in [0, num_actions))."""
  return float(np.bincount(a, minlength=num_actions).max() / max(a.size, 1))


def greedy_action_stats(q_model, observations, actions, delta: float,
                        num_actions: int) -> Dict[str, float]:
  """Whether the greedy policy at `delta` depends on the state, on dataset states.

  Args:
    q_model: contract Q-model {'observation', 'delta'} -> Q [B, K, A].
    observations: [B, ...] dataset observations; actions: [B] the data's actions there
      (indices 0..A-1).
    delta: the confidence the greedy action is taken at.
    num_actions: A.

  Returns:
    'greedy_mode_share': the largest share of states with the same greedy action (1.0: the
      policy plays one action everywhere);
    'behaviour_agreement': share of states where the greedy action is the data's action;
    'behaviour_mode_share': the largest share of one action in the data (the agreement a
      state-independent policy playing the data's most frequent action would get).
  """
  observations = np.asarray(observations)
  actions = _check_actions(actions, observations.shape[0])
  q = q_at_deltas(q_model, observations, np.asarray([delta], np.float32),
                 max(1, observations.shape[0]))[:, 0, :]               # [B, A]
  greedy = np.argmax(q, axis=-1)                                      # [B]
  return {"greedy_mode_share": _mode_share(greedy, num_actions),
          "behaviour_agreement": float(np.mean(greedy == actions)),
          "behaviour_mode_share": _mode_share(actions, num_actions)}


def family_action_stats(q_model, observations, actions, grid, num_actions: int,
                        batch_size: int = 256) -> Dict[str, object]:
  """The delta family as a family of greedy policies, on (held-out) dataset states.

  Args:
    q_model: contract Q-model {'observation', 'delta'} -> Q [B, K, A].
    observations: [S, ...] dataset observations (S >= 1), run in batches of `batch_size`.
    actions: [S] the data's actions there (indices 0..A-1).
    grid: the policy's deltas [K], sorted increasing, each in (0, 1).
    num_actions: A.

  Returns:
    dict with
      'grid': [K];
      'differs_ends': share of states whose greedy action at grid[0] differs from the one at
        grid[-1];
      'differs_any': share of states whose greedy action is not the same at every grid delta;
      'greedy_varies': the same, tie-aware (tabular.learners.greedy_varies: some two grid
        deltas have disjoint greedy action sets within 1e-6, so a switch between tied actions
        does not count);
      'v_at_min_delta': share of states whose V(s, delta) equals V(s, grid[0]) within 1e-6 at
        every grid delta (a family flat in value);
      'agreement': [K] share of states where the greedy action at delta_k is the data's action;
      'greedy_mode_share': [K] the largest share of one greedy action at delta_k;
      'cql_gap': [K] mean over states of logsumexp_a Q(s, a, delta_k) - Q(s, a_D, delta_k)
        (log A = no preference at all; 0 = all the mass on the data's action);
      'behaviour_mode_share': the largest share of one action in the data.
    Ties in argmax go to the lowest action index (numpy's argmax).
  """
  g = np.asarray(grid, np.float64).reshape(-1)
  if g.size < 1 or np.any(g <= 0) or np.any(g >= 1) or np.any(np.diff(g) <= 0):
    raise ValueError(f"grid must be sorted strictly increasing deltas in (0, 1), got "
                     f"{g.tolist()}")
  observations = np.asarray(observations)
  if observations.shape[0] < 1:
    raise ValueError("family_action_stats needs at least one observation")
  actions = _check_actions(actions, observations.shape[0])
  q = q_at_deltas(q_model, observations, g.astype(np.float32), batch_size)  # [S, K, A]
  greedy = np.argmax(q, axis=-1)                                       # [S, K]
  q_data = np.take_along_axis(q, actions[:, None, None], axis=-1)[..., 0]  # [S, K]
  qmax = q.max(axis=-1, keepdims=True)                                 # [S, K, 1]
  lse = qmax[..., 0] + np.log(np.exp(q - qmax).sum(axis=-1))           # [S, K]
  to_list = lambda x: [float(v) for v in x]  # noqa: E731
  return {
      "grid": to_list(g),
      "differs_ends": float(np.mean(greedy[:, 0] != greedy[:, -1])),
      "differs_any": float(np.mean(np.any(greedy != greedy[:, :1], axis=1))),
      "greedy_varies": float(np.mean(learners.greedy_varies(np.moveaxis(q, 1, 0)))),
      "v_at_min_delta": float(np.mean(learners.v_at_min_delta(np.moveaxis(q, 1, 0)))),
      "agreement": to_list(np.mean(greedy == actions[:, None], axis=0)),
      "greedy_mode_share": [_mode_share(greedy[:, i], num_actions)
                            for i in range(greedy.shape[1])],
      "cql_gap": to_list(np.mean(lse - q_data, axis=0)),
      "behaviour_mode_share": _mode_share(actions, num_actions),
  }


def family_summary(stats: Dict[str, object]) -> Dict[str, float]:
  """The headline numbers of `family_action_stats` as flat floats (summary.json /
  TensorBoard): family_differs_ends, family_differs_any, family_greedy_varies,
  family_v_at_min_delta, and the agreement, greedy mode share and CQL gap at the grid's
  smallest (lo) and largest (hi) delta."""
  out = {"family_differs_ends": float(stats["differs_ends"]),
         "family_differs_any": float(stats["differs_any"]),
         "family_greedy_varies": float(stats["greedy_varies"]),
         "family_v_at_min_delta": float(stats["v_at_min_delta"])}
  for key in ("agreement", "greedy_mode_share", "cql_gap"):
    values: List[float] = stats[key]
    out[f"family_{key}_lo"] = float(values[0])
    out[f"family_{key}_hi"] = float(values[-1])
  return out
