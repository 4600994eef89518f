"""A research reading of CCVL's update: the proof of Lemma 1's (reading 'bound').

The max over delta_1, delta_2 <= delta of Eq. (cql update) read as a max over the resulting
*bound*: attained at delta_1 = delta (the weight sqrt(log(1/delta_1)) is smallest there) and at
the largest target over delta_2 <= delta (pair 0 bootstraps at delta itself,
`Bound.target_confidences`). Loss: mean_{B,N} [ w(delta) gap + TD(Q(s, a_D, delta) - max_j y_j) ],
w(delta) = alpha sqrt(log(1/delta) n(s)^-1). Shapes as paper.py.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import options
from ccvl_tf.algorithm.readings import paper


def confidence_weight(delta: tf.Tensor, inverse_count: tf.Tensor, alpha: float,
                      delta_weight: str = "sqrt_log") -> tf.Tensor:
  """alpha * sqrt(log(1/delta) * n(s)^-1) at delta [B, N] (delta_1 = delta) -> [B, N], no grad
  (delta_weight='constant': alpha * sqrt(n(s)^-1))."""
  inv_n = tf.stop_gradient(tf.cast(inverse_count, tf.float32))[:, None]  # [B] -> [B, 1]
  log_inv = losses.log_inverse_delta(delta, delta_weight)                # [B, N]
  return tf.stop_gradient(alpha * tf.sqrt(log_inv * inv_n))              # [B, N]


def loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor, delta: tf.Tensor,
         inverse_count: tf.Tensor, alpha: float, td_loss_type: str = "squared",
         huber_kappa: float = 1.0, gap: str = "logsumexp", delta_weight: str = "sqrt_log"
         ) -> Dict[str, tf.Tensor]:
  """mean_{B,N} [ w(delta) gap(s, delta) + TD(Q(s,a_D,delta) - max_j y_j) ].

  Args:
    q_values: online Q(s, ., delta) [B, N, A].
    actions: a_D [B].
    target: candidate TD targets y_j at delta_{j,2} <= delta [B, N, M] (no gradient).
    delta: [B, N]; the weight uses delta_1 = delta.
    inverse_count: n(s)^-1 [B].
    alpha, td_loss_type, huber_kappa, gap, delta_weight: as paper.loss.

  Returns:
    dict like paper.loss: 'loss'; 'target' (max_j y_j) [B, N]; 'argmax_j' [B, N];
    'regularizer', 'td', 'gap', 'q_sa', 'weight' [B, N].
  """
  losses.validate_alpha(alpha)
  gap, q_sa = losses.cql_gap(q_values, actions, gap)             # [B, N], [B, N]
  y = tf.stop_gradient(tf.reduce_max(target, axis=-1))           # [B, N, M] -> [B, N]
  weight = confidence_weight(delta, inverse_count, alpha, delta_weight)  # [B, N]
  reg = weight * gap                                              # [B, N]
  td = losses.td_loss(q_sa - y, td_loss_type, huber_kappa)       # [B, N]
  return {"loss": tf.reduce_mean(reg + td), "target": y,
          "argmax_j": tf.argmax(target, axis=-1, output_type=tf.int32),
          "regularizer": reg, "td": td, "gap": gap, "q_sa": q_sa, "weight": weight}


@dataclasses.dataclass(frozen=True)
class Bound(options.BootstrapsAtDelta, options.LadderOptions):
  """Reading 'bound': the `loss` above, with the ladder's options (options.LadderOptions):
  the ladder's rungs 1-6 train this reading (docs/ladder.md)."""
  NAME: ClassVar[str] = "bound"
  OBJECTIVE: ClassVar[str] = "bound"

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    del delta_1
    return loss(q_values, actions, target, delta, inverse_count, alpha, td_loss_type,
                huber_kappa, self.gap, self.delta_weight)

  def objective(self, online, target, batch, delta, delta_1, delta_2, inverse_count_fn, config,
                training=False):
    """The `loss` above + c DR3, y_j at `target_confidences` (pair 0 at delta itself); the
    weight at delta_1 = delta (the sampled delta_1 is unused)."""
    del delta_1
    out, next_phi, targets = paper.q_and_targets(
        online, target, batch, delta, self.target_confidences(delta, delta_2), config.gamma,
        config.dr3_coef > 0, training)                  # [B, N, A] ..., y_j [B, N, M]
    inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], out["phi"]))  # [B]
    res = loss(out["q"], batch["action"], targets, delta, inv_count, config.alpha,
               config.td_loss, config.huber_kappa, self.gap, self.delta_weight)
    return options.with_dr3(res["loss"], res, out["phi"], next_phi, inv_count, config.dr3_coef)
