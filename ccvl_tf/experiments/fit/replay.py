"""`ccvl_tf.fit` on DQN Replay data (or the demo's collected dataset): the Atari offline run
of binaries/train_offline.py, its settings OfflineConfig's (experiments/offline/config.py)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from ccvl_tf.experiments.compare import offline_table
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.offline import runner as offline
from ccvl_tf.runtime import run_lock



def run_fields():
  """OfflineConfig's run settings (its fields but the learner's values)."""
  return [f for f in dataclasses.fields(offline_config.OfflineConfig) if f.name != "agent_values"]


_RUN_FIELDS = {f.name for f in run_fields()}


def config(dataset_dir: Optional[str], method: str, *, root_dir: str, env: Optional[str],
           **settings) -> offline_config.OfflineConfig:
  """The OfflineConfig of fit's arguments: OfflineConfig's fields by name, the learner's
  settings (every other keyword) as its agent_values; validated and resolved by the caller."""
  run = {k: v for k, v in settings.items() if k in _RUN_FIELDS}
  agent_values = {k: v for k, v in settings.items() if k not in _RUN_FIELDS and v is not None}
  if dataset_dir is not None:
    run["dataset_dir"] = dataset_dir
  if env is not None:
    run["game"] = env
  return offline_config.OfflineConfig(root_dir=root_dir, agent=method,
                                      agent_values=agent_values, **run)


def fit_replay(dataset_dir: Optional[str], method: str, *, root_dir: str, env: Optional[str],
               log: Callable[[str], None] = print, **settings):
  """The Atari run of fit's arguments (`config`, resolved: offline_config.resolve); returns
  a ccvl_tf.FitResult."""
  return run_plan(offline_config.resolve(config(dataset_dir, method, root_dir=root_dir,
                                                env=env, **settings)), log)


def run_plan(plan: offline_config.RunPlan, log: Callable[[str], None] = print):
  """The Atari run of `plan` (offline.runner.run, then the reference agents and the results
  table) under root_dir's lock; returns a ccvl_tf.FitResult."""
  from ccvl_tf.experiments.fit import FitResult  # pylint: disable=g-import-not-at-top
  cfg = plan.config
  with run_lock.hold(cfg.root_dir, "--root_dir"):
    trained = offline.run_holding_lock(plan, log=log)
    summary = offline_table.run(cfg, trained, log=log)
  paths = dict(root_dir=cfg.root_dir, summary=f"{cfg.root_dir}/summary.json",
               checkpoints=f"{cfg.root_dir}/checkpoints", summaries=f"{cfg.root_dir}/summaries",
               results_md=f"{cfg.root_dir}/results.md", **summary["exported_policies"])
  return FitResult(trained.setup.agent, trained.exports, paths,
                   list(summary.get("results_table") or []), summary)
