"""A research reading of CCVL's update: Eq. (update)'s anti-exploration form with the state
estimate n(s)^-1 (objective 'bonus').

Q(s, a_D, delta) regressed on max_j y_j - w(delta), w(delta) = alpha sqrt(log(1/delta) n(s)^-1),
with no CQL regularizer unless a delta-free gap weight w0 is given. Monotone in delta by
construction (both terms are nondecreasing in delta). The gridworld's tabular CCVL is this
form with exact counts. Shapes as paper.py.
"""
from __future__ import annotations

from typing import Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import bound


def loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor, delta: tf.Tensor,
         inverse_count: tf.Tensor, alpha: float, td_loss_type: str = "squared",
         huber_kappa: float = 1.0, gap: str = "logsumexp", gap_weight: float = 0.0,
         delta_weight: str = "sqrt_log") -> Dict[str, tf.Tensor]:
  """mean_{B,N} [ TD(Q(s,a_D,delta) - [max_j y_j - w(delta)]) + w0 gap ].

  w0 = `gap_weight` >= 0 weighs the gap (`gap`) without delta (0: the bonus alone,
  'regularizer' 0 and 'gap' reported only). Same other arguments and keys as bound.loss.
  """
  losses.validate_alpha(alpha)
  losses.validate_alpha(gap_weight)
  gap, q_sa = losses.cql_gap(q_values, actions, gap)             # [B, N], [B, N]
  weight = bound.confidence_weight(delta, inverse_count, alpha, delta_weight)  # [B, N]
  y = tf.stop_gradient(tf.reduce_max(target, axis=-1) - weight)  # [B, N, M] -> [B, N]
  td = losses.td_loss(q_sa - y, td_loss_type, huber_kappa)       # [B, N]
  reg = gap_weight * gap                                         # [B, N]
  return {"loss": tf.reduce_mean(td + reg), "target": y,
          "argmax_j": tf.argmax(target, axis=-1, output_type=tf.int32),
          "regularizer": reg, "td": td, "gap": gap, "q_sa": q_sa,
          "weight": weight}
