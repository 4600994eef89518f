"""Scoring and inspecting policies: evaluation episodes (one environment, rollouts.py, or every
Atari episode side by side, atari_vector.py), reference and normalized scores,
score statistics, the paper's tables and the confidence diagnostics.

It may import ccvl_tf.algorithm (and ccvl_tf.runtime's plumbing), never agents/ or
ccvl_tf.experiments.
"""
