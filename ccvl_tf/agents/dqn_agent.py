"""DQN baseline: TF-Agents' own `DqnAgent`, wrapped to the interface `ccvl_tf.agents.learner.Learner`.

More in docs/agent.md "Module notes", `ccvl_tf/agents/dqn_agent.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import ccvl_tf  # noqa: F401

import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory as trajectory_lib
from tf_agents.utils import common

from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import networks



@dataclasses.dataclass(frozen=True)
class DQNConfig(q_agent_base.CommonQConfig):
  """DQN hyperparameters (Dopamine offline defaults): those of CommonQConfig (TF-Agents'
  DqnAgent has its own Huber TD loss and no DR3 term)."""


def _tf_agents_q_network(observation_spec, action_spec, config: networks.QNetworkConfig):
  networks.validate_observation_spec(observation_spec.shape, observation_spec.dtype,
                                     config.torso)
  if config.torso == "nature":
    pre = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32) / 255.0)
    conv, fc = ((32, 8, 4), (64, 4, 2), (64, 3, 1)), (config.torso_units,)
  elif config.torso == "minatar":
    pre = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32))
    conv, fc = ((16, 3, 1),), (config.torso_units,)
  else:
    pre = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32))
    conv, fc = None, tuple(int(u) for u in config.mlp_units)
  return q_network.QNetwork(observation_spec, action_spec, preprocessing_layers=pre,
                            conv_layer_params=conv, fc_layer_params=fc)


class DQNLearner(tf.Module):
  """TF-Agents DqnAgent behind train_on_batch / make_checkpoint / train_step_counter."""

  AGENT_NAME = "DQN"

  def __init__(self, time_step_spec, action_spec, config: DQNConfig = DQNConfig(),
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               train_step_counter: Optional[tf.Variable] = None, name: str = "DQNLearner"):
    super().__init__(name=name)
    config.validate()
    self._config = config
    self._action_min, self._num_actions = q_agent_base.num_actions_of(action_spec, "DQN")
    self._action_dtype = action_spec.dtype
    if train_step_counter is None:
      train_step_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    tf.random.set_seed(config.seed)  # QNetwork's initializers draw from the global seed
    self._q_net = _tf_agents_q_network(time_step_spec.observation, action_spec, network_config)
    self._optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate,
                                               epsilon=config.adam_epsilon)
    self._agent = dqn_agent.DqnAgent(
        time_step_spec, action_spec, q_network=self._q_net, optimizer=self._optimizer,
        epsilon_greedy=config.collect_epsilon, target_update_period=config.target_update_period,
        td_errors_loss_fn=common.element_wise_huber_loss, gamma=config.gamma,
        train_step_counter=train_step_counter)
    self._agent.initialize()
    self._loss_fn = common.function(self._agent.loss)
    # TFAgent.train runs eagerly in TF2 unless wrapped (TF-Agents' usual `common.function`).
    self._train_fn = common.function(self._agent.train)

  @property
  def agent(self) -> dqn_agent.DqnAgent:
    return self._agent

  @property
  def config(self) -> DQNConfig:
    return self._config

  @property
  def train_step_counter(self) -> tf.Variable:
    return self._agent.train_step_counter

  @property
  def policy(self):
    """Greedy Q policy (TF-Agents GreedyPolicy)."""
    return self._agent.policy

  @property
  def collect_policy(self):
    return self._agent.collect_policy

  def evaluation_policy(self, **unused):
    return self._agent.policy

  def make_checkpoint(self, **extra) -> tf.train.Checkpoint:
    """Q-network, target network, Adam and the train step (TF-Agents' checkpoint layout)."""
    return tf.train.Checkpoint(agent=self._agent, optimizer=self._optimizer,
                               train_step=self.train_step_counter, **extra)

  def trajectory(self, batch: Dict) -> trajectory_lib.Trajectory:
    """A contract transition dict -> the Trajectory [B, 2, ...] DqnAgent trains on."""
    obs = tf.convert_to_tensor(batch["observation"])
    next_obs = tf.convert_to_tensor(batch["next_observation"])
    terminal = tf.cast(tf.convert_to_tensor(batch["terminal"]), tf.float32)      # [B]
    b = tf.shape(obs)[0]
    mid = tf.fill([b], ts.StepType.MID)
    last = tf.where(terminal > 0, tf.fill([b], ts.StepType.LAST), mid)          # [B]
    action = tf.cast(batch["action"], self._action_dtype)                        # [B]
    return trajectory_lib.Trajectory(
        step_type=tf.stack([mid, last], 1),                                      # [B, 2]
        observation=tf.stack([obs, next_obs], 1),                                # [B, 2, ...]
        action=tf.stack([action, action], 1),
        policy_info=(),
        next_step_type=tf.stack([last, mid], 1),
        reward=tf.stack([tf.cast(batch["reward"], tf.float32), tf.zeros([b])], 1),
        discount=tf.stack([1.0 - terminal, tf.ones([b])], 1))

  def train_on_batch(self, batch: Dict) -> Dict[str, tf.Tensor]:
    """One DqnAgent.train step; raises NonFiniteLossError (no update) on a NaN/inf loss."""
    for k in q_agent_base.BATCH_KEYS:
      if k not in batch:
        raise ValueError(f"transition batch is missing key {k!r}; it needs "
                         f"{q_agent_base.BATCH_KEYS}")
    experience = self.trajectory(batch)
    loss = self._loss_fn(experience).loss
    if not bool(tf.math.is_finite(loss)):
      raise q_agent_base.NonFiniteLossError(
          self.AGENT_NAME, int(self.train_step_counter.numpy()), float(loss))
    info = self._train_fn(experience)
    return {"loss": info.loss, "td_loss": info.extra.td_loss}
