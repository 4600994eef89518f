"""REMAgent: Random Ensemble Mixture (Agarwal, Schuurmans & Norouzi, ICML 2020, "An Optimistic
Perspective on Offline Reinforcement Learning"; google-research/batch_rl).

More in docs/agent.md "Module notes", `ccvl_tf/agents/rem_agent.py`.
"""
from __future__ import annotations

import dataclasses

import ccvl_tf  # noqa: F401

import tensorflow as tf

from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import losses
from ccvl_tf.runtime.config_flags import setting



@dataclasses.dataclass(frozen=True)
class REMConfig(q_agent_base.BaseQConfig):
  """REM hyperparameters. num_heads: H, the heads mixed by the random convex combination."""
  num_heads: int = setting(200, "H, the heads mixed by the random convex combination.",
                           lower_bound=1)


def rem_objective(q_heads, next_q_heads, weights, batch, config, dr3=None):
  """REM loss from online heads [B, H, A], target heads [B, H, A] and alpha [H]."""
  q = losses.convex_combination(q_heads, weights)                      # [B, A]
  next_q = losses.convex_combination(next_q_heads, weights)            # [B, A]
  target = losses.td_targets(batch["reward"], batch["terminal"], config.gamma,
                             next_q[:, None, :])[:, 0]                  # [B]
  res = losses.cql_loss(q, batch["action"], target, 0.0, config.td_loss, config.huber_kappa)
  dr3 = tf.zeros([]) if dr3 is None else dr3
  return {"loss": res["loss"] + config.dr3_coef * dr3, "td_term": res["loss"],
          "q_data": tf.reduce_mean(res["q_sa"]), "dr3_penalty": dr3,
          "max_weight": tf.reduce_max(weights)}


class REMAgent(q_agent_base.OfflineQAgent):
  """Random Ensemble Mixture over H heads (see the module notes)."""

  AGENT_NAME = "REM"
  CONFIG = REMConfig

  def _num_heads(self, config) -> int:
    return config.num_heads

  def mixture_weights(self, seed) -> tf.Tensor:
    """alpha [H] of the step with stateless seed `seed` (what `_objective` uses)."""
    return losses.rem_weights(self._config.num_heads, seed=tf.cast(seed, tf.int64))

  def _objective(self, batch, seed, training):
    q, phi, next_q, next_phi = self._forward(batch, training)           # [B, 1, H, A] ...
    weights = self.mixture_weights(seed)                                # [H], redrawn per step
    return rem_objective(q[:, 0], next_q[:, 0], weights, batch, self._config,
                         self._dr3(phi, next_phi) if next_phi is not None else None)
