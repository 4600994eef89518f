"""One unit of the comparison (method, dataset kind, game, seed): train, evaluate, write its row.

`run_unit` has two phases, `train_unit` (build the learner from the agent registry and train
or resume it) and `evaluate_unit` (the method's policy in the suite's environment, the result
file); `run_logged` runs a unit with its own log file; `training_groups` says which units share
a trained learner.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np

from ccvl_tf.algorithm import belief
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.offline import confidence_report
from ccvl_tf.evaluation import rollouts
from ccvl_tf.runtime import training
from ccvl_tf.runtime import strict_json
# A process's threads and determinism (shared with offline/), used through this module by the pool.

Unit = tuple  # (dataset, game, seed, method)


@dataclasses.dataclass
class TrainedUnit:
  """What the train phase of a unit hands to its evaluation phase."""
  spec: object                 # agent_registry.AgentSpec of the method
  settings: object             # agent_registry.AgentSettings the learner was built with
  learner: object
  data: compare_suites.Data
  time_step_spec: object
  action_spec: object
  steps: int                   # gradient steps of the training
  train_seconds: float         # over every call that trained (part of) it


def result_path(output_dir: str, method: str, dataset: str, game: str, seed: int) -> str:
  """results/<method>/<dataset>/<game>/seed_<k>.json (the resumable unit's result file)."""
  return os.path.join(output_dir, "results", compare_config.slug(method),
                      compare_config.slug(dataset), game, f"seed_{seed}.json")


def train_dir(output_dir: str, method: str, dataset: str, game: str, seed: int) -> str:
  """runs/<train_key>/<dataset>/<game>/seed_<k>: the training's root (shared by the methods of
  one train_key)."""
  key = agent_registry.get_agent_spec(compare_config.METHODS[method]).train_key
  return os.path.join(output_dir, "runs", key, compare_config.slug(dataset), game,
                      f"seed_{seed}")


def agent_settings(suite: compare_suites.Suite, data: Optional[compare_suites.Data],
                   seed: int) -> agent_registry.AgentSettings:
  """The registry settings of a unit: the suite's network and training overrides, then the
  settings given in the CompareConfig (`data` None: without the data's |D| and counts, for
  `unit_settings`)."""
  cfg = suite.cfg
  over = dict(suite.training_overrides)
  for name in ("learning_rate", "adam_epsilon", "target_update_period", "dr3_coef"):
    if getattr(cfg, name) is not None:
      over[name] = getattr(cfg, name)
  return agent_registry.make_settings(
      network_config=suite.network_config(),
      dataset_size=None if data is None else float(data.size),
      inverse_count_fn=None if data is None else data.inverse_count_fn,
      alpha=cfg.alpha, num_deltas=cfg.num_deltas,
      num_pairs=cfg.num_pairs, num_heads=cfg.num_heads, num_members=cfg.num_members,
      num_grid_deltas=cfg.num_grid_deltas,
      belief_temperature=cfg.belief_temperature, ccvl_options=dict(cfg.ccvl_options),
      reward_clip=suite.reward_clip, seed=seed,
      **over)


def unit_settings(suite: compare_suites.Suite, method: str, dataset: str,
                  seed: int) -> Dict[str, object]:
  """What a unit's result depends on besides its data, resolved (JSON values): the learner's
  config in force (the agent config's defaults under the suite's and the flags given; its
  record, without the compilation switch), the batch size, the training steps and the
  evaluation settings. Recorded in the unit's result file ('settings'); a rerun into the same
  --output_dir compares it (`changed_units`)."""
  cfg = suite.cfg
  spec = agent_registry.get_agent_spec(compare_config.METHODS[method])
  config = spec.resolve(agent_settings(suite, None, seed)).agent_config
  learner = {k: v for k, v in config.record().items() if k != "jit_compile"}
  out = dict(learner=learner, batch_size=suite.batch_size(),
             num_steps=int(suite.steps(dataset)),
             eval_episodes=suite.eval_episodes(),
             eval_max_steps=suite.eval_max_steps(),
             num_grid_deltas=int(cfg.num_grid_deltas),
             belief_temperature=cfg.belief_temperature)
  return json.loads(strict_json.dumps(out))


def changed_units(suite: compare_suites.Suite, units) -> Tuple[List[str], List[str]]:
  """(one 'unit: setting: recorded -> now' line per finished unit of `units` whose result
  file records other settings than `unit_settings` gives now, the result files that record
  none: written before units recorded them)."""
  changed, unrecorded = [], []
  for dataset, game, seed, method in units:
    path = result_path(suite.cfg.output_dir, method, dataset, game, seed)
    try:
      with open(path) as f:
        recorded = json.load(f).get("settings")
    except (OSError, ValueError, AttributeError):
      continue  # an unreadable result is the report's to name
    if recorded is None:
      unrecorded.append(path)
      continue
    now = unit_settings(suite, method, dataset, seed)
    diffs = []
    for key in sorted(set(recorded) | set(now)):
      a, b = recorded.get(key), now.get(key)
      if isinstance(a, dict) and isinstance(b, dict):
        diffs += [f"{key}.{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
                  if a.get(k) != b.get(k)]
      elif a != b:
        diffs.append(f"{key}: {a!r} -> {b!r}")
    if diffs:
      changed.append(f"{method} {dataset} {game} seed {seed} ({path}): " + "; ".join(diffs))
  return changed, unrecorded


def train_unit(suite: compare_suites.Suite, method: str, dataset: str, game: str, seed: int,
               log: Callable[[str], None]) -> TrainedUnit:
  """The train phase: builds the method's learner and trains it (or resumes it, or reuses a
  finished training of the same train_key); keeps the training's seconds in
  <train_dir>/train_seconds.json."""
  cfg = suite.cfg
  spec = agent_registry.get_agent_spec(compare_config.METHODS[method])
  batch_size = suite.batch_size()
  data = suite.data(game, dataset, seed, batch_size)
  time_step_spec, action_spec = suite.specs(game)
  settings = agent_settings(suite, data, seed)
  keras.utils.set_random_seed(seed)  # initial weights: a function of the seed
  learner = spec.build(time_step_spec, action_spec, settings)
  steps = suite.steps(dataset)
  root = train_dir(cfg.output_dir, method, dataset, game, seed)
  loop = training.LoopConfig(
      root_dir=root, num_steps=steps,
      checkpoint_interval=cfg.checkpoint_interval or max(1, steps // 4),
      log_interval=max(1, steps // 4), summary_interval=max(1, steps // 20))
  t0 = time.time()
  result = training.train(
      learner, data.make_dataset, loop, log=log,
      fingerprint=train_fingerprint(spec.train_key, dataset, game, batch_size, data.size,
                                    learner),
      remedy=f"Use another --output_dir for other settings (this one holds {root}).")
  train_seconds = time.time() - t0
  meta_path = os.path.join(root, "train_seconds.json")
  if result["resumed_from"] < steps:  # this call trained (part of) it
    prev = json.load(open(meta_path))["seconds"] if os.path.exists(meta_path) else 0.0
    with open(meta_path, "w") as f:
      strict_json.dump({"seconds": prev + train_seconds, "steps": steps}, f)
  train_seconds = json.load(open(meta_path))["seconds"] if os.path.exists(meta_path) else \
      train_seconds
  write_train_summary(root, suite.env_name(game), spec.train_key, learner, data.size, steps,
                      **suite.dataset_record(game, dataset))
  return TrainedUnit(spec, settings, learner, data, time_step_spec, action_spec, steps,
                     train_seconds)


def train_fingerprint(train_key: str, dataset: str, game: str, batch_size: int,
                      num_transitions: int, learner) -> Dict[str, object]:
  """What a unit's checkpoints were trained on, stored with them (training.check_fingerprint):
  a rerun into the same --output_dir with another learning rate, alpha, seed, ... would
  otherwise resume them silently. The step budget is not in it: a larger --num_steps resumes
  the training and evaluates it there."""
  out = dict(agent=train_key, dataset=dataset, game=game, batch_size=int(batch_size),
             num_transitions=int(num_transitions))
  config = getattr(learner, "config", None)
  if dataclasses.is_dataclass(config):
    out.update(config.record())
  return out


def write_train_summary(root: str, game: str, agent: str, learner, num_transitions: int,
                        steps: int, **more) -> None:
  """<train_dir>/summary.json: what online fine-tuning (experiments/online/runner.py) reads from an
  offline run -- game (the environment name), agent (the train_key), alpha, num_transitions
  (|D|, CCVL's n(s)^-1 scale), step, and the learner's whole config (`config`: what it
  trained with, e.g. dr3_coef, learning_rate) -- merged into the file's existing keys with
  `more` (the replay suites' dataset, Suite.dataset_record, for the offline share of
  fine-tuning batches; the CCVL evaluation's belief_temperature)."""
  path = os.path.join(root, "summary.json")
  summary = json.load(open(path)) if os.path.exists(path) else {}
  config = getattr(learner, "config", None)
  alpha = getattr(config, "alpha", None)
  if dataclasses.is_dataclass(config):
    more = dict(config=config.record(), **more)
  summary.update(game=game, agent=agent, num_transitions=int(num_transitions), step=int(steps),
                 **({} if alpha is None else {"alpha": float(alpha)}), **more)
  with open(path + ".tmp", "w") as f:
    strict_json.dump(summary, f, indent=2)
  os.replace(path + ".tmp", path)


def evaluate_unit(suite: compare_suites.Suite, trained: TrainedUnit, method: str,
                  dataset: str, game: str, seed: int,
                  tf_settings: Optional[Dict[str, object]] = None) -> dict:
  """The evaluation phase: the method's policy in the suite's environment (epsilon
  EVAL_EPSILON), CCVL's confidence diagnostics; writes the result file atomically and returns
  its row."""
  cfg = suite.cfg
  t1 = time.time()
  exports, extra = trained.spec.policies(trained.learner, trained.time_step_spec,
                                         trained.action_spec, trained.data.held_out(),
                                         trained.settings)
  policy = rollouts.CompiledPolicy(exports["policy"])
  episodes = suite.eval_episodes()
  max_steps = suite.eval_max_steps()
  ev = suite.eval_env(game, 10_000 + seed, max_steps)
  records = rollouts.run_episodes(policy, ev.env, episodes, run=seed,
                                    epsilon=compare_config.EVAL_EPSILON, seed=seed,
                                    raw_score_fn=ev.raw_score_fn)
  raw = np.array([r.raw_score for r in records], np.float64)
  score = float(raw.mean())
  if method == "CCVL":
    extra = dict(extra, diagnostics=_diagnostics(suite, trained.learner, trained.data, game,
                                                 seed, records))
    # The adaptive policy's temperature, for a fine-tune of this run (experiments/online/runner.py).
    write_train_summary(train_dir(cfg.output_dir, method, dataset, game, seed),
                        suite.env_name(game), trained.spec.train_key, trained.learner,
                        trained.data.size, trained.steps,
                        belief_temperature=float(extra["belief_temperature"]))
  row = dict(method=method, dataset=dataset, game=game, seed=seed, score=score,
             normalized_score=suite.normalize(game, score), train_steps=trained.steps,
             train_seconds=round(trained.train_seconds, 2),
             eval_seconds=round(time.time() - t1, 2),
             episode_scores=raw.tolist(), settings=unit_settings(suite, method, dataset, seed),
             mean_delta=[float(np.mean(r.deltas)) if r.deltas else None for r in records],
             # The adaptive belief's per-episode summed squared Bellman errors (its record).
             **rollouts.sq_error_fields(records),
             **dict(tf_settings or {}),
             **{k: v for k, v in extra.items()})
  path = result_path(cfg.output_dir, method, dataset, game, seed)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    strict_json.dump(row, f, indent=1)
  os.replace(path + ".tmp", path)  # atomic: a result file is always complete
  return row


def run_unit(suite: compare_suites.Suite, method: str, dataset: str, game: str, seed: int,
             log: Callable[[str], None],
             tf_settings: Optional[Dict[str, object]] = None) -> dict:
  """Trains (or resumes / reuses) and evaluates one method/dataset/game/seed; returns the row."""
  trained = train_unit(suite, method, dataset, game, seed, log)
  return evaluate_unit(suite, trained, method, dataset, game, seed, tf_settings)


def _diagnostics(suite, learner, data, game, seed, records) -> dict:
  """The confidence diagnostics of a CCVL unit (experiments/offline/confidence_report.py), flat."""
  grid = belief.delta_grid(suite.cfg.num_grid_deltas)

  def env_factory():
    return suite.eval_env(game, 20_000 + seed, suite.default_eval_max_steps).env
  out = confidence_report.report(learner, data.held_out, grid, None,
                                 env_factory=env_factory, records=records, seed=seed)
  return out["summary"]


def unit_log_path(output_dir: str, unit: Unit) -> str:
  """logs/<method>_<dataset>_<game>_seed<k>.log."""
  dataset, game, seed, method = unit
  return os.path.join(output_dir, "logs", f"{compare_config.slug(method)}_"
                      f"{compare_config.slug(dataset)}_{game}_seed{seed}.log")


def run_logged(suite: compare_suites.Suite, unit: Unit,
               tf_settings: Optional[Dict[str, object]] = None) -> dict:
  """run_unit with its training log in logs/<method>_<dataset>_<game>_seed<k>.log; the
  process's TensorFlow settings (threads, determinism) are recorded in the row."""
  dataset, game, seed, method = unit
  with open(unit_log_path(suite.cfg.output_dir, unit), "a") as lf:
    def unit_log(s, lf=lf):
      lf.write(s + "\n")
      lf.flush()
    return run_unit(suite, method, dataset, game, seed, unit_log,
                    tf_settings=tf_settings)


def training_groups(units: Sequence[Unit]) -> List[List[Unit]]:
  """Units grouped by the learner they train (dataset, game, seed, AgentSpec.train_key), in
  order: Fixed-CCVL and CCVL share one trained learner (one checkpoint directory), so they
  must never train at the same time in two processes."""
  groups: Dict[tuple, List[Unit]] = {}
  for u in units:
    key = (u[0], u[1], u[2], agent_registry.get_agent_spec(compare_config.METHODS[u[3]]).train_key)
    groups.setdefault(key, []).append(u)
  return list(groups.values())


