"""The offline starting point of online fine-tuning (runner.py): the gridworld's
offline run (both CCVL bounds, or CQL, on the paper's dataset, in train_offline's layout), the
offline run's summary.json checked against the flags and read for the learner's settings, and
the restore of an offline checkpoint into the online learner.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Dict, Optional, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf

from ccvl_tf.tabular import gridworld
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.runtime import training
from ccvl_tf.runtime import strict_json

GRIDWORLD = online_config.GRIDWORLD
OnlineConfig = online_config.OnlineConfig
build_agent = online_config.build_agent
specs = online_config.specs


def offline_gridworld_batches(seed: int, batch_size: int, data_seed: int = 0):
  """An infinite iterator of uniformly sampled batches of the paper's gridworld dataset."""
  env = gridworld.GridWorld()
  data = tds.make_gridworld_dataset(seed=data_seed)
  rng = np.random.default_rng(seed)
  while True:
    yield tds.one_hot_batch(env, data, rng.integers(0, len(data), batch_size))


def train_offline_gridworld(root_dir: str, num_steps: int = 1500, seed: int = 0,
                            alpha: float = 0.2, log=print, agent: str = "ccvl") -> Dict:
  """Offline CCVL (lower AND upper bound) on the paper's gridworld dataset (2.5k transitions
  of the p=0.3 world), in train_offline's layout (root_dir/checkpoints, summary.json), as the
  starting point of gridworld fine-tuning (train_offline.py itself is Atari-only)."""
  keras.utils.set_random_seed(seed)
  tss, act = specs(GRIDWORLD)
  agent_name = agent
  agent = build_agent(GRIDWORLD, tss, act, OnlineConfig().bounds(), alpha=alpha, seed=seed,
                      agent=agent_name)
  result = training.train(
      agent, lambda start: offline_gridworld_batches(seed + start, 64),
      training.LoopConfig(root_dir=root_dir, num_steps=num_steps,
                          checkpoint_interval=num_steps, log_interval=max(1, num_steps // 3)),
      log=log)
  summary = dict(game=GRIDWORLD, agent="cql" if agent_name == "cql" else "ccvl_bounds",
                 step=result["step"], alpha=alpha,
                 dataset="tabular.dataset.make_gridworld_dataset(seed=0)", seed=seed)
  if agent_name != "cql":
    summary.update(counts="exact", objective=online_config.GRIDWORLD_LOWER_OBJECTIVE,
                   upper_objective=OnlineConfig().exploration.upper_objective)
  with open(os.path.join(root_dir, "summary.json"), "w") as f:
    strict_json.dump(summary, f, indent=2)
  return summary


def restore_offline(agent, offline_dir: str, log=print) -> int:
  """Loads the offline checkpoint into `agent` (`agent.restore_offline`); returns its train
  step. CCVLBoundsAgent: a bounds checkpoint restores both bounds; a plain CCVLAgent checkpoint
  (what train_offline.py writes) restores Q_l and starts Q_u as a copy of Q_l.
  """
  ckpt_dir = os.path.join(offline_dir, "checkpoints")
  path = tf.train.latest_checkpoint(ckpt_dir)
  if path is None:
    raise ValueError(f"--offline_dir {offline_dir}: no checkpoint in {ckpt_dir} (run "
                     f"train_offline.py with --root_dir={offline_dir} first)")
  try:
    restored = agent.restore_offline(path)
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    raise ValueError(f"the offline checkpoint {path} does not fit this agent/game/network ({e});"
                     f" is --game the game it was trained on?") from e
  step = int(agent.train_step_counter.numpy())
  log(f"Restored the offline checkpoint {path} (train step {step}; {restored}).")
  return step


def resolve_config(cfg: OnlineConfig, log: Callable[[str], None] = print
                   ) -> Tuple[OnlineConfig, Dict]:
  """(cfg, the offline run's summary.json or {}): checks the summary against the flags
  (agent, game; gridworld bounds in the linear-count, regularized form are refused) and takes the
  exploration belief's temperature from it when --belief_temperature is unset (resolved before
  online_config.json is written, so actors use the same one)."""
  summary = {}
  summary_path = os.path.join(cfg.offline_dir, "summary.json")
  if os.path.exists(summary_path):
    with open(summary_path) as f:
      summary = json.load(f)
    game = str(summary.get("game", cfg.game))
    offline_agent = str(summary.get("agent", "ccvl")).lower()
    offline_agent = {"ccvl_bounds": "ccvl", "fixed_ccvl": "ccvl"}.get(offline_agent,
                                                                      offline_agent)
    if offline_agent != cfg.offline_agent:
      raise ValueError(f"--offline_dir {cfg.offline_dir} holds a {offline_agent} run, not "
                       f"--agent={cfg.agent} (which starts from a {cfg.offline_agent} run)")
    if game.lower() != cfg.game.lower():
      raise ValueError(f"--offline_dir {cfg.offline_dir} was trained on {game!r}, not "
                       f"--game={cfg.game!r}")
    if (game.lower() == GRIDWORLD and cfg.offline_agent == "ccvl"
        and summary.get("counts") != "exact"):
      raise ValueError(
          f"--offline_dir {cfg.offline_dir} holds gridworld bounds of an earlier version "
          "(linear counts, regularized objectives), which this version does not fine-tune; "
          "use a fresh --offline_dir with --prepare_gridworld_offline")
  if (cfg.exploration_values.get("belief_temperature") is None
      and summary.get("belief_temperature")):
    # The exploration belief updates at the offline run's temperature (set from its data).
    cfg = dataclasses.replace(cfg, exploration_values=dict(
        cfg.exploration_values, belief_temperature=float(summary["belief_temperature"])))
    log(f"Exploration belief temperature {cfg.exploration.belief_temperature:.4g} "
        f"(the offline run's).")
  return cfg, summary


def alpha_and_dataset_size(summary: Dict, cfg: OnlineConfig) -> Tuple[Optional[float], float]:
  """(alpha, |D_off|) of the online learner: --alpha when given, else the offline run's (top
  level: gridworld, compare; train_offline's resolved 'settings', its preset under its flags;
  or, for older runs, its 'config'); |D_off| = 'num_transitions' (train_offline, compare; 2500,
  the gridworld dataset, when absent) scales CCVL's linear n(s)^-1."""
  alpha = summary.get("alpha", summary.get("settings", {}).get(
      "alpha", summary.get("config", {}).get("alpha")))
  if cfg.alpha is not None:  # --alpha: the online learner's own
    alpha = cfg.alpha
  return alpha, float(summary.get("num_transitions", 2500.0))
