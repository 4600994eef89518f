"""The method: CCVL's networks, losses and readings of its update, counts n(s)^-1, the delta
belief, the policies and their SavedModel export (docs/ARCHITECTURE.md, "The tree").

It imports nothing of ccvl_tf.tabular, ccvl_tf.evaluation, ccvl_tf.experiments or ccvl_tf/agents/, and
of ccvl_tf.runtime only strict_json (policy_export.py writes the export's record with it) and
config_flags (the readings declare their options as settings). The constants it shares with the
exact tabular learners are declared here (constants.py) and imported by ccvl_tf.tabular.
"""
