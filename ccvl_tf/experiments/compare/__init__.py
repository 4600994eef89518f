"""The method comparison (the paper's Table 2) and the alpha sweep built on it.

Entry point: `runner.run(CompareConfig(...))` (binaries/compare.py). Its steps, in order:
  1. the settings: config.py (methods, suites, dataset kinds, `CompareConfig`);
  2. per (dataset kind, game, seed): the suite's environment, network and data (suites.py);
  3. every unit's train phase, then its evaluation phase and result file (units.py), training
     groups side by side in worker processes (pool.py), or one Ray task per unit on a Ray
     cluster (ray_engine.py, --engine=ray);
  4. the outputs from all result files: scores.csv, table.md, per-game tables, iqm.png,
     confidence.md (report.py).

Second entry point: `alpha_sweep.run(AlphaSweepConfig(...))` (binaries/alpha_sweep.py): the
comparison once per alpha (CQL, CCVL, Fixed-CCVL) and once for behaviour cloning, then
rows.csv, table.md and alpha_sweep.png (alpha_sweep_report.py; docs/alpha_sweep.md).

Third: `offline_table.run(cfg, trained)` after `offline.runner.run_holding_lock`, both under the
run directory's lock that binaries/train_offline.py takes once (run_lock.hold): the reference
agents trained beside an offline run and its results table.
"""
