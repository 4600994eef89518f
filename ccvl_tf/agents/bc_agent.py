"""BCAgent: discrete behaviour cloning, the anchor of every offline-RL table.

One train step on a batch of B transitions (s, a_D, ...) (only s and a_D are used):

  l(s, .) = the network's outputs [B, A], read as the logits of pi(a | s) = softmax(l)
  loss    = mean_B [ logsumexp_a l(s, a) - l(s, a_D) ] + beta mean_{B, A} l(s, a)^2

(`ccvl_tf.algorithm.losses.bc_loss`). The network is the same one CQL trains (`build_q_ensemble`,
E = H = 1: Nature conv, MLP or MinAtar torso + one linear layer), so BC and CQL differ only in the
objective; the policy acts greedily in l (argmax_a pi(a | s)), through the same contract model
and `FixedDeltaPolicy` as CQL, so it exports and evaluates like every other agent.

BC answers a question the value-based methods cannot: is the data learnable at all with this
network, data size and step budget? On good data every conservative method should at least
approach it.

Defaults are d3rlpy 2.8.1's `DiscreteBCConfig` (lr 1e-3, beta 0.5, Adam epsilon 1e-8 -- its Adam
default, not Dopamine's 3.125e-4). gamma and the target network are unused (no bootstrapping);
the target copy is kept only so the checkpoint layout matches the other agents.
"""
from __future__ import annotations

import dataclasses

import ccvl_tf  # noqa: F401

import tensorflow as tf

from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import losses
from ccvl_tf.runtime.config_flags import redeclare, setting



@dataclasses.dataclass(frozen=True)
class BCConfig(q_agent_base.CommonQConfig):
  """Behaviour-cloning hyperparameters (d3rlpy's DiscreteBC defaults: Adam 1e-3, 1e-8;
  beta 0.5)."""
  learning_rate: float = redeclare(q_agent_base.CommonQConfig, "learning_rate", 1e-3)
  adam_epsilon: float = redeclare(q_agent_base.CommonQConfig, "adam_epsilon", 1e-8)
  logit_penalty: float = setting(0.5, "beta, weight of mean l(s, a)^2 (d3rlpy: 0.5).",
                                 lower_bound=0.0)


class BCAgent(q_agent_base.OfflineQAgent):
  """Discrete behaviour cloning on the shared torso (see the module docstring)."""

  AGENT_NAME = "BC"
  CONFIG = BCConfig


  def _objective(self, batch, seed, training):
    del seed  # deterministic objective
    out = self._online.q_and_phi_model({"observation": batch["observation"]}, training=training)
    logits, phi = out["q"][:, 0, 0], out["phi"][:, 0]                   # [B, A], [B, D]
    res = losses.bc_loss(logits, batch["action"], self._config.logit_penalty)
    metrics = {"loss": res["loss"], "cross_entropy": tf.reduce_mean(res["cross_entropy"]),
               "logit_l2": res["logit_l2"], "accuracy": res["accuracy"]}
    metrics.update(q_agent_base.feature_metrics(phi))
    return metrics
