"""BCAgent: the cross-entropy loss and its gradient by hand on a linear network, the
agent learning a state-dependent policy, registry and export plumbing."""
import math

import numpy as np
import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.agents import bc_agent
from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import losses
from ccvl_tf.experiments import agent_registry

from test_cql_agent import LINEAR, set_linear_q, specs

# Logits l(s0) = [1, 0], l(s1) = [0.5, 2]; data actions a(s0) = 0, a(s1) = 0.
L_HAND = [[1.0, 0.0], [0.5, 2.0]]


def batch(actions=(0, 0)):
  return dict(observation=np.eye(2, dtype=np.float32), action=np.array(actions, np.int32),
              reward=np.zeros(2, np.float32), next_observation=np.eye(2, dtype=np.float32),
              terminal=np.zeros(2, np.float32))


def make(**cfg):
  agent = bc_agent.BCAgent(*specs(), bc_agent.BCConfig(**cfg), LINEAR)
  set_linear_q(agent.online_network, [L_HAND])
  return agent


def test_bc_loss_by_hand():
  # s0: CE = log(e^1 + e^0) - 1 = 0.3132617; s1 (a = 0): log(e^0.5 + e^2) - 0.5 = 1.7014133.
  # mean CE = 1.0073375; logits^2 mean = (1 + 0 + 0.25 + 4) / 4 = 1.3125;
  # beta 0.5: loss = 1.0073375 + 0.65625 = 1.6635875. argmax (0, 1) vs data (0, 0): 1/2.
  res = losses.bc_loss(tf.constant(L_HAND), tf.constant([0, 0]), logit_penalty=0.5)
  np.testing.assert_allclose(res["cross_entropy"].numpy(), [0.3132617, 1.7014133], rtol=1e-5)
  np.testing.assert_allclose(float(res["logit_l2"]), 1.3125, rtol=1e-6)
  np.testing.assert_allclose(float(res["loss"]), 1.6635875, rtol=1e-5)
  assert float(res["accuracy"]) == 0.5
  m = make().loss(batch()).extra  # the agent: the same numbers through its network
  np.testing.assert_allclose(float(m["loss"]), 1.6635875, rtol=1e-5)
  np.testing.assert_allclose(float(m["cross_entropy"]), 1.0073375, rtol=1e-5)
  with pytest.raises(ValueError, match="logit_penalty"):
    losses.bc_loss(tf.constant(L_HAND), tf.constant([0, 0]), logit_penalty=-1.0)


def test_bc_gradient_by_hand():
  """d loss / d l(s, a) = (softmax(l(s))_a - 1[a = a_D]) / B + 2 beta l(s, a) / (B A).
  s0: softmax = (0.7310586, 0.2689414); s1: (0.1824255, 0.8175745); B = 2, A = 2, beta = 0.5.
  With the identity torso the output kernel's gradient is that matrix (row i = state i)."""
  agent = make(logit_penalty=0.5)
  prepared = agent.prepare_batch(batch())
  _, grads = agent.loss_and_grads(prepared, agent.step_seed())
  names = [v.path for v in agent.online_network.trainable_variables]
  kernel = grads[[i for i, n in enumerate(names) if n.endswith("_q/kernel")][0]].numpy()
  sm0 = np.array([math.e, 1.0]) / (math.e + 1.0)
  sm1 = np.exp([0.5, 2.0]) / np.exp([0.5, 2.0]).sum()
  l = np.array(L_HAND)
  expected = np.stack([sm0 - [1, 0], sm1 - [1, 0]]) / 2 + 2 * 0.5 * l / 4
  np.testing.assert_allclose(kernel, expected, rtol=1e-5)


def test_bc_learns_a_state_dependent_policy_and_registry_builds_it():
  """Data: action 1 in s0, action 0 in s1. BC (lr 0.01, a 16-unit MLP at its initial weights)
  must end up greedy-correct in both, through the evaluation policy; the registry builds BC
  with its own defaults. (The 2-unit identity torso of the hand tests is not used here: Adam's
  first sign-sized steps kill both of its ReLUs, and then no policy can depend on the state.)"""
  from ccvl_tf.algorithm import networks
  import keras
  keras.utils.set_random_seed(0)
  agent = bc_agent.BCAgent(*specs(), bc_agent.BCConfig(learning_rate=0.01),
                           networks.QNetworkConfig(torso="mlp", mlp_units=(16,)))
  for _ in range(100):
    m = agent.train_on_batch(batch(actions=(1, 0)))
  assert float(m["accuracy"]) == 1.0
  from tf_agents.trajectories import time_step as ts
  step = ts.restart(tf.constant(np.eye(2, dtype=np.float32)), batch_size=2)
  np.testing.assert_array_equal(agent.policy.action(step).action.numpy(), [1, 0])
  built = agent_registry.get_agent_spec("bc").build(
      *specs(), agent_registry.AgentSettings(network_config=LINEAR))
  assert isinstance(built, bc_agent.BCAgent)
  assert built.config.learning_rate == 1e-3 and built.config.adam_epsilon == 1e-8
  assert built.config.logit_penalty == 0.5
  with pytest.raises(ValueError, match="logit_penalty must be"):
    bc_agent.BCConfig(logit_penalty=float("nan")).validate()


def test_feature_metrics_by_hand():
  """phi rows (0, 2, 0), (0, 0, 0), (1, 1, 0): unit 2 is 0 everywhere -> 1/3 dead; one state of
  three is all-zero -> 1/3; |phi|^2 = 4, 0, 2 -> mean 2."""
  phi = tf.constant([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
  m = q_agent_base.feature_metrics(phi)
  np.testing.assert_allclose(float(m["phi_dead_fraction"]), 1 / 3, rtol=1e-6)
  np.testing.assert_allclose(float(m["phi_zero_states"]), 1 / 3, rtol=1e-6)
  np.testing.assert_allclose(float(m["phi_sq_norm"]), 2.0, rtol=1e-6)
  m3 = q_agent_base.feature_metrics(tf.reshape(phi, [3, 1, 3]))  # ensembles [B, E, D]
  np.testing.assert_allclose(float(m3["phi_dead_fraction"]), 1 / 3, rtol=1e-6)
