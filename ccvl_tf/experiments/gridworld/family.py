"""The confidence family on the gridworld: each reading, solved exactly and trained as the
neural agent on one-hot states, checked against what the paper proves and against what the
adaptive policy needs.

  * `family_rows`: one row per (method, reading, alpha, seed) for `family.csv`: Lemma 1 as
    shares of visited states (V and every action's Q nondecreasing step by step along the
    delta grid), the largest V (no return exceeds 1), whether the family is more than one
    policy (the share of states whose greedy action varies along delta, tie-aware, and the
    share whose V is flat at its smallest-delta value), for the neural rows the greedy agreement
    with the exact solution of the same reading at the same deltas, and the share of
    (delta, state) pairs whose greedy action is tied (the hard-max gap ties actions exactly).
  * `theorem2_coverage`: Theorem 2 over resampled datasets, the share on which
    V(s, delta) <= V*(s) at every visited state, against the target 1 - delta.

Readings (ccvl_tf.tabular.learners.READINGS): regularized (Eq. cql update: the gap 'logsumexp'
or 'max', and '+monotone', exactly the outer max over delta' <= delta of the per-delta
solutions, in the network the monotone delta head) and bonus (Eq. update with the state count
n(s): 'bonus', and with a delta-independent gap of weight w0, 'bonus+logsumexp', 'bonus+max';
in the network reading 'bonus', the monotone head and the data-support head of
ccvl_tf/algorithm/support.py, whose threshold the exact solution uses too). docs/agent.md "The
confidence family" has the derivations.
"""
from __future__ import annotations

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import readings
from ccvl_tf.tabular import dataset as dataset_lib
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi

FAMILY_HEADER = ("method", "reading", "default", "alpha", "seed", "visited_states",
                 "v_nondecreasing_share", "q_nondecreasing_share", "v_end_ordered_share",
                 "v_max", "greedy_varies_share", "v_at_min_delta_share",
                 "policy_agreement_with_exact", "tied_greedy_share")
# tau of the data-support head (ccvl_tf/algorithm/support.py) in the bonus readings, exact and
# neural: an action is in the data's support where pi_beta(a | s) > tau max_a' pi_beta(a' | s).
SUPPORT_THRESHOLD = 0.05
THEOREM2_HEADER = ("reading", "alpha", "delta", "coverage", "n_datasets", "target")


def neural_settings(reading: str) -> dict:
  """The CCVLConfig fields of the neural agent for a family reading: its reading (a variant of
  ccvl_tf/algorithm/readings/: 'bonus' with w0 and the support head, else Algorithm 1 with the
  family's gap) and its delta head."""
  parsed = learners.parse_reading(reading)
  if parsed.form == "bonus":
    return dict(reading=readings.bonus.Bonus(
        gap=parsed.gap or "logsumexp",
        gap_weight=learners.DEFAULT_GAP_WEIGHT if parsed.gap else 0.0,
        support_threshold=SUPPORT_THRESHOLD, bonus_counts=parsed.counts),
                delta_head="monotone")
  return dict(reading=readings.from_options({"objective": "algorithm1", "gap": parsed.gap}),
              delta_head="monotone" if parsed.monotone else "cosine")


def exact_family(model, gamma: float, alpha, grid, reading: str) -> np.ndarray:
  """The exact family of `reading` [K, S, A] ([C, K, S, A] for an array alpha), with the
  support threshold its neural agent uses."""
  tau = neural_settings(reading)["reading"].support_threshold
  extra = {"support_threshold": tau} if learners.parse_reading(reading).form == "bonus" else {}
  return learners.family_q(model, gamma, alpha, grid, reading, **extra)


# The gridworld's reading: the count bonus alpha sqrt(log(1/delta) / n(s)) of Eq. (update)
# weighting the CQL logsumexp gap of Eq. (cql update), with the exact state count n(s) and the
# data's support, chosen on development datasets 100-109 by the rule of
# docs/gridworld_reading.md (the only reading of the three it compared whose Fixed-CCVL and
# CCVL both score above CQL; the earlier default was `bonus`, Eq. (update) alone,
# docs/family_choice.md). It stays the gridworld's whatever CCVLConfig trains by default on
# images (docs/agent.md "The default reading").
GRIDWORLD_READING = "bonus+logsumexp"


def default_reading() -> str:
  """The reading the gridworld experiment reports as its default (GRIDWORLD_READING)."""
  return GRIDWORLD_READING


# The family study's network: small enough for thousands of steps in seconds, N = 8 deltas
# per transition and lr 1e-3 (at N = 4 and lr 3e-3 the greedy agreement with the exact bonus
# family was 0.63-0.84; docs/family_choice.md).
NEURAL_NUM_DELTAS = 8
NEURAL_LEARNING_RATE = 1e-3


def train_neural(env: GridWorld, data, reading: str, alpha: float, seed: int, steps: int,
                 num_deltas: int = NEURAL_NUM_DELTAS):
  """The neural CCVL agent on one-hot states with exact n(s)^-1, in `reading`; returns it.

  A small MLP (64 units, 16 cosine features, hidden 64), squared TD loss, no DR3, Adam
  (NEURAL_LEARNING_RATE), target period 10, batch 64."""
  keras.utils.set_random_seed(int(seed))
  obs_spec = tensor_spec.TensorSpec([env.num_states], "float32", name="observation")
  action_spec = tensor_spec.BoundedTensorSpec([], "int32", 0, env.num_actions - 1,
                                              name="action")
  cfg = ccvl_agent.CCVLConfig(num_deltas=num_deltas, num_pairs=2, alpha=float(alpha),
                              gamma=env.gamma, td_loss="squared", dr3_coef=0.0,
                              learning_rate=NEURAL_LEARNING_RATE, adam_epsilon=1e-7,
                              target_update_period=10, seed=int(seed),
                              **neural_settings(reading))
  exact = counts_lib.ExactInverseCounts(data.state, env.num_states)
  agent = ccvl_agent.CCVLAgent(
      ts.time_step_spec(obs_spec), action_spec, cfg,
      networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=16, hidden_units=64),
      inverse_count_fn=exact.inverse_count_one_hot)
  rng = np.random.default_rng(int(seed))
  for _ in range(int(steps)):
    idx = rng.integers(0, len(data), 64)
    agent.train_on_batch(dataset_lib.one_hot_batch(env, data, idx))
  return agent


