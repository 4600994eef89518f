"""Online fine-tuning on Reverb from an offline run, and the fine-tuning measurement.

Entry point: `ccvl_tf.finetune(offline_dir, env=..., root_dir=..., **settings)` (finetune.py;
binaries/finetune_online.py makes this call with its flags), which runs
`runner.run(OnlineConfig(...))`. The offline run is a gridworld, MinAtar or Atari run, or a run
of ccvl_tf.fit on own data fine-tuned in a Gymnasium environment (own_data.py,
own_data_share.py). Its steps, in order:
  1. the settings, the game's specs, the learner of --agent and the Reverb tables (config.py);
  2. the offline starting point: the offline run's summary and checkpoint restored into the
     learner (start.py);
  3. the Reverb server (in the learner's process, or binaries/reverb_server.py) and K actor
     processes (actor.py; each one `python -m ccvl_tf.experiments.online actor ...`,
     __main__.py) -- or, with --schedule=deterministic, K actors stepped in turn in the
     learner's process and a seeded replay (deterministic.py);
  4. the learner's phases: train on the replay table (the step under a tf.distribute
     strategy: distributed.py) with counts that follow the online data (penalty.py), push
     weights and checkpoint through calls with deadlines (server.py), evaluate
     (scores_and_bounds.py; on the gridworld the bounds against exact values, bounds.py);
  5. the exported policies and summary.json.

Second entry point: `finetune_suite.run(FinetuneSuiteConfig(...))`
(binaries/finetune_minatar.py): the MinAtar comparison's offline runs fine-tuned by every
method, one subprocess each, then the tables and plots (finetune_report.py; docs/online.md
section 5).
"""
