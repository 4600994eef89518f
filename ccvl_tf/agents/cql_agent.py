"""CQLAgent: discrete conservative Q-learning (Kumar et al. 2020) in the DR3 setup.

One train step on a batch of B transitions (s, a_D, r, s', terminal):

  y    = r + gamma (1 - terminal) max_a' Q_target(s', a')                  [B]
  loss = mean_B [ TD(Q(s, a_D) - y) + alpha (logsumexp_a Q(s, a) - Q(s, a_D)) ]
         + c_DR3 mean_B |phi(s) . phi(s')|                                  (optional)

with TD = Huber (Dopamine / DR3) or x^2 / 2. Pieces: `ccvl_tf.algorithm.losses.td_targets`,
`cql_loss` (= `td_loss` + alpha * `cql_gap`), `dr3_penalty`. The network is the DQN
architecture on the shared torso (`ccvl_tf.algorithm.q_ensemble.build_q_ensemble`, E = H = 1: Nature
conv, MLP or MinAtar torso + one linear layer), so CQL differs from CCVL's Fixed-delta policy only
in the objective. The guarded step, checkpointing and Trajectory input come from
`ccvl_tf/agents/q_agent_base.py`.

Defaults: alpha = 0.1 and c_DR3 = 0.03 are the values CCVLConfig uses for the same DR3 setup
(see docs/agent.md: unverified recollections of Kumar et al. 2022, Table E.1; the paper says
the CQL baseline uses exactly DR3's configuration). Adam lr 5e-5, eps 3.125e-4, gamma 0.99,
target period 2000 (paper / Dopamine offline).
"""
from __future__ import annotations

import dataclasses

import ccvl_tf  # noqa: F401

import tensorflow as tf

from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import losses
from ccvl_tf.runtime.config_flags import redeclare, setting



@dataclasses.dataclass(frozen=True)
class CQLConfig(q_agent_base.BaseQConfig):
  """CQL hyperparameters. alpha: weight of the CQL(H) gap (>= 0); the rest as BaseQConfig."""
  alpha: float = setting(0.1, "alpha, weight of the CQL(H) gap.", lower_bound=0.0)
  dr3_coef: float = redeclare(q_agent_base.BaseQConfig, "dr3_coef", 0.03)


def cql_objective(q, next_q, batch, config, dr3=None):
  """CQL loss from online Q(s, .) [B, A] and target Q(s', .) [B, A] (the network plumbing).

  Returns dict of scalars: 'loss' (CQL + c * DR3), 'cql_loss', 'td_term', 'cql_gap', 'q_data',
  'dr3_penalty'.
  """
  target = losses.td_targets(batch["reward"], batch["terminal"], config.gamma,
                             next_q[:, None, :])[:, 0]                   # [B, 1, A] -> [B]
  res = losses.cql_loss(q, batch["action"], target, config.alpha, config.td_loss,
                        config.huber_kappa)
  dr3 = tf.zeros([]) if dr3 is None else dr3
  return {"loss": res["loss"] + config.dr3_coef * dr3, "cql_loss": res["loss"],
          "td_term": tf.reduce_mean(res["td"]), "cql_gap": tf.reduce_mean(res["gap"]),
          "q_data": tf.reduce_mean(res["q_sa"]), "dr3_penalty": dr3}


class CQLAgent(q_agent_base.OfflineQAgent):
  """Discrete CQL(H) with optional DR3 (see the module docstring)."""

  AGENT_NAME = "CQL"
  CONFIG = CQLConfig


  def _objective(self, batch, seed, training):
    del seed  # deterministic objective
    q, phi, next_q, next_phi = self._forward(batch, training)           # [B, 1, 1, A] ...
    metrics = cql_objective(q[:, 0, 0], next_q[:, 0, 0], batch, self._config,
                            self._dr3(phi, next_phi) if next_phi is not None else None)
    metrics.update(q_agent_base.feature_metrics(phi))
    return metrics
