"""CCVL with lower and upper bounds Q_l(s, a, delta), Q_u(s, a, delta) (paper Sec. "Learning
Lower- and Upper-Bounds", Eq. upper update, Eq. upper policy).

  * Q_l: `agents.ccvl_agent.CCVLAgent` unchanged (Algorithm 1, Eq. cql update).
  * Q_u: `UpperCCVLAgent`, the same network, counts, guarded Adam step, target network and
    checkpoint as CCVLAgent (it subclasses it), with the objective replaced by
    `ccvl_tf.losses.ccvl_upper_loss`:
        L^u_j = alpha_u sqrt(log(1/delta_{j,1}) n(s)^-1) (Q_u(s,a_D,delta) - softmin_a Q_u(s,a,delta))
                + TD(Q_u(s,a_D,delta) - r - gamma (1-terminal) max_a' Qbar_u(s',a',delta_{j,2}))
        loss  = mean_{B,N} min_j L^u_j    (Eq. upper update: min over delta_1, delta_2)
    The reading (sign, softmin, min over pairs) is argued in ccvl_tf/losses.py and
    docs/online.md.
  * `CCVLBoundsAgent` composes the two (separate networks, no shared torso: measured cost in
    docs/online.md), trains both on every batch and exposes
      - `policy`: Fixed-CCVL greedy in Q_l (acting safely),
      - `bounds_policy`: Eq. upper policy (ccvl_tf.policies.BoundsPolicy: argmax of Q_u over
        the safe set {a : Q_l >= beta max Q_l}) at `explore_delta`,
      - `exploration_policy`: bounds_policy, epsilon-greedy (what online actors run).
    It follows the learner protocol of ccvl_tf.training (train_on_batch, make_checkpoint,
    train_step_counter), so the offline loop can train it too.

Checkpoint layout (`make_checkpoint`): the lower agent's items at the top level (online,
target, optimizer, train_step, counts -- exactly a CCVLAgent checkpoint, so an offline CCVL
checkpoint restores into it) plus `upper` (a CCVLAgent-layout checkpoint of Q_u).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from agents import ccvl_agent
from ccvl_tf import losses
from ccvl_tf import networks
from ccvl_tf import policies


@dataclasses.dataclass(frozen=True)
class BoundsConfig:
  """Settings of the upper bound and of the exploration policy.

  Attributes:
    upper_alpha: alpha_u, weight of the upper regularizer (None: the lower alpha).
    upper_regularizer: 'softmin' (default, bounded) or 'neg_logsumexp' (literal sign flip;
      diverges, see losses.UPPER_REGULARIZERS).
    pair_reduction: 'min' (Eq. upper update's min over delta_1, delta_2) or 'max'.
    beta: beta of Eq. upper policy's safe set A_l = {a : Q_l >= beta max_a' Q_l} (> 0).
      The paper gives no value; 0.5 is a placeholder (with rewards >= 0, beta -> 0 lets Q_u
      choose among all actions, beta = 1 keeps only argmax Q_l).
    explore_delta: delta at which the exploration policy evaluates Q_l and Q_u.
    explore_epsilon: epsilon-greedy on top of the bounds policy while collecting.
  """
  upper_alpha: Optional[float] = None
  upper_regularizer: str = "softmin"
  pair_reduction: str = "min"
  beta: float = 0.5
  explore_delta: float = 0.5
  explore_epsilon: float = 0.01

  def validate(self):
    if self.upper_alpha is not None:
      losses.validate_alpha(self.upper_alpha)
    if self.upper_regularizer not in losses.UPPER_REGULARIZERS:
      raise ValueError(f"upper_regularizer must be one of {losses.UPPER_REGULARIZERS}, got "
                       f"{self.upper_regularizer!r}")
    if self.pair_reduction not in losses.PAIR_REDUCTIONS:
      raise ValueError(f"pair_reduction must be one of {losses.PAIR_REDUCTIONS}, got "
                       f"{self.pair_reduction!r}")
    if not self.beta > 0:
      raise ValueError(f"beta must be > 0 (Eq. upper policy), got {self.beta!r}")
    losses.validate_delta(self.explore_delta, "explore_delta")
    if not 0.0 <= self.explore_epsilon <= 1.0:
      raise ValueError(f"explore_epsilon must be in [0, 1], got {self.explore_epsilon!r}")


def ccvl_upper_objective(online: networks.CCVLNetwork, target: networks.CCVLNetwork,
                         batch: Dict[str, tf.Tensor], delta: tf.Tensor, delta_1: tf.Tensor,
                         delta_2: tf.Tensor, inverse_count_fn, config: ccvl_agent.CCVLConfig,
                         bounds: BoundsConfig, training: bool = False) -> Dict[str, tf.Tensor]:
  """Eq. (upper update), regularized form, for given confidences (network plumbing).

  Same network passes (`agents.ccvl_agent.forward_and_targets`), shapes and outputs as
  `agents.ccvl_agent.ccvl_objective`, with `losses.ccvl_upper_loss` in place of the lower loss.
  """
  q, phi, next_phi, targets = ccvl_agent.forward_and_targets(online, target, batch, delta,
                                                             delta_2, config, training)
  inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], phi))  # [B]
  alpha = config.alpha if bounds.upper_alpha is None else bounds.upper_alpha
  res = losses.ccvl_upper_loss(q, batch["action"], targets, delta_1, inv_count, alpha,
                               config.td_loss, config.huber_kappa, bounds.upper_regularizer,
                               bounds.pair_reduction)
  total = res["loss"]
  if next_phi is not None:
    dr3 = losses.dr3_penalty(phi, next_phi)
    total = total + config.dr3_coef * dr3
  else:
    dr3 = tf.zeros([])
  return {
      "loss": total, "ccvl_loss": res["loss"], "dr3_penalty": dr3,
      "td_term": tf.reduce_mean(res["td"]), "regularizer_term": tf.reduce_mean(res["regularizer"]),
      "upper_gap": tf.reduce_mean(res["gap"]), "q_data": tf.reduce_mean(res["q_sa"]),
      "inverse_count": tf.reduce_mean(inv_count), "phi": phi,
  }


class UpperCCVLAgent(ccvl_agent.CCVLAgent):
  """Q_u(s, a, delta): CCVLAgent with the objective of Eq. (upper update) (see module doc).

  Reuses CCVLAgent's guarded train step, counts, target updates, checkpoint and confidence
  sampling; only the objective at the sampled confidences (`_objective_fn`) differs.
  """

  def __init__(self, time_step_spec, action_spec, config=ccvl_agent.CCVLConfig(),
               network_config=networks.QNetworkConfig(), bounds=BoundsConfig(), **kwargs):
    bounds.validate()
    self._bounds = bounds
    kwargs.setdefault("name", "UpperCCVLAgent")
    super().__init__(time_step_spec, action_spec, config, network_config, **kwargs)

  def _objective_fn(self, batch, delta, delta_1, delta_2, inverse_count_fn, training: bool):
    return ccvl_upper_objective(self._online, self._target, batch, delta, delta_1, delta_2,
                                inverse_count_fn, self._config, self._bounds,
                                training=training)


class CCVLBoundsAgent(tf.Module):
  """Lower and upper confidence-conditioned bounds trained side by side (see module doc)."""

  def __init__(self, time_step_spec, action_spec,
               config: ccvl_agent.CCVLConfig = ccvl_agent.CCVLConfig(),
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               bounds: BoundsConfig = BoundsConfig(),
               dataset_size: Optional[float] = None,
               inverse_count_fn: Optional[Callable] = None, name: str = "CCVLBoundsAgent"):
    """Args as CCVLAgent's, plus `bounds` (BoundsConfig). Q_u uses seed config.seed + 1."""
    super().__init__(name=name)
    bounds.validate()
    self._bounds = bounds
    self.lower = ccvl_agent.CCVLAgent(
        time_step_spec, action_spec, config, network_config, dataset_size=dataset_size,
        inverse_count_fn=inverse_count_fn, name="lower")
    self.upper = UpperCCVLAgent(
        time_step_spec, action_spec, dataclasses.replace(config, seed=config.seed + 1),
        network_config, bounds, dataset_size=dataset_size, inverse_count_fn=inverse_count_fn,
        name="upper")
    self._time_step_spec, self._action_spec = time_step_spec, action_spec
    self.bounds_policy = policies.BoundsPolicy(
        time_step_spec, action_spec, self.lower.q_network, self.upper.q_network,
        beta=bounds.beta, delta=bounds.explore_delta)
    self.exploration_policy = policies.epsilon_greedy(self.bounds_policy,
                                                      bounds.explore_epsilon)

  @property
  def bounds(self) -> BoundsConfig:
    return self._bounds

  @property
  def config(self) -> ccvl_agent.CCVLConfig:
    return self.lower.config

  @property
  def train_step_counter(self) -> tf.Variable:
    """The lower agent's counter (the upper one advances in lock step)."""
    return self.lower.train_step_counter

  @property
  def policy(self):
    """Fixed-delta greedy policy in Q_l (the safe policy)."""
    return self.lower.policy

  @property
  def q_network(self):
    return self.lower.q_network

  @property
  def upper_q_network(self):
    return self.upper.q_network

  def policy_variables(self) -> Dict[str, list]:
    """What actors need: the online weights of both bounds (tf.Variables)."""
    return {"lower": list(self.lower._online_vars),  # pylint: disable=protected-access
            "upper": list(self.upper._online_vars)}  # pylint: disable=protected-access

  @property
  def time_step_spec(self):
    return self._time_step_spec

  @property
  def action_spec(self):
    return self._action_spec

  def set_learning_rate(self, lr: float) -> None:
    """Adam learning rate of both bounds (e.g. a smaller one for online fine-tuning)."""
    for bound in (self.lower, self.upper):
      bound.optimizer.learning_rate.assign(lr)

  def copy_lower_to_upper(self) -> None:
    """Q_u <- Q_l (online and target weights): the start of Q_u when only Q_l was trained."""
    networks.copy_weights(self.lower.online_network, self.upper.online_network)
    networks.copy_weights(self.lower.online_network, self.upper.target_network)

  def make_checkpoint(self, **extra) -> tf.train.Checkpoint:
    """CCVLAgent layout for Q_l at the top level, plus `upper` (see module doc)."""
    return self.lower.make_checkpoint(upper=self.upper.make_checkpoint(), **extra)

  def train_on_batch(self, batch) -> Dict[str, tf.Tensor]:
    """One step of each bound on the same batch; metrics of Q_u are prefixed 'upper/'.

    Raises:
      NonFiniteLossError (FloatingPointError) from either bound (Q_l is stepped first: if only
      Q_u fails, Q_l has taken this step and the counters differ by one; stop and restore).
    """
    metrics = dict(self.lower.train_on_batch(batch))
    for k, v in self.upper.train_on_batch(batch).items():
      metrics[f"upper/{k}"] = v
    return metrics
