"""The paper's method comparison (Table 2) in one run: every method x dataset kind x game x seed.

`run(CompareConfig(...))` is what `binaries/compare.py` calls. For each (dataset kind, game,
seed, method) it
  1. builds the method's learner from the agent registry (`ccvl_tf.experiments.agent_registry`)
     (REM, CQL, AEVL, Fixed-CCVL, CCVL, DQN), on the suite's torso;
  2. trains it with `ccvl_tf.training.train` (checkpoints: an interrupted training resumes
     exactly; CCVL and Fixed-CCVL share one trained learner, `AgentSpec.train_key`);
  3. evaluates the method's policy (`AgentSpec.policies`; CCVL / AEVL adapt their belief over
     all evaluation episodes of the run, whose average is the score, as in the paper) with
     `ccvl_tf.evaluation.run_episodes` in the suite's environment (`ccvl_tf.envs.factory`),
     epsilon 0.001;
  4. writes `results/<method>/<dataset>/<game>/seed_<k>.json`. A result file that exists is
     skipped on a rerun (the resumable unit is method/dataset/game/seed).
Then it writes, from all result files:
  scores.csv    method,dataset,game,seed,score (raw, = reporting.RESULTS_COLUMNS),
                normalized_score, train_steps, train_seconds, eval_seconds
  table.md      Table 2: normalized IQM with 95% stratified bootstrap CIs (rliable, via
                ccvl_tf.evaluation.aggregate_scores) per method and dataset kind, and the
                per-game tables (mean +- std of raw scores over seeds, Tables 3-5)
  per_game_<dataset>.md  the per-game table of each dataset kind on its own
  iqm.png       IQM and CI per method, one panel per dataset kind
  confidence.md the CCVL runs' confidence diagnostics per dataset kind, and adaptive vs fixed
                delta; its rows, one per CCVL run with every numeric diagnostic:
                confidence_rows.csv

Suites:
  * gridworld: the paper's lava gridworld (ccvl_tf.envs.gridworld), one-hot states, MLP torso,
    exact tabular n(s)^-1 for CCVL; a fast CPU check. Dataset kinds (analogues of the paper's;
    the behaviour policy of ccvl_tf.tabular.dataset, optimal action w.p. 0.5, otherwise
    uniform, in the p = 0.3 data gridworld):
      "1%"          250 transitions of that policy (a small sample of good data),
      "5%"          1,250 transitions of that policy,
      "Initial 10%" 2,500 transitions of a uniformly random policy (the start of a run).
    Each seed draws its own dataset (seed k: dataset seed k). Score: discounted return at
    evaluation slip 0.15; normalized = 100 x score / optimal expected return.
  * minatar: the MinAtar datasets of ccvl_tf.data.minatar_datasets (binaries/
    make_minatar_datasets.py), subsets 1%, 5%, initial10% of DQN run `data_run`; MinAtar torso;
    normalized = 100 (score - random) / (DQN - random) with that run's reference scores
    (ccvl_tf.scores.normalized_score).
  * atari: DQN Replay directories <data_dir>/<Game>/<run>/replay_logs, Nature torso, subsets
    1%, 5%, initial10%; the paper's protocol by default (6.25M steps on 1%, 12.5M on 5% and
    initial 10%, 100 evaluation episodes of at most 27,000 steps, 5 seeds): GPU scale.

Where each part lives (this module keeps `run` and re-exports the names binaries and tests use):
  config.py  methods, suites, dataset kinds, CompareConfig, flag parsing;
  suites.py  the Suite classes (environment, network, data, normalization per suite);
  units.py   one unit: its train phase, its evaluation phase, its result file;
  pool.py    the worker processes (training groups side by side, UnitFailed);
  report.py  scores.csv, table.md, per-game tables, iqm.png, confidence.md, confidence_rows.csv.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import pool as compare_pool
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.compare import units as compare_units

# The names binaries/compare.py, the tests and the docs use, from the modules that own them.
METHODS = compare_config.METHODS
SUITES = compare_config.SUITES
DATASET_KINDS = compare_config.DATASET_KINDS
SUBSET_OF_KIND = compare_config.SUBSET_OF_KIND
SCORE_COLUMNS = compare_config.SCORE_COLUMNS
EVAL_EPSILON = compare_config.EVAL_EPSILON
CompareConfig = compare_config.CompareConfig
parse_methods = compare_config.parse_methods
parse_datasets = compare_config.parse_datasets
slug = compare_config.slug
Data = compare_suites.Data
Suite = compare_suites.Suite
GridworldSuite = compare_suites.GridworldSuite
MinAtarSuite = compare_suites.MinAtarSuite
AtariSuite = compare_suites.AtariSuite
SUITE_CLASSES = compare_suites.SUITE_CLASSES
Unit = compare_units.Unit
result_path = compare_units.result_path
train_dir = compare_units.train_dir
run_unit = compare_units.run_unit
training_groups = compare_units.training_groups
configure_tensorflow = compare_units.configure_tensorflow
UnitFailed = compare_pool.UnitFailed
read_results = compare_report.read_results
write_scores_csv = compare_report.write_scores_csv
aggregate = compare_report.aggregate
per_game_table = compare_report.per_game_table
render_table = compare_report.render_table
plot_iqm = compare_report.plot_iqm
write_outputs = compare_report.write_outputs
confidence_table = compare_report.confidence_table


def run(cfg: compare_config.CompareConfig, log: Callable[[str], None] = print) -> dict:
  """Runs every missing unit, then writes the outputs; returns dict(done, skipped, paths, ...)."""
  cfg.validate()
  suite = compare_suites.SUITE_CLASSES[cfg.suite](cfg)
  games = list(cfg.games) if cfg.games else suite.games()
  suite.check(games, cfg.datasets)
  os.makedirs(cfg.output_dir, exist_ok=True)
  seeds = range(cfg.first_seed, cfg.first_seed + cfg.seeds)
  units = [(d, g, s, m) for d in cfg.datasets for g in games for s in seeds
           for m in cfg.methods]
  todo = [u for u in units if not os.path.exists(
      compare_units.result_path(cfg.output_dir, u[3], u[0], u[1], u[2]))]
  workers = min(cfg.workers, max(1, len(compare_units.training_groups(todo))))
  log(f"compare: suite {cfg.suite}, {len(cfg.methods)} methods x {len(cfg.datasets)} dataset "
      f"kinds x {len(games)} games x {cfg.seeds} seeds = {len(units)} runs; "
      f"{len(units) - len(todo)} already done (skipped), {len(todo)} to run"
      + (f" in {workers} worker processes." if workers > 1 else "."))
  os.makedirs(os.path.join(cfg.output_dir, "logs"), exist_ok=True)
  t0 = time.time()
  finished = [0]

  def report(unit, row, seconds):
    dataset, game, seed, method = unit
    finished[0] += 1
    i = finished[0]
    elapsed = time.time() - t0
    eta = elapsed / i * (len(todo) - i)
    log(f"[{i}/{len(todo)}] {method} {dataset} {game} seed {seed}: score "
        f"{row['score']:.4g} (normalized {row['normalized_score']:.1f}) in "
        f"{seconds:.1f}s; elapsed {elapsed:.0f}s, ETA {eta:.0f}s")

  if workers > 1:
    compare_pool.run_parallel(cfg, todo, report)
  else:
    tf_settings = compare_units.configure_tensorflow(cfg.threads_per_worker,
                                                     cfg.deterministic, log)
    for unit in todo:
      t = time.time()
      report(unit, compare_units.run_logged(suite, unit, tf_settings), time.time() - t)
  wall = time.time() - t0
  paths = compare_report.write_outputs(cfg.output_dir, cfg.suite, cfg.bootstrap_reps,
                                       wall_seconds=wall if todo else None)
  log(f"compare: wrote {', '.join(paths.values())} ({wall:.0f}s).")
  return dict(done=len(todo), skipped=len(units) - len(todo), paths=paths, seconds=wall,
              workers=workers)
