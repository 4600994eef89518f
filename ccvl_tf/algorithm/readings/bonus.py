"""A research reading of CCVL's update: Eq. (update)'s anti-exploration form with the state
estimate n(s)^-1 (reading 'bonus').

Q(s, a_D, delta) regressed on max_j y_j - w(delta), w(delta) = alpha sqrt(log(1/delta) n(s)^-1),
with no CQL regularizer unless a delta-free gap weight w0 is given. Monotone in delta by
construction (both terms are nondecreasing in delta). The gridworld's tabular CCVL is this
form with exact counts. Shapes as paper.py.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.runtime.config_flags import setting

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import bound
from ccvl_tf.algorithm.readings import options
from ccvl_tf.algorithm.readings import paper

# The smallest pi_beta(a | s) the per-action count divides by (n(s, a)^-1 <= 1000 n(s)^-1).
MIN_ACTION_SHARE = 1e-3


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


@dataclasses.dataclass(frozen=True)
class Bonus(options.BootstrapsAtDelta, options.Reading):
  """Reading 'bonus': the `loss` above, with w0 (`gap_weight`), the data-support head (tau,
  `support_threshold`, ccvl_tf/algorithm/support.py) and the bonus's count (`bonus_counts`).
  The gridworld's neural CCVL trains it beside the exact tabular form."""
  NAME: ClassVar[str] = "bonus"
  OBJECTIVE: ClassVar[str] = "bonus"
  gap: str = options.gap_option()
  gap_weight: float = setting(
      0.0, "w0, a delta-independent weight of the gap (0: the bonus alone).",
      lower_bound=0.0, parse_bounds=False)
  support_threshold: float = setting(
      0.0, "tau: a behaviour-cloning head learns the data's policy and Q ranks an action "
      "below every other where pi_beta(a | s) < tau max_a' pi_beta(a' | s), since the data "
      "gives no lower bound there (ccvl_tf/algorithm/support.py); 0: no support head.",
      lower_bound=0.0, upper_bound=0.999)
  bonus_counts: str = setting(
      "state", "the bonus's count: 'state' (n(s), the linear estimate) or 'state_action' "
      "(n(s, a) = n(s) pi_beta(a | s), pi_beta from the support head: Eq. update's own "
      "count, larger bonuses on the actions the data rarely takes).",
      enum_values=options.BONUS_COUNTS)

  def validate(self) -> None:
    if self.bonus_counts == "state_action" and not self.support_threshold > 0:
      raise ValueError(f"bonus_counts='state_action' needs a support head (support_threshold "
                       f"> 0) for pi_beta(a | s), got support_threshold="
                       f"{self.support_threshold!r}")

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    del delta_1
    return loss(q_values, actions, target, delta, inverse_count, alpha, td_loss_type,
                huber_kappa, self.gap, self.gap_weight)

  def objective(self, online, target, batch, delta, delta_1, delta_2, inverse_count_fn, config,
                training=False):
    """The `loss` above + c DR3, y_j at `target_confidences` (pair 0 at delta itself). With a
    support head: Q is the unmasked one the data's actions are regressed on, its behaviour-
    cloning loss is added ('support_loss', 'support_accuracy'), and with bonus_counts
    'state_action' the bonus's count is n(s, a_D)^-1 = n(s)^-1 / pi_beta(a_D | s)."""
    del delta_1
    out, next_phi, targets = paper.q_and_targets(
        online, target, batch, delta, self.target_confidences(delta, delta_2), config.gamma,
        config.dr3_coef > 0, training)                  # [B, N, A] ..., y_j [B, N, M]
    q = out.get("q_raw", out["q"])                         # [B, N, A]
    phi, logits = out["phi"], out.get("support_logits")    # [B, D], [B, A] or None
    inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], phi))  # [B]
    if self.bonus_counts == "state_action" and logits is not None:
      # pi_beta from the support head (no gradient).
      share = tf.gather(tf.nn.softmax(logits), tf.cast(batch["action"], tf.int32), axis=1,
                        batch_dims=1)                                   # [B, A] -> [B]
      inv_count = inv_count / tf.maximum(tf.stop_gradient(share), MIN_ACTION_SHARE)  # [B]
    res = loss(q, batch["action"], targets, delta, inv_count, config.alpha, config.td_loss,
               config.huber_kappa, self.gap, self.gap_weight)
    if logits is None:
      return options.with_dr3(res["loss"], res, phi, next_phi, inv_count, config.dr3_coef)
    bc = losses.bc_loss(logits, batch["action"])  # the behaviour-cloning head of the support
    return options.with_dr3(res["loss"] + bc["loss"], res, phi, next_phi, inv_count,
                            config.dr3_coef, support_loss=bc["loss"],
                            support_accuracy=bc["accuracy"])