def neural_family(agent, env: GridWorld, grid: np.ndarray) -> np.ndarray:
  """The agent's Q(s, a, delta) at every state and grid delta, [K, S, A]."""
  q = agent.q_values(env.one_hot(np.arange(env.num_states)), grid).numpy()  # [S, K, A]
  return np.moveaxis(q, 0, 1)                                                # [K, S, A]


TIE_TOL = learners.TIE_TOL  # exact values within this of the maximum are tied greedy actions


def greedy_agreement(q_net: np.ndarray, q_exact: np.ndarray, states: np.ndarray) -> float:
  """Share of (delta, state) pairs at `states` where the network's greedy action is a greedy
  action of the exact family (any of its tied maximizers: the hard-max gap ties actions)."""
  net_a = q_net[:, states].argmax(-1)                                      # [K, S']
  exact = q_exact[:, states]                                               # [K, S', A]
  top = exact.max(-1, keepdims=True)
  chosen = np.take_along_axis(exact, net_a[..., None], -1)
  return float(np.mean(chosen >= top - TIE_TOL))


def tied_share(q_exact: np.ndarray, states: np.ndarray) -> float:
  """Share of (delta, state) pairs at `states` with two or more greedy actions (within TIE_TOL)."""
  exact = q_exact[:, states]
  return float(np.mean((exact >= exact.max(-1, keepdims=True) - TIE_TOL).sum(-1) >= 2))


def family_rows(env: GridWorld, seeds, alphas, grid, readings, neural_steps: int,
                num_transitions: int = dataset_lib.NUM_TRANSITIONS, log=print) -> list:
  """Rows of family.csv (FAMILY_HEADER): for each seed's dataset, alpha and reading, the exact
  family and (neural_steps > 0) the trained neural one."""
  default = default_reading()
  rows = []
  for seed in seeds:
    data = dataset_lib.make_gridworld_dataset(seed, num_transitions, env)
    model = learners.empirical_model(data, env.num_states, env.num_actions)
    visited = model.seen_s & ~env.terminal_mask
    for reading in readings:
      exact = exact_family(model, env.gamma, np.asarray(alphas, np.float64), grid,
                           reading)                                         # [C, K, S, A]
      for ai, alpha in enumerate(alphas):
        st = learners.family_stats(exact[ai], visited)
        rows.append(("exact", reading, int(reading == default), alpha, seed, st["states"],
                     *_stat_values(st), "", round(tied_share(exact[ai], visited), 4)))
        if neural_steps > 0:
          agent = train_neural(env, data, reading, alpha, seed, neural_steps)
          q = neural_family(agent, env, grid)
          st = learners.family_stats(q, visited)
          agree = greedy_agreement(q, exact[ai], visited)
          rows.append(("neural", reading, int(reading == default), alpha, seed, st["states"],
                       *_stat_values(st), round(agree, 4), round(tied_share(q, visited), 4)))
          log(f"[family] seed {seed} alpha {alpha:g} {reading}: neural V nondecreasing at "
              f"{st['v_nondecreasing_share']:.2f} of {st['states']} states, greedy action "
              f"varying along delta at {st['greedy_varies_share']:.2f}, agreement with "
              f"exact {agree:.2f}")
  return rows


def _stat_values(st):
  return (round(st["v_nondecreasing_share"], 4), round(st["q_nondecreasing_share"], 4),
          round(st["v_end_ordered_share"], 4), round(st["v_max"], 6),
          round(st["greedy_varies_share"], 4), round(st["v_at_min_delta_share"], 4))


def theorem2_coverage(env: GridWorld, grid, alphas, readings, num_datasets: int, seed: int,
                      num_transitions: int = dataset_lib.NUM_TRANSITIONS, progress=None) -> list:
  """Theorem 2 rows (THEOREM2_HEADER): for each reading, alpha and grid delta, the share of
  `num_datasets` resampled datasets (drawn as the offline dataset) on which
  V(s, delta) = max_a Q(s, a, delta) <= V*(s) at every visited non-terminal state."""
  q_star, _ = vi.value_iteration(env.P, env.R, env.gamma)
  v_star = q_star.max(-1)                                                   # [S]
  datasets = dataset_lib.collect(env, dataset_lib.behavior_policy(env), num_transitions,
                                 seed=seed, num_datasets=num_datasets)
  alphas = np.asarray(alphas, np.float64)
  held = {r: np.zeros((len(alphas), len(grid)), np.int64) for r in readings}
  for i in range(num_datasets):
    model = learners.empirical_model(datasets.dataset(i), env.num_states, env.num_actions)
    visited = model.seen_s & ~env.terminal_mask
    for r in readings:
      v = exact_family(model, env.gamma, alphas, grid, r).max(-1)          # [C, K, S]
      held[r] += np.all(v[:, :, visited] <= v_star[visited] + 1e-9, axis=-1)   # [C, K]
    if progress is not None:
      progress.step()
  return [(r, float(a), round(float(d), 4), held[r][ai, k] / num_datasets, num_datasets,
           round(1 - float(d), 4))
          for r in readings for ai, a in enumerate(alphas) for k, d in enumerate(grid)]
