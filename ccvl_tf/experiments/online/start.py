"""The offline starting point of online fine-tuning (runner.py): the gridworld's
offline run (both CCVL bounds, or CQL, on the paper's dataset, in train_offline's layout), the
offline run's summary.json checked against the flags and read for the learner's settings, and
the restore of an offline checkpoint into the online learner.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Callable, Dict, Optional, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import readings
from ccvl_tf.experiments import agent_options
from ccvl_tf.tabular import gridworld
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.envs import factory
from ccvl_tf.experiments.online import offline_record as offline_record_lib
from ccvl_tf.experiments.online import own_data as own_data_lib
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import training
from ccvl_tf.runtime import strict_json

GRIDWORLD = online_config.GRIDWORLD
_is_number = offline_record_lib.is_number
OnlineConfig = online_config.OnlineConfig
build_agent = online_config.build_agent
specs = online_config.specs

# The offline learner's settings the online learner takes from its summary.json
# (OnlineConfig.offline_settings): those its network's variables (the delta head; the reading's
# support head) and its loss (the reading and its options, the TD loss, the linear n(s)^-1
# estimate, N and M, DR3, gamma) and its updates (Adam epsilon, target period) depend on, so
# that the checkpoint restores and trains on as the learner it was trained as; a setting the
# summary does not record keeps the game's fine-tuning value (agent_settings). Not taken: alpha
# and the learning rate (--alpha, --learning_rate; unset: the offline run's,
# `alpha_and_dataset_size` and the restored optimizer) and what only acts (policy_delta:
# --policy_delta; the belief's resampling).
OFFLINE_SETTINGS = readings.FLAGS + (
    "delta_head", "delta_members", "td_loss", "huber_kappa", "count_normalization", "count_ridge",
    "count_ridge_mode", "count_decay", "count_refresh_period", "num_deltas", "num_pairs",
    "dr3_coef", "gamma", "adam_epsilon", "target_update_period")
# train_offline.py's record keeps these at its top level ('config'), the CCVL options given under
# 'ccvl_options' and the training settings in force (the preset's under the flags) in 'settings'.
_TOP_LEVEL = ("num_deltas", "num_pairs")


def offline_gridworld_batches(seed: int, batch_size: int, data_seed: int = 0):
  """An infinite iterator of uniformly sampled batches of the paper's gridworld dataset."""
  env = gridworld.GridWorld()
  data = tds.make_gridworld_dataset(seed=data_seed)
  rng = np.random.default_rng(seed)
  while True:
    yield tds.one_hot_batch(env, data, rng.integers(0, len(data), batch_size))


