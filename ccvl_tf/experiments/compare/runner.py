"""The paper's method comparison (Table 2) in one run: every method x dataset kind x game x seed.

More in docs/compare.md "Module notes", `ccvl_tf/experiments/compare/runner.py`.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import pool as compare_pool
from ccvl_tf.experiments.compare import ray_engine as compare_ray
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.compare import units as compare_units
from ccvl_tf.experiments import tf_setup

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
  # A finished unit is reused only under the settings now in force.
  changed, unrecorded = compare_units.changed_units(suite, [u for u in units if u not in todo])
  if changed:
    raise ValueError(
        f"--output_dir {cfg.output_dir} holds {len(changed)} finished unit(s) of other "
        f"settings than this run's, which would be reused as this run's: "
        + " | ".join(changed[:5]) + (f" | ... and {len(changed) - 5} more" if len(changed) > 5
                                     else "")
        + ". Use another --output_dir, or give the settings they were run with")
  if unrecorded:
    log(f"Note: {len(unrecorded)} finished unit(s) record no settings (written before units "
        f"recorded them), so they are reused without a check, e.g. {unrecorded[0]}.")
  workers = min(cfg.workers, max(1, len(compare_units.training_groups(todo))))
  log(f"compare: suite {cfg.suite}, {len(cfg.methods)} methods x {len(cfg.datasets)} dataset "
      f"kinds x {len(games)} games x {cfg.seeds} seeds = {len(units)} runs; "
      f"{len(units) - len(todo)} already done (skipped), {len(todo)} to run"
      + (" as Ray tasks, one per run." if cfg.engine == "ray" and todo else
         f" in {workers} worker processes." if workers > 1 else "."))
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

  if cfg.engine == "ray":
    if todo:
      compare_ray.run_on_ray(cfg, todo, report, log)
  elif workers > 1:
    compare_pool.run_parallel(cfg, todo, report)
  else:
    tf_settings = tf_setup.configure_tensorflow(cfg.threads_per_worker,
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
