"""What CCVL's readings share: the base of the typed variants and the declarations of the
options more than one reading takes.

A reading is a frozen dataclass whose fields are the options it takes, declared with
`config_flags.setting` (so each is also a flag, with its bounds and help). An option a
reading does not take is the paper's choice, the class attribute of `Reading` below: a reading
never carries a switch it ignores. Shared options are declared here once, each by a function
that makes the field (a dataclass field belongs to one class).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Dict, Optional

import tensorflow as tf

from ccvl_tf.algorithm import constants
from ccvl_tf.algorithm import losses
from ccvl_tf.runtime.config_flags import setting

# How n(s)^-1 enters the regularizer weight ('off': n(s)^-1 = 1, an ablation).
COUNT_WEIGHTS = ("linear", "off")
# Where a pair's delta_{j,1} (the weight's) or delta_{j,2} (the target's) comes from:
# 'uniform' ~ U(0, delta) as Algorithm 1 samples it, or 'delta' (the confidence itself, the
# proofs' choice: the weight sqrt(log(1/delta)), the target at delta).
PAIR_DRAWS = ("uniform", "delta")
# The count of the bonus reading: n(s), or n(s, a) = n(s) pi_beta(a | s) (one list for the
# exact tabular learner and the network).
BONUS_COUNTS = constants.BONUS_COUNTS


def gap_option():
  return setting(
      "logsumexp", "the regularizer's gap: 'logsumexp' (CQL(H), R(pi) the entropy) or 'max' "
      "(R(pi) = 0: max_a Q - Q(s, a_D)).",
      enum_values=losses.GAPS)


def delta_weight_option():
  return setting(
      "sqrt_log", "how delta_1 enters the regularizer weight: 'sqrt_log' (alpha sqrt(log(1 / "
      "delta_1) n(s)^-1), Eq. cql update) or 'constant' (alpha sqrt(n(s)^-1); with "
      "count_weight='off' CQL's constant alpha).", enum_values=losses.DELTA_WEIGHTS)


def count_weight_option():
  return setting(
      "linear", "'linear' (n(s)^-1 from the linear estimate, the paper) or 'off' (n(s)^-1 = 1 "
      "everywhere: the weight alpha sqrt(log(1/delta_1)); the counts are still kept for the "
      "diagnostics).", enum_values=COUNT_WEIGHTS)


def train_delta_option():
  return setting(
      None, "delta of every training sample fixed at this value (pairs still ~ U(0, delta)); "
      "unset: delta ~ U(0, 1) as Algorithm 1 (with N = M = 1, reading 'bound', delta_weight "
      "'constant' and count_weight 'off' the loss is CQL's).", above=0.0, below=1.0)


def pair_delta_1_option():
  return setting(
      "uniform", "where delta_{j,1}, the weight's confidence, comes from: 'uniform' (~ U(0, "
      "delta), Algorithm 1) or 'delta' (delta_1 = delta, the proofs' choice).",
      enum_values=PAIR_DRAWS)


def pair_delta_2_option():
  return setting(
      "uniform", "where delta_{j,2}, the target's confidence, comes from: 'uniform' (~ U(0, "
      "delta) inside the max of the pair loss, Algorithm 1) or 'delta' (every pair's target "
      "at delta itself).", enum_values=PAIR_DRAWS)


class Reading:
  """Base of the readings. NAME: the reading's name (--reading); OBJECTIVE: the name runs
  recorded before readings were variants (their fingerprints keep it). The attributes below
  are the paper's choice of every option, in force wherever a reading does not take it."""
  NAME: ClassVar[str] = ""
  OBJECTIVE: ClassVar[str] = ""
  gap = "logsumexp"
  delta_weight = "sqrt_log"
  count_weight = "linear"
  train_delta: Optional[float] = None
  gap_weight = 0.0
  bonus_counts = "state"
  support_threshold = 0.0
  pair_delta_1 = "uniform"
  pair_delta_2 = "uniform"

  def validate(self) -> None:
    """ValueError for a combination of options the reading cannot train (the bounds and
    choices of each are checked from its declaration: readings.validate)."""

  def target_confidences(self, delta: tf.Tensor, delta_2: tf.Tensor) -> tf.Tensor:
    """The delta_2 the target network is evaluated at [B, N, M]: as sampled, ~ U(0, delta)."""
    del delta
    return delta_2

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type: str = "squared", huber_kappa: float = 1.0) -> Dict[str, tf.Tensor]:
    """The lower bound's loss of one batch (shapes as readings/paper.py `loss`)."""
    raise NotImplementedError

  def objective(self, online, target, batch, delta, delta_1, delta_2, inverse_count_fn, config,
                training: bool = False) -> Dict[str, tf.Tensor]:
    """The reading's step objective at sampled confidences delta [B, N], delta_1, delta_2
    [B, N, M] (the one the agent's tape calls; readings/paper.py `objective` is the paper's):
    online, target: networks.CCVLNetwork; batch: the prepared transition batch;
    inverse_count_fn(observation, phi) -> n(s)^-1 [B]; config: CCVLConfig (gamma, alpha,
    td_loss, huber_kappa, dr3_coef). Returns 'loss' (what is minimized), its parts and phi(s)
    'phi' [B, D]."""
    raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class LadderOptions(Reading):
  """The options of the ladder from CQL to CCVL (docs/ladder.md), taken by the readings
  'ablation' and 'bound'; each is the paper's at its default."""
  gap: str = gap_option()
  delta_weight: str = delta_weight_option()
  count_weight: str = count_weight_option()
  train_delta: Optional[float] = train_delta_option()