def train_offline_gridworld(root_dir: str, num_steps: int = 1500, seed: int = 0,
                            alpha: float = 0.2, log=print, agent: str = "ccvl",
                            ccvl_options: Optional[Dict[str, object]] = None) -> Dict:
  """Offline CCVL (lower AND upper bound) on the paper's gridworld dataset (2.5k transitions
  of the p=0.3 world), in train_offline's layout (root_dir/checkpoints, summary.json), as the
  starting point of gridworld fine-tuning (train_offline.py itself is Atari-only).
  `ccvl_options`: CCVL settings of OFFLINE_SETTINGS on top of the gridworld's (e.g. the delta
  head), recorded as train_offline.py records the options given ('config' 'ccvl_options');
  None: the gridworld's, and the summary records none."""
  keras.utils.set_random_seed(seed)
  tss, act = specs(GRIDWORLD)
  agent_name = agent
  agent = build_agent(GRIDWORLD, tss, act, OnlineConfig().bounds(), alpha=alpha, seed=seed,
                      agent=agent_name, offline_settings=ccvl_options)
  result = training.train(
      agent, lambda start: offline_gridworld_batches(seed + start, 64),
      training.LoopConfig(root_dir=root_dir, num_steps=num_steps,
                          checkpoint_interval=num_steps, log_interval=max(1, num_steps // 3)),
      log=log)
  summary = dict(game=GRIDWORLD, agent="cql" if agent_name == "cql" else "ccvl_bounds",
                 step=result["step"], alpha=alpha,
                 dataset="tabular.dataset.make_gridworld_dataset(seed=0)", seed=seed)
  if agent_name != "cql":
    summary.update(counts="exact", objective=agent.config.reading.OBJECTIVE,
                   upper_objective=OnlineConfig().exploration.upper_objective)
  if ccvl_options is not None:
    summary["config"] = {"ccvl_options": dict(ccvl_options)}
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
    head = getattr(getattr(agent, "config", None), "delta_head", None)
    raise ValueError(
        f"the offline checkpoint {path} does not fit this agent/game/network ({e}); is --game "
        f"the game it was trained on?" + ("" if head is None else
        f" (this learner's delta head is {head!r}: the offline run's summary.json's "
        f"delta_head, else the default)")) from e
  step = int(agent.train_step_counter.numpy())
  log(f"Restored the offline checkpoint {path} (train step {step}; {restored}).")
  return step


def resolve_config(cfg: OnlineConfig, log: Callable[[str], None] = print
                   ) -> Tuple[OnlineConfig, Dict]:
  """(cfg, the offline run's summary.json or {}): checks the summary against the flags
  (agent, game; gridworld bounds in the linear-count, regularized form are refused; a run of
  ccvl_tf.fit on own data takes a Gymnasium environment of its data's spec and gives its
  network and reward handling, own_data_lib.resolve, into cfg.own_data), takes the offline
  learner's network and loss settings from it (`offline_settings`, into cfg.offline_settings)
  and the exploration belief's temperature when --belief_temperature is unset, and records the
  evaluation episodes' cap in force (--eval_max_steps unset: OnlineConfig.eval_steps);
  resolved before online_config.json is written, so the actors and the server's tables take
  the same ones."""
  summary = offline_record_lib.offline_record(cfg.offline_dir)
  summary_path = os.path.join(cfg.offline_dir, "summary.json")
  own_data = bool(summary) and offline_record_lib.is_own_data(summary)
  if own_data:
    offline_agent = own_data_lib.offline_agent(summary, cfg.offline_dir, summary_path)
    if offline_agent != cfg.offline_agent:
      raise ValueError(f"--offline_dir {cfg.offline_dir} holds a {offline_agent} run "
                       f"({summary_path} 'method' {summary['method']!r}), not "
                       f"--agent={cfg.agent} (which starts from a {cfg.offline_agent} run)")
    cfg = own_data_lib.resolve(cfg, summary, summary_path, log)
  elif factory.is_gymnasium(cfg.game):
    raise ValueError(
        f"--game={cfg.game}: online fine-tuning in a Gymnasium environment starts from a run "
        f"of ccvl_tf.fit on own data (train_offline.py --dataset), whose summary.json gives "
        f"its network; --offline_dir {cfg.offline_dir} holds "
        + (f"a {summary.get('game')!r} run ({summary_path} 'game')" if summary
           else "no summary.json"))
  elif summary:
    game = str(summary["game"])
    offline_agent = str(summary.get("agent", "ccvl")).lower()
    offline_agent = {"ccvl_bounds": "ccvl", "fixed_ccvl": "ccvl"}.get(offline_agent,
                                                                      offline_agent)
    if offline_agent != cfg.offline_agent:
      raise ValueError(f"--offline_dir {cfg.offline_dir} holds a {offline_agent} run "
                       f"({summary_path} 'agent'), not --agent={cfg.agent} (which starts from "
                       f"a {cfg.offline_agent} run)")
    if game.lower() != cfg.game.lower():
      raise ValueError(f"--offline_dir {cfg.offline_dir} was trained on {game!r} "
                       f"({summary_path} 'game'), not --game={cfg.game!r}")
    if (game.lower() == GRIDWORLD and cfg.offline_agent == "ccvl"
        and summary.get("counts") != "exact"):
      raise ValueError(
          f"--offline_dir {cfg.offline_dir} holds gridworld bounds of an earlier version "
          "(linear counts, regularized objectives), which this version does not fine-tune; "
          "use a fresh --offline_dir with --prepare_gridworld_offline")
  settings = offline_settings(summary, summary_path, cfg.agent,
                              own_data_lib.LEARNER_SETTINGS if own_data else ())
  cfg = dataclasses.replace(cfg, offline_settings=settings)
  if settings:
    log("The offline learner's settings (its summary.json), taken by the online learner: "
        + ", ".join(f"{k}={v}" for k, v in settings.items()) + ".")
  if (cfg.exploration_values.get("belief_temperature") is None
      and summary.get("belief_temperature") is not None):
    # The exploration belief updates at the offline run's temperature (set from its data).
    cfg = dataclasses.replace(cfg, exploration_values=dict(
        cfg.exploration_values, belief_temperature=float(summary["belief_temperature"])))
    log(f"Exploration belief temperature {cfg.exploration.belief_temperature:.4g} "
        f"(the offline run's).")
  if cfg.eval_max_steps is None:
    cfg = dataclasses.replace(cfg, eval_max_steps=cfg.eval_steps)
    if factory.is_gymnasium(cfg.game):
      log(f"Evaluation episodes end at {cfg.eval_max_steps} agent steps ({cfg.game}'s own "
          f"TimeLimit; --eval_max_steps sets another).")
  return cfg, summary


def offline_settings(summary: Dict, path: str, agent: str = "ccvl",
                     more: Tuple[str, ...] = ()) -> Dict[str, object]:
  """The offline learner's OFFLINE_SETTINGS that the online learner of --agent takes, from
  its summary.json `summary` (read from `path`), as the offline run trained with them:
  train_offline.py's keeps the CCVL options given ('config' 'ccvl_options'), N and M ('config'
  'num_deltas', 'num_pairs') and the training settings in force ('settings': the preset's under
  the flags given), which win as in the offline run (offline/config.py `resolve`); compare.py's
  keeps the learner's config flat ('config': CCVLConfig.record, the
  reading as 'objective' and its options). The reading comes back whole: 'reading' and the
  options it takes. {} when the summary records none (older runs, `train_offline_gridworld`):
  the game's and the agent config's defaults. `more`: settings taken beside OFFLINE_SETTINGS
  (a run on own data's learning rate, own_data_lib.LEARNER_SETTINGS). A recorded value the
  learner cannot take is a ValueError naming `path` and the key."""
  config = summary.get("config", {})
  if not isinstance(config, dict):
    raise ValueError(f"{path}: 'config' must be a JSON object (the offline run's settings), "
                     f"got {config!r}")
  if "ccvl_options" in config:  # train_offline.py
    given, preset = config["ccvl_options"], summary.get("settings", {})
    for key, value in (("'config' 'ccvl_options'", given), ("'settings'", preset)):
      if not isinstance(value, dict):
        raise ValueError(f"{path}: {key} must be a JSON object, got {value!r}")
    top = {k: config[k] for k in _TOP_LEVEL if config.get(k) is not None}
    where = {**{k: f"'config' 'ccvl_options' {k!r}" for k in given},
             **{k: f"'config' {k!r}" for k in top},
             **{k: f"'settings' {k!r}" for k in preset}}
    values = {**given, **top, **preset}
  else:  # compare.py, or none
    where, values = {k: f"'config' {k!r}" for k in config}, config
  takes = set(online_config.agent_spec(agent).takes)
  found = {k: values[k] for k in OFFLINE_SETTINGS + tuple(more)
           if k in takes and values.get(k) is not None}
  for key, value in found.items():
    cls = readings.declaring_class(key) if key in readings.FLAGS else ccvl_agent.CCVLConfig
    problem = config_flags.type_problem(cls, key, value)
    if problem:
      raise ValueError(f"{path} records {where[key]} = {value!r}, which the online learner "
                       f"cannot take: it {problem}")
  out = {}
  for key, value in found.items():
    if key in readings.FLAGS:
      continue
    try:
      agent_options.validate({key: value})
    except (ValueError, TypeError) as e:
      raise ValueError(f"{path} records {where[key]} = {value!r}, which the online learner "
                       f"cannot take: {e}") from e
    out[key] = value
  choice = {k: v for k, v in found.items() if k in readings.FLAGS}
  if choice:
    try:
      reading = readings.from_options(choice, prefix="")
    except (ValueError, TypeError) as e:
      keys = ", ".join(where[k] for k in choice)
      raise ValueError(f"{path} records a reading the online learner cannot take ({keys}): "
                       f"{e}") from e
    out = {"reading": reading.NAME, **dataclasses.asdict(reading), **out}
  return out


def changed_settings_note(config_path: str, settings: Dict[str, object],
                          step: int) -> Optional[str]:
  """The note of a resumed run whose earlier start (its online_config.json at `config_path`;
  one written before the offline settings were kept has none: the defaults) took other
  offline settings than `settings`, which it trains with from train step `step` on; None
  when they agree or there is no readable earlier record."""
  try:
    with open(config_path) as f:
      earlier = json.load(f).get("offline_settings", {})
  except (OSError, ValueError, AttributeError):
    return None
  now = json.loads(strict_json.dumps(settings))
  if earlier == now:
    return None
  return (f"Note: this run's earlier start trained with the offline settings "
          f"{earlier or '{} (the defaults)'} ({config_path}); from train step {step} on it "
          f"trains with {now or '{} (the defaults)'}, the offline run's summary.json's.")


def alpha_and_dataset_size(summary: Dict, cfg: OnlineConfig) -> Tuple[Optional[float], float]:
  """(alpha, |D_off|) of the online learner: --alpha when given, else the offline run's (top
  level: gridworld, compare; train_offline's resolved 'settings', its preset under its flags;
  or, for older runs, its 'config'); |D_off| = 'num_transitions' (train_offline, compare; 2500,
  the gridworld dataset, when absent) scales CCVL's linear n(s)^-1."""
  path = os.path.join(cfg.offline_dir, "summary.json")
  where, alpha = "'alpha'", summary.get("alpha")
  for key in ("settings", "config"):
    if alpha is None and isinstance(summary.get(key), dict):
      where, alpha = f"{key!r} 'alpha'", summary[key].get("alpha")
  if cfg.alpha is not None:  # --alpha: the online learner's own
    alpha = cfg.alpha
  elif alpha is not None and not (_is_number(alpha) and math.isfinite(alpha) and alpha >= 0):
    raise ValueError(f"{path} records {where} = {alpha!r}, which is not a finite number >= 0 "
                     f"(alpha of the offline run); give --alpha")
  size = summary.get("num_transitions")
  if size is None:
    if summary and cfg.game.lower() != GRIDWORLD:
      raise ValueError(f"{path} has no 'num_transitions' (|D| of the offline data, which "
                       f"scales CCVL's n(s)^-1): rerun the offline run to write it again")
    size = 2500.0  # the gridworld dataset (tabular.dataset.make_gridworld_dataset)
  if not (_is_number(size) and math.isfinite(size) and size > 0):
    raise ValueError(f"{path} records 'num_transitions' = {size!r}, which is not a number > 0 "
                     f"(|D| of the offline data)")
  return alpha, float(size)
