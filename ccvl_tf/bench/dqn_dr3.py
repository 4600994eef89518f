"""TF-Agents' DqnAgent plus DR3, with one torso pass over [s; s']: the like-for-like baseline
of the speed benchmark (CCVL's defaults train with DR3; plain DqnAgent has none).

DR3 (Kumar et al. 2021) adds c * mean_b |phi(s_b) . phi(s'_b)| to the TD loss, phi being the
penultimate (torso) features of the online network, with gradients through both phi(s) and
phi(s'). `DqnDR3Agent` computes it the way CCVL does: the online encoder runs once over the
2B frames [s; s'], the Q-value layer only on s. Everything else is DqnAgent's own loss: the
target network's Q(s'), `compute_td_targets`, the element-wise Huber loss, the valid-step mask
and `common.aggregate_losses` (a per-example mean over the batch), so with c = 0 it is
DqnAgent's loss exactly (tests/test_benchmark.py checks the DR3 term by hand).
"""
from __future__ import annotations

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
from tf_agents.agents import tf_agent
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.utils import common

from ccvl_tf.algorithm import fused_adam


class EncoderQNetwork(q_network.QNetwork):
  """TF-Agents' QNetwork (same layers, same initializers), its two parts exposed: the
  encoder psi(s) (conv + fc layers) and the Q-value layer."""

  @property
  def encoder(self):
    return self._encoder

  @property
  def q_value_layer(self):
    return self._q_value_layer


class FusedAdam(tf.Module):
  """Adam for tf.Variables with TensorFlow's fused kernel
  (`ccvl_tf.algorithm.fused_adam.apply_slots`, the update CCVL's learners use), exposing
  `apply_gradients` for TF-Agents' agents. Slots are created up front for `variables` (the network
  must be built)."""

  def __init__(self, variables, learning_rate: float, epsilon: float = 1e-7,
               beta_1: float = 0.9, beta_2: float = 0.999):
    super().__init__(name="fused_adam")
    self._variables = list(variables)
    self._m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self._variables]
    self._v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self._variables]
    self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._lr, self._eps, self._b1, self._b2 = learning_rate, epsilon, beta_1, beta_2

  def apply_gradients(self, grads_and_vars):
    slot = {id(v): i for i, v in enumerate(self._variables)}
    grads, variables, ms, vs = [], [], [], []
    for g, v in grads_and_vars:
      i = slot[id(v)]
      grads.append(g)
      variables.append(v)
      ms.append(self._m[i])
      vs.append(self._v[i])
    fused_adam.apply_slots(grads, variables, ms, vs, self.iterations, self._lr, self._b1,
                           self._b2, self._eps)


def dr3_penalty(phi, next_phi):
  """mean_b |phi_b . phi'_b| for [B, D] features (DR3's implicit regularizer)."""
  return tf.reduce_mean(tf.abs(tf.reduce_sum(phi * next_phi, axis=-1)))


class DqnDR3Agent(dqn_agent.DqnAgent):
  """DqnAgent whose loss adds `dr3_coef` * DR3 from one encoder pass over [s; s'].

  Needs an EncoderQNetwork (a single, non-recurrent observation)."""

  def __init__(self, *args, dr3_coef: float = 0.03, **kwargs):
    super().__init__(*args, **kwargs)
    if not isinstance(self._q_network, EncoderQNetwork):
      raise TypeError(f"DqnDR3Agent needs an EncoderQNetwork, got "
                      f"{type(self._q_network).__name__}")
    self._dr3_coef = float(dr3_coef)

  def _loss(self, experience, td_errors_loss_fn=None, gamma=1.0, reward_scale_factor=1.0,
            weights=None, training=False):
    time_steps, policy_steps, next_time_steps = self._as_transition(experience)
    self._td_errors_loss_fn = td_errors_loss_fn or self._td_errors_loss_fn
    net = self._q_network
    if self._dr3_coef > 0:
      b = tf.shape(time_steps.observation)[0]
      both = tf.concat([time_steps.observation, next_time_steps.observation], 0)  # [2B, ...]
      features, _ = net.encoder(both, training=training)                       # [2B, D]
      phi, next_phi = features[:b], features[b:]                               # [B, D] each
    else:
      phi, _ = net.encoder(time_steps.observation, training=training)          # [B, D]
      next_phi = None
    q_all = net.q_value_layer(phi, training=training)                          # [B, A]
    q_values = common.index_with_actions(
        q_all, tf.cast(policy_steps.action, tf.int32))                         # [B]
    # max_a' Q_target(s', a'): one target pass. (DqnAgent's _compute_next_q_values runs the
    # target network a second time inside its greedy target policy to pick the argmax.)
    next_q_all, _ = self._target_q_network(next_time_steps.observation,
                                           step_type=next_time_steps.step_type)  # [B, A]
    next_q_values = tf.reduce_max(next_q_all, axis=-1)                         # [B]
    td_loss, td_error = self._td_loss(q_values, next_q_values,
                                      reward_scale_factor * next_time_steps.reward,
                                      gamma * next_time_steps.discount)
    valid_mask = tf.cast(~time_steps.is_last(), tf.float32)
    agg = common.aggregate_losses(per_example_loss=valid_mask * td_loss, sample_weight=weights,
                                  regularization_loss=net.losses)
    dr3 = dr3_penalty(phi, next_phi) if next_phi is not None else 0.0
    return tf_agent.LossInfo(agg.total_loss + self._dr3_coef * dr3,
                             dqn_agent.DqnLossInfo(td_loss=td_loss,
                                                   td_error=valid_mask * td_error))
