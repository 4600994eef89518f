"""The confidence diagnostics of one trained CCVL agent, as files and one dict.

More in docs/library.md "Module notes", `ccvl_tf/experiments/offline/confidence_report.py`.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, Optional, Sequence

import ccvl_tf  # noqa: F401

import numpy as np
import tensorflow as tf

from ccvl_tf.evaluation import diagnostics, policy_diagnostics
from ccvl_tf.algorithm import policies
from ccvl_tf.runtime import strict_json


def dataset_observations_and_actions(batches: Iterable[Dict], num_states: int):
  """(observations [S, ...], actions [S]) of the first S <= num_states dataset transitions."""
  obs, acts, n = [], [], 0
  for batch in batches:
    obs.append(np.asarray(batch["observation"]))
    acts.append(np.asarray(batch["action"]).reshape(-1))
    n += obs[-1].shape[0]
    if n >= num_states:
      break
  if not obs:
    raise ValueError("no dataset batches to take diagnostic states from")
  return np.concatenate(obs, 0)[:num_states], np.concatenate(acts)[:num_states]


def random_policy_observations(env, num_states: int, seed: int) -> np.ndarray:
  """Observations met by a uniformly random policy in `env` (a PyEnvironment), [S, ...]."""
  rng = np.random.default_rng(seed)
  spec = env.action_spec()
  lo, hi = int(spec.minimum), int(spec.maximum)
  out = []
  step = env.reset()
  while len(out) < num_states:
    if step.is_last():
      step = env.reset()
    out.append(np.asarray(step.observation))
    step = env.step(np.asarray(rng.integers(lo, hi + 1), dtype=spec.dtype))
  return np.stack(out, 0)


def _phi(agent, observations: np.ndarray, batch: int = 256) -> np.ndarray:
  phi_model = agent.online_network.phi_model
  return np.concatenate([np.asarray(phi_model({"observation": observations[i:i + batch]}))
                         for i in range(0, len(observations), batch)], 0)


def report(agent, held_out: Callable[[], Iterable[Dict]], grid: Sequence[float],
           out_dir: Optional[str], *, env_factory: Optional[Callable[[], object]] = None,
           records: Optional[Sequence[object]] = None, num_states: int = 256,
           seed: int = 0, value_max: Optional[float] = None,
           checkpoint: Optional[str] = None, initial_log_belief=None,
           log: Callable[[str], None] = lambda s: None) -> Dict[str, object]:
  """Measures the delta family, the counts and the belief of a trained CCVLAgent.

  Args:
    agent: a CCVLAgent (q_network, online_network, counts, config.gamma).
    held_out: () -> finite iterable of contract batches from the dataset.
    grid: the adaptive policy's delta grid [K].
    out_dir: where to write the files (None: write nothing).
    env_factory: () -> PyEnvironment of the game, for random-policy (unseen) states.
    records: evaluation EpisodeRecords of the adaptive policy (for the belief), or None.
    num_states: diagnostic states per set.
    seed: seeds the unseen-state generators.
    value_max: the largest possible return, which no lower bound V(s, delta) may exceed; None:
      1 / (1 - gamma), the largest return with rewards clipped to [-1, 1] (the Atari and
      MinAtar datasets are clipped so; pass the game's own bound when it is tighter).
    checkpoint: the checkpoint the agent's weights were restored from or saved to. The
      result, and diagnostics.json, record it and the agent's train step ('step',
      'checkpoint'): a rerun of the diagnostics on an older checkpoint says which it describes.
    initial_log_belief: log b_0 [K] the adaptive policy of `records` started from (its
      `initial_log_belief`), what the belief's movement is measured from; None: uniform.
  """
  grid = np.asarray(grid, np.float32)
  # The diagnostic states: the first num_states held-out transitions (the same ones for the
  # family, the counts and the greedy-action statistics).
  seen, seen_actions = dataset_observations_and_actions(held_out(), num_states)
  scale = diagnostics.td_target_scale(agent.q_network, held_out(), grid, agent.config.gamma)
  if value_max is None:
    value_max = 1.0 / (1.0 - agent.config.gamma)
  family = diagnostics.delta_family(agent.q_network, seen, grid, td_target_scale=scale,
                                    value_max=value_max)
  out: Dict[str, object] = {"step": int(agent.train_step_counter.numpy()),
                            "checkpoint": checkpoint,
                            "family": {k: v for k, v in family.items() if k != "values"}}
  separation = spectrum = mean_x_size = None
  counts = getattr(agent, "counts", None)
  if counts is not None:
    unseen = {"shuffled_pixels": diagnostics.unseen_observations(
        seen, np.random.default_rng(seed), kind="shuffled_pixels")}
    if env_factory is not None:
      unseen["random_policy"] = random_policy_observations(env_factory(), num_states, seed)
    phi_seen = _phi(agent, seen)
    inv_seen = counts.raw_inverse_count(tf.constant(phi_seen)).numpy()
    out["counts"] = {}
    for kind, obs in unseen.items():
      inv_unseen = counts.raw_inverse_count(tf.constant(_phi(agent, obs))).numpy()
      out["counts"][kind] = diagnostics.count_separation(inv_seen, inv_unseen)
    # The headline AUC: random-policy states when there are any (real states the data does
    # not cover), else shuffled pixels.
    separation = out["counts"].get("random_policy", out["counts"]["shuffled_pixels"])
    spectrum = diagnostics.count_spectrum(counts)
    mean_x_size = float(counts.dataset_size * inv_seen.mean())
    spectrum = dict(spectrum, mean_inv_count_x_size=mean_x_size,
                    normalization=counts.normalization, ridge_mode=counts.ridge_mode,
                    running_mean_inverse_count=float(counts.running_mean_inverse_count()))
    out["spectrum"] = {k: v for k, v in spectrum.items() if k != "eigenvalues"}
  movement = trace = None
  if records:
    trace = diagnostics.belief_trace(records, grid)
    if trace:
      movement = diagnostics.belief_movement(trace, grid, initial_log_belief)
      out["belief"] = {"movement": movement, "trace": trace}
  out["summary"] = diagnostics.summarize(family, separation, spectrum, movement, mean_x_size)
  acts = seen_actions - int(agent.action_spec.minimum)
  num_actions = policies.action_count(agent.action_spec)
  out["actions"] = policy_diagnostics.greedy_action_stats(
      agent.q_network, seen, acts, agent.config.policy_delta, num_actions)
  out["summary"].update(out["actions"])
  # The family as policies: greedy actions that change with delta, per grid delta.
  out["family_actions"] = policy_diagnostics.family_action_stats(
      agent.q_network, seen, acts, grid, num_actions)
  out["summary"].update(policy_diagnostics.family_summary(out["family_actions"]))
  if counts is not None:
    for kind, sep in out["counts"].items():
      out["summary"][f"count_auc_{kind}"] = float(sep["auc"])
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
    diagnostics.plot_delta_family(os.path.join(out_dir, "delta_family.png"), family)
    if trace:
      diagnostics.write_belief_csv(os.path.join(out_dir, "belief.csv"), trace)
      diagnostics.plot_belief(os.path.join(out_dir, "belief.png"), trace)
    with open(os.path.join(out_dir, "diagnostics.json"), "w") as f:
      strict_json.dump(out, f, indent=1, default=_jsonable,
                       notes=diagnostics.undefined_notes(len(grid)))
  s = out["summary"]
  log("[diagnostics] " + ", ".join(f"{k}={v:.4g}" for k, v in s.items()))
  return out


def _jsonable(x):
  if isinstance(x, np.ndarray):
    return x.tolist()
  if isinstance(x, (np.floating, np.integer)):
    return x.item()
  return str(x)
