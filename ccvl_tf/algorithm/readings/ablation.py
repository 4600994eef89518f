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

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    if self.pair_delta_1 == "delta":
      delta_1 = tf.broadcast_to(delta[:, :, None], tf.shape(delta_1))  # [B, N] -> [B, N, M]
    return paper.loss(q_values, actions, target, delta_1, inverse_count, alpha, td_loss_type,
                      huber_kappa, self.gap, self.delta_weight)
