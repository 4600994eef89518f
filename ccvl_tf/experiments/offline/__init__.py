"""The offline workflow: one learner trained on one offline dataset.

Entry point: `runner.run(config.resolve(OfflineConfig(...)))` (binaries/train_offline.py): the
config is validated and resolved once (config.resolve), the stages take the plan. It takes the run
directory's lock (ccvl_tf/runtime/run_lock.py: one process per --root_dir);
`runner.run_holding_lock` is the same run for a caller that holds the lock itself. Its steps, in
order:
  1. the dataset: a Dopamine replay_logs directory (local or gs://), its own record checked
     against the game (data/dataset_record.py), or the default dataset collected once
     (default_dataset.py; also binaries/collect_dataset.py);
  2. the training settings: the preset in force (presets.py), under the flags given;
  3. the learner from the shared agent registry, trained by `ccvl_tf.runtime.training.train`
     (checkpoints, exact resume, periodic evaluation);
  4. the exported SavedModel policies;
  5. CCVL runs: the confidence diagnostics (confidence_report.py; also `runner.diagnose`,
     binaries/diagnose.py); then summary.json. Its random streams: seeds.py.
The binary holds the lock across `runner.run_holding_lock` and then `compare.offline_table.run`
(which checks that its caller holds it): the reference agents beside it and the results table of
random / behaviour / reference / learned policies (demo_report.py's rows).

Beside it: ablation.py, `ablation.run(AblationConfig(...))` (binaries/ablate.py): named
variants of the learners' settings trained on one development dataset, probed while they
train, scored at the end (docs/ablation.md); demo_seeds.py, `demo_seeds.run(DemoSeedsConfig(...))`
(binaries/demo_seeds.py): the demo (binaries/train_offline.py) once per training seed on one
dataset, and its table over seeds.
"""