def bootstrap_at_delta(delta: tf.Tensor, delta_2: tf.Tensor) -> tf.Tensor:
  """The max over delta_2 <= delta includes delta_2 = delta itself (where a target network
  monotone in delta attains it): pair 0 uses delta, pairs 1..M-1 keep their U(0, delta)
  draws. delta [B, N], delta_2 [B, N, M] -> [B, N, M]."""
  return tf.concat([delta[:, :, None], delta_2[:, :, 1:]], axis=-1)  # [B, N, 1] + [B, N, M-1]


class BootstrapsAtDelta:
  """A reading whose targets take the max over delta_2 <= delta with pair 0 at delta itself
  ('bound', 'bonus')."""

  def target_confidences(self, delta: tf.Tensor, delta_2: tf.Tensor) -> tf.Tensor:
    return bootstrap_at_delta(delta, delta_2)  # [B, N, M]


def with_dr3(total: tf.Tensor, res: Dict[str, tf.Tensor], phi: tf.Tensor,
             next_phi: Optional[tf.Tensor], inverse_count: tf.Tensor, dr3_coef: float,
             gap_metric: str = "cql_gap", **extra: tf.Tensor) -> Dict[str, tf.Tensor]:
  """What a research reading's objective returns once its loss is computed (the paper's
  writes the same out in readings/paper.py `objective`): 'loss' = total + c DR3(phi(s),
  phi(s')) (c = dr3_coef; DR3 0 when next_phi is None), 'ccvl_loss' (res['loss']),
  'dr3_penalty', the means of res's per-(B, N) 'td', 'regularizer', 'gap' (under
  `gap_metric`) and 'q_sa', the mean n(s)^-1 [B], `extra` and 'phi' [B, D]."""
  if next_phi is not None:
    dr3 = losses.dr3_penalty(phi, next_phi)
    total = total + dr3_coef * dr3
  else:
    dr3 = tf.zeros([])
  return {"loss": total, "ccvl_loss": res["loss"], "dr3_penalty": dr3,
          "td_term": tf.reduce_mean(res["td"]),
          "regularizer_term": tf.reduce_mean(res["regularizer"]),
          gap_metric: tf.reduce_mean(res["gap"]), **extra,
          "q_data": tf.reduce_mean(res["q_sa"]), "inverse_count": tf.reduce_mean(inverse_count),
          "phi": phi}
