"""AEVLAgent: adaptive ensemble value learning (the paper's ablation; a discrete-action APE-V,
Ghosh et al. 2022).

More in docs/agent.md "Module notes", `ccvl_tf/agents/aevl_agent.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import ccvl_tf  # noqa: F401

import tensorflow as tf

from ccvl_tf.agents import cql_agent
from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.runtime.config_flags import setting



@dataclasses.dataclass(frozen=True)
class AEVLConfig(cql_agent.CQLConfig):
  """AEVL hyperparameters: CQL's, plus E (`num_members`) and the belief's temperature T."""
  num_members: int = setting(4, "E, independently initialized ensemble members.",
                             lower_bound=1)
  belief_temperature: float = setting(
      1.0, "T of the belief update log b <- log b - e / T.", above=0.0)
  sample_member: bool = setting(
      True, "Draw the member from the belief (as CCVL) or take its argmax.")
  reward_clip: Optional[float] = setting(
      None, "Clip rewards to [-c, c] when scoring Bellman errors (None: no clipping).")


class AEVLAgent(q_agent_base.OfflineQAgent):
  """Ensemble of E CQL networks acted with the adaptive belief over members."""

  AGENT_NAME = "AEVL"

  def __init__(self, time_step_spec, action_spec, config: AEVLConfig = AEVLConfig(),
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               train_step_counter: Optional[tf.Variable] = None, name: str = "AEVLAgent"):
    self._setup(time_step_spec, action_spec, config, network_config,
                num_members=config.num_members, num_heads=1, contract_mode="member",
                train_step_counter=train_step_counter, name=name)

  def _adaptive(self, time_step_spec, action_spec, seed: Optional[int] = None,
                temperature: Optional[float] = None):
    cfg = self._config
    return policies.ConfidenceAdaptivePolicy(
        time_step_spec, action_spec, self._contract, num_grid_deltas=cfg.num_members,
        gamma=cfg.gamma, temperature=cfg.belief_temperature if temperature is None
        else temperature, sample_delta=cfg.sample_member,
        seed=cfg.seed if seed is None else seed, reward_clip=cfg.reward_clip)

  def adaptive_policy(self, seed: Optional[int] = None, temperature: Optional[float] = None):
    """ConfidenceAdaptivePolicy over the E members (see the module notes)."""
    return self._adaptive(self.time_step_spec, self.action_spec, seed, temperature)

  def _make_policy(self, time_step_spec, action_spec):
    return self._adaptive(time_step_spec, action_spec)

  def evaluation_policy(self, seed: Optional[int] = None, temperature: Optional[float] = None,
                        **unused):
    return self.adaptive_policy(seed=seed, temperature=temperature)

  def _objective(self, batch, seed, training):
    del seed
    cfg = self._config
    q, phi, next_q, next_phi = self._forward(batch, training)           # [B, E, 1, A] ...
    q, next_q = q[:, :, 0], next_q[:, :, 0]                             # [B, E, A]
    target = losses.td_targets(batch["reward"], batch["terminal"], cfg.gamma, next_q)  # [B, E]
    res = losses.cql_loss(q, batch["action"], target, cfg.alpha, cfg.td_loss,
                          cfg.huber_kappa)                              # mean over B and E
    members = tf.cast(tf.shape(q)[1], tf.float32)
    ensemble_loss = members * res["loss"]                               # sum_e of member means
    dr3 = self._dr3(phi, next_phi)
    return {"loss": ensemble_loss + cfg.dr3_coef * dr3, "cql_loss": ensemble_loss,
            "td_term": tf.reduce_mean(res["td"]), "cql_gap": tf.reduce_mean(res["gap"]),
            "q_data": tf.reduce_mean(res["q_sa"]), "dr3_penalty": dr3,
            "member_q_spread": tf.reduce_mean(tf.math.reduce_std(res["q_sa"], axis=1))}
