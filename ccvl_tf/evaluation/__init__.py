"""Scoring and inspecting policies: evaluation episodes, reference and normalized scores,
score statistics, the paper's tables and the confidence diagnostics.

It may import ccvl_tf.algorithm (and ccvl_tf.runtime's plumbing), never agents/ or
ccvl_tf.experiments.
"""
