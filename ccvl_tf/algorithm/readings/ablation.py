"""A research reading of CCVL's update: Algorithm 1's pair loss (paper.py) with the changes of
the ladder from CQL to CCVL (docs/ladder.md), reading 'ablation'.

Each option changes one part of Eq. (cql update) and is the paper's at its default (with every
option at its default the loss is reading 'paper''s): the gap ('max': R(pi) = 0), how delta_1
enters the weight ('constant': no log(1/delta_1)), n(s)^-1 ('off': 1 everywhere), delta
(`train_delta`: one fixed training delta instead of U(0, 1)), and the update's two samplings
(`pair_delta_1`, `pair_delta_2`: each pair's delta_{j,1} or delta_{j,2} at delta itself instead
of ~ U(0, delta); with both at 'delta' every pair is the same and the max over j is the
single loss w(delta) gap + TD(Q(s, a_D, delta) - y(delta))). Shapes as paper.py.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.algorithm.readings import options
from ccvl_tf.algorithm.readings import paper


@dataclasses.dataclass(frozen=True)
class Ablation(options.LadderOptions):
  """Reading 'ablation': mean_{B,N} max_j L_j (paper.loss) with a research change (the
  options of options.LadderOptions)."""
  NAME: ClassVar[str] = "ablation"
  OBJECTIVE: ClassVar[str] = "algorithm1"
  pair_delta_1: str = options.pair_delta_1_option()
  pair_delta_2: str = options.pair_delta_2_option()

  def target_confidences(self, delta: tf.Tensor, delta_2: tf.Tensor) -> tf.Tensor:
    """delta_2 [B, N, M] as sampled, or delta [B, N] broadcast to it ('delta')."""
    if self.pair_delta_2 == "delta":
      return tf.broadcast_to(delta[:, :, None], tf.shape(delta_2))  # [B, N, 1] -> [B, N, M]
    return delta_2

  def weight_confidences(self, delta: tf.Tensor, delta_1: tf.Tensor) -> tf.Tensor:
    """delta_1 [B, N, M] as sampled, or delta [B, N] broadcast to it ('delta')."""
    if self.pair_delta_1 == "delta":
      return tf.broadcast_to(delta[:, :, None], tf.shape(delta_1))  # [B, N, 1] -> [B, N, M]
    return delta_1

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    return paper.loss(q_values, actions, target, self.weight_confidences(delta, delta_1),
                      inverse_count, alpha, td_loss_type, huber_kappa, self.gap,
                      self.delta_weight)

  def objective(self, online, target, batch, delta, delta_1, delta_2, inverse_count_fn, config,
                training=False):
    """paper.objective with the options: mean_{B,N} max_j L_j + c DR3, L_j of paper.loss at
    this reading's gap, delta_weight and delta_{j,1} (`weight_confidences`), y_j at its
    delta_{j,2} (`target_confidences`); n(s)^-1 as the agent's inverse_count_fn gives it
    (count_weight 'off': 1) and delta as it samples it (train_delta)."""
    out, next_phi, targets = paper.q_and_targets(
        online, target, batch, delta, self.target_confidences(delta, delta_2), config.gamma,
        config.dr3_coef > 0, training)                  # [B, N, A] ..., y_j [B, N, M]
    inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], out["phi"]))  # [B]
    res = paper.loss(out["q"], batch["action"], targets, self.weight_confidences(delta, delta_1),
                     inv_count, config.alpha, config.td_loss, config.huber_kappa, self.gap,
                     self.delta_weight)
    return options.with_dr3(res["loss"], res, out["phi"], next_phi, inv_count, config.dr3_coef)
