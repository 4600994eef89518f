"""Online fine-tuning's evaluations: the scores of the learner's policies (`evaluate`; on the
gridworld also exactly, `exact_gridworld_scores`), the tightness of the bounds against
Monte-Carlo returns (`bound_tightness`) and, on the gridworld, against exact values
(`gridworld_bounds_report`: Q* and the tabular bounds, experiments/gridworld/bounds.py).

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/scores_and_bounds.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.algorithm import belief
from ccvl_tf.envs import factory
from ccvl_tf.envs import gridworld_env
from ccvl_tf.experiments.gridworld import bounds as gridworld_bounds
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.algorithm import policies
from ccvl_tf.evaluation import rollouts
from ccvl_tf.tabular import value_iteration as vi

TIGHTNESS_DELTAS = (0.1, 0.5, 0.9)


def named_policies(cfg, agent) -> Dict[str, object]:
  """{'lower', 'adaptive' (CCVL agents), 'bounds' (with Q_u)} -> TF-Agents policy."""
  tss, act = agent.time_step_spec, agent.action_spec
  named = {"lower": policies.FixedDeltaPolicy(tss, act, agent.q_network, cfg.policy_delta)}
  if cfg.offline_agent == "ccvl":
    named["adaptive"] = ccvl_bounds_agent.exploration_belief_policy(
        tss, act, agent.q_network, agent.config.gamma,
        dataclasses.replace(cfg.bounds(), explore_delta=None), cfg.seed)
  if agent.bounds_policy is not None:
    named["bounds"] = agent.bounds_policy
  return named


def primary_policy_name(agent: str) -> str:
  """The policy the fine-tuning table reports for --agent `agent`: 'adaptive' for the CCVL
  agents, else 'lower' (CQL's greedy policy)."""
  return "adaptive" if online_config.OFFLINE_AGENT[agent] == "ccvl" else "lower"


def evaluate(cfg, agent, step: int, episodes: Optional[int] = None) -> Dict[str, float]:
  """Mean raw (and normalized) score of each of `named_policies` over `episodes` (default
  cfg.eval_episodes) episodes of a fresh environment. The seeds (environment, epsilon) depend
  on cfg.seed only, not on `step`: every evaluation of a run -- the offline start ("before"),
  mid-run, the end ("after") -- plays episodes from the same seeds, so a gain compares the
  policies on the same environment randomness."""
  del step  # the seeds do not depend on it (above)
  episodes = cfg.eval_episodes if episodes is None else episodes
  out = {}
  for name, policy in named_policies(cfg, agent).items():
    ev = factory.make_env(cfg.game, cfg.seed + 10_000, cfg.eval_steps)
    records = rollouts.run_episodes(
        rollouts.CompiledPolicy(policy), ev.env, episodes,
        epsilon=cfg.eval_epsilon, seed=cfg.seed, raw_score_fn=ev.raw_score_fn,
        max_total_steps=episodes * (cfg.eval_steps + 2))
    scores = np.array([r.raw_score for r in records])
    out[f"{name}_mean_score"] = float(scores.mean())
    if ev.normalize is not None:
      out[f"{name}_normalized_score"] = float(np.mean(ev.normalize(scores)))
  if cfg.game.lower() == "gridworld":
    out.update(exact_gridworld_scores(cfg, agent))
  return out


def exact_gridworld_scores(cfg, agent) -> Dict[str, float]:
  """The gridworld's Markov policies scored exactly (no sampling noise): the expected
  normalized return (x100 of optimal, horizon `eval_max_steps`, p = 0.15) of the greedy policy
  of Q_l at policy_delta ('lower_exact_normalized_score'; CQL: of its greedy policy) and, for
  CCVL, at each grid delta ('exact/lower@<delta>') and their mean over the grid
  ('lower_grid_exact_normalized_score'), by policy evaluation on the known model."""
  world = gridworld_env.eval_world(horizon=cfg.eval_steps)
  grid = ([float(d) for d in belief.delta_grid(cfg.exploration.num_grid_deltas)]
          if cfg.offline_agent == "ccvl" else [])
  q_lower, _ = gridworld_bounds.q_tables(agent, [cfg.policy_delta] + grid, world.num_states)

  def score(q):  # q [S, A] -> x100 of the optimal expected return
    ret = vi.finite_horizon_return(world.P, world.R, world.gamma, vi.greedy_policy(q),
                                   world.start_state, world.horizon)
    return float(gridworld_env.normalized_return(ret, world))

  out = {"lower_exact_normalized_score": score(q_lower[0])}
  for k, delta in enumerate(grid):
    out[f"exact/lower@{delta:.4g}"] = score(q_lower[k + 1])
  if grid:
    out["lower_grid_exact_normalized_score"] = float(np.mean(
        [out[f"exact/lower@{d:.4g}"] for d in grid]))
  return out


def gridworld_bounds_report(cfg, agent, alpha: float, data, world, counts=None):
  """Q_l and Q_u of `agent` (a CCVL learner on the gridworld) at the grid deltas against Q* of
  `world` and the tabular bounds of the same objective on `data` (experiments/gridworld/bounds.py).

  Args:
    cfg: OnlineConfig (its exploration's num_grid_deltas, upper_alpha).
    agent: the learner (q_network; upper_q_network when it has Q_u).
    alpha: the bonus weight of Q_l (Q_u: cfg.exploration.upper_alpha, default alpha).
    data: tabular.dataset.Transitions the learner trained on (integer states).
    world: the GridWorld the data came from.
    counts: n(s) [S] of the learner's bonus (None: the counts of `data`).

  Returns:
    rows (gridworld_bounds.coverage_rows).
  """
  grid = belief.delta_grid(cfg.exploration.num_grid_deltas)
  refs = gridworld_bounds.references(data, world, grid, alpha, cfg.exploration.upper_alpha,
                                     counts)
  q_lower, q_upper = gridworld_bounds.q_tables(agent, grid, world.num_states)
  return gridworld_bounds.coverage_rows(q_lower, q_upper, refs, grid)


def discounted_returns_to_go(rewards: Sequence[float], gamma: float) -> np.ndarray:
  """G_t = r_t + gamma G_{t+1}, G_T = r_T (the episode's own rewards, no bootstrap) [T]."""
  out = np.zeros(len(rewards), np.float64)
  g = 0.0
  for t in range(len(rewards) - 1, -1, -1):
    g = float(rewards[t]) + gamma * g
    out[t] = g
  return out


def bound_tightness(cfg, agent, episodes: int, deltas: Sequence[float] = TIGHTNESS_DELTAS,
                    max_states: int = 4000) -> Dict[str, float]:
  """Q_l and Q_u (when the agent has it) against the Monte-Carlo returns of `episodes`
  episodes of the primary policy (see the module notes), at each delta of `deltas`.

  Returns flat keys, for each delta d and bound b in (lower, upper):
    'tight/<b>_minus_mc@d'   mean over visited (s_t, a_t) of Q_b(s_t, a_t, d) - G_t
    'tight/<b>_holds@d'      share of visited steps with Q_l <= G_t (lower) / Q_u >= G_t (upper)
  plus 'tight/mc_return' (mean G_t) and 'tight/states' (how many states were scored: every
  visited one, or `max_states` spread evenly over them).
  """
  policy = rollouts.CompiledPolicy(named_policies(cfg, agent)[primary_policy_name(cfg.agent)])
  ev = factory.make_env(cfg.game, cfg.seed + 20_000, cfg.eval_steps)
  env, clip = ev.env, cfg.bounds().reward_clip
  gamma = float(agent.config.gamma)
  observations, actions, returns = [], [], []
  state = policy.get_initial_state(1)
  for _ in range(int(episodes)):
    time_step, rewards = env.reset(), []
    while True:
      batch1 = ts.TimeStep(*(tf.constant(np.asarray(x)[np.newaxis]) for x in (
          time_step.step_type, np.float32(time_step.reward), np.float32(time_step.discount),
          time_step.observation)))
      step = policy.action(batch1, state)
      state = step.state
      if not time_step.is_first():
        r = float(time_step.reward)
        rewards.append(r if clip is None else float(np.clip(r, -clip, clip)))
      if time_step.is_last():
        break
      observations.append(np.asarray(time_step.observation))
      actions.append(int(np.asarray(step.action).reshape(-1)[0]) - int(
          agent.action_spec.minimum))
      time_step = env.step(step.action[0])
    returns.extend(discounted_returns_to_go(rewards, gamma))
  n = len(returns)
  keep = np.unique(np.linspace(0, n - 1, min(n, max_states)).astype(np.int64))  # [S]
  obs = np.stack([observations[i] for i in keep])                             # [S, *obs]
  acts = np.asarray([actions[i] for i in keep])                                # [S]
  g = np.asarray(returns)[keep]                                                # [S]
  out = {"tight/mc_return": float(g.mean()), "tight/states": float(len(keep))}
  networks = {"lower": agent.q_network}
  if getattr(agent, "upper_q_network", None) is not None:
    networks["upper"] = agent.upper_q_network
  d = np.asarray(deltas, np.float32)
  for bound, net in networks.items():
    q = []
    for start in range(0, len(keep), 256):
      chunk = obs[start:start + 256]
      q.append(np.asarray(net({"observation": tf.constant(chunk),
                               "delta": tf.constant(np.tile(d, (len(chunk), 1)))},
                              training=False)))  # [b, K, A]
    q_sa = np.concatenate(q)[np.arange(len(keep)), :, acts]                  # [S, K]
    for k, delta in enumerate(deltas):
      gap = q_sa[:, k] - g
      out[f"tight/{bound}_minus_mc@{delta:g}"] = float(gap.mean())
      holds = gap <= 0 if bound == "lower" else gap >= 0
      out[f"tight/{bound}_holds@{delta:g}"] = float(holds.mean())
  return out
