"""Scoring and inspecting policies: evaluation episodes (one environment at a time,
rollouts.py; every Atari episode side by side, atari_vector.py), score statistics, the paper's
tables and the confidence diagnostics. The reference scores and the normalized score are
ccvl_tf/envs/scores.py.

It imports the folders below it (ccvl_tf.runtime, algorithm, tabular, envs), never
ccvl_tf.data, ccvl_tf.experiments or ccvl_tf/agents/ (docs/ARCHITECTURE.md, "Layers").
"""
