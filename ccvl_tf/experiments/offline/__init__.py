"""The offline workflow: one learner trained on one offline dataset.

Entry point: `runner.run(config.resolve(OfflineConfig(...)))` (binaries/train_offline.py): the config
is validated and resolved once (config.resolve), the stages take the plan. It holds the run
directory's lock (ccvl_tf/runtime/run_lock.py: one process per --root_dir). Its steps, in order:
  1. the dataset: a Dopamine replay_logs directory (local or gs://), its own record checked
     against the game (data/dataset_record.py), or the default dataset collected once
     (default_dataset.py; also binaries/collect_dataset.py);
  2. the training settings: the preset in force (presets.py), under the flags given;
  3. the learner from the shared agent registry, trained by `ccvl_tf.runtime.training.train`
     (checkpoints, exact resume, periodic evaluation);
  4. the exported SavedModel policies;
  5. CCVL runs: the confidence diagnostics (confidence_report.py; also `runner.diagnose`,
     binaries/diagnose.py); then summary.json. Its random streams: seeds.py.
The binary then calls `compare.offline_table.run`: the reference agents beside it and the
results table of random / behaviour / reference / learned policies (demo_report.py's rows).

Beside it: ablation.py, `ablation.run(AblationConfig(...))` (binaries/ablate.py): named
variants of the learners' settings trained on one development dataset, probed while they
train, scored at the end (docs/ablation.md); demo_seeds.py, `demo_seeds.run(DemoSeedsConfig(...))`
(binaries/demo_seeds.py): the demo (binaries/train_offline.py) once per training seed on one
dataset, and its table over seeds.
"""
