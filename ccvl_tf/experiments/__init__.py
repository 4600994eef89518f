"""Runs and their configs, one subpackage per workflow (each `__init__` names its entry point
and its steps in order):

  offline/    train one learner on one offline dataset, export and report it
              (binaries/train_offline.py, diagnose.py, collect_dataset.py, ablate.py);
  compare/    every method x dataset kind x game x seed, the method table; the alpha sweep
              (binaries/compare.py, alpha_sweep.py);
  online/     online fine-tuning on Reverb from an offline run; the fine-tuning measurement
              (binaries/finetune_online.py, reverb_server.py, finetune_minatar.py);
  gridworld/  the paper's tabular gridworld experiment and the exact bounds of its learners
              (binaries/gridworld.py).

Shared by them, here: agent_registry.py (agent name -> learner, its settings and exported
policies), agent_options.py (the agents' settings as flags), score_export.py (scoring an
exported policy: binaries/evaluate.py), tf_setup.py (a process's TensorFlow threads and
determinism).

Imports run one way: online/ -> compare/ -> offline/ -> the shared modules, and online/ ->
gridworld/ (the exact references of its bounds check). Nothing imports back up: an offline
run's reference agents and results table are compare/offline_table.py, called by the binary.
"""
