"""CCVL's readings of its update: how the loss of one transition is formed from Q(s, ., delta),
the targets y_j at delta_{j,2} and n(s)^-1 (CCVLConfig.objective).

  'algorithm1'  paper.py  Eq. (cql update) as Algorithm 1 writes it: the paper's, the default.
  'bound'       bound.py  the proof of Lemma 1's reading (delta_1 = delta, max_j over targets).
  'bonus'       bonus.py  Eq. (update)'s anti-exploration bonus with the state count n(s)^-1.

`loss` dispatches on the objective; `target_confidences` gives the delta_2 each one bootstraps
from. docs/agent.md says what each measured.
"""
from __future__ import annotations

import tensorflow as tf

from ccvl_tf.algorithm.readings import bonus, bound, paper

OBJECTIVES = ("algorithm1", "bound", "bonus")


def validate_objective(objective: str) -> None:
  if objective not in OBJECTIVES:
    raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


def target_confidences(delta: tf.Tensor, delta_2: tf.Tensor, objective: str) -> tf.Tensor:
  """The target confidences each objective bootstraps from, [B, N, M].

  'algorithm1': delta_{j,2} ~ U(0, delta) as sampled. 'bound' / 'bonus': the max over
  delta_2 <= delta includes delta_2 = delta itself (where a target network that is monotone in
  delta attains it), so pair 0 uses delta and pairs 1..M-1 keep their U(0, delta) draws.
  """
  validate_objective(objective)
  if objective == "algorithm1":
    return delta_2
  return tf.concat([delta[:, :, None], delta_2[:, :, 1:]], axis=-1)  # [B, N, 1] + [B, N, M-1]


def loss(objective: str, q_values, actions, target, delta, delta_1, inverse_count, alpha,
         td_loss_type="squared", huber_kappa=1.0, gap="logsumexp", gap_weight=0.0,
         delta_weight="sqrt_log"):
  """paper.loss ('algorithm1'), bound.loss or bonus.loss (the only one that takes
  `gap_weight`)."""
  validate_objective(objective)
  if objective == "algorithm1":
    return paper.loss(q_values, actions, target, delta_1, inverse_count, alpha, td_loss_type,
                      huber_kappa, gap, delta_weight)
  if objective == "bound":
    return bound.loss(q_values, actions, target, delta, inverse_count, alpha, td_loss_type,
                      huber_kappa, gap, delta_weight)
  return bonus.loss(q_values, actions, target, delta, inverse_count, alpha, td_loss_type,
                    huber_kappa, gap, gap_weight, delta_weight)
