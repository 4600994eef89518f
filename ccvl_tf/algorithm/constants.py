"""Constants the network agents (ccvl_tf/algorithm) and the exact tabular learners
(ccvl_tf/tabular/learners.py) share, declared once here.

Plain Python, no TensorFlow or numpy: the tabular learners import this module and stay
numpy-only.
"""

# The bonus's count: n(s), or n(s, a) (the network: n(s) pi_beta(a | s); the bonus reading's
# bonus_counts, ccvl_tf/algorithm/readings/bonus.py).
BONUS_COUNTS = ("state", "state_action")
# How far below the smallest supported action's value an action outside the data's support is
# put (reward units): it ranks below every supported one, and Bellman errors on the data stay
# finite. The exact learner (ccvl_tf.tabular.learners.ccvl_bonus_gap_q) and the network's
# support mask (ccvl_tf/algorithm/support.py) use this one margin.
SUPPORT_MARGIN = 1.0
