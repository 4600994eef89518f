"""DQNLearner: TF-Agents' DqnAgent behind the learner protocol (loss by hand, NaN, checkpoint)."""
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

import ccvl_tf  # noqa: F401
from ccvl_tf.agents import dqn_agent
from test_cql_agent import LINEAR, Q_HAND, hand_batch, specs


def make(**cfg):
  learner = dqn_agent.DQNLearner(*specs(), dqn_agent.DQNConfig(gamma=0.5, **cfg), LINEAR)
  # TF-Agents QNetwork variables: [fc kernel [2, 2], fc bias, q kernel [2, A], q bias].
  kernel, bias, q_kernel, q_bias = learner.agent._q_network.variables  # pylint: disable=protected-access
  kernel.assign(np.eye(2, dtype=np.float32))
  bias.assign(np.zeros(2, np.float32))
  q_kernel.assign(np.asarray(Q_HAND, np.float32))
  q_bias.assign(np.zeros(2, np.float32))
  learner.agent.initialize()          # target <- online
  return learner


def test_dqn_loss_by_hand_via_the_trajectory():
  """Q(s0) = [1, 0], Q(s1) = [0.5, 2], gamma 0.5, Huber (kappa 1):
  t1 (s0, a = 0): y = 1 + 0.5 * 2 = 2, x = 1 - 2 = -1 -> 0.5;  t2 (terminal, s1, a = 1): y = 0,
  x = 2 -> 1 * (2 - 0.5) = 1.5.  loss = (0.5 + 1.5) / 2 = 1.0.

  The gradient, with the identity torso (h(s_i) = onehot(i)): dL/dQ(s_b, a_b) = Huber'(x_b) / B
  = clip(x_b, -1, 1) / 2, so d loss / d (output kernel) = [[-0.5, 0], [0, 0.5]] and
  d loss / d (output bias) = [-0.5, 0.5]. Adam's first step moves every weight by
  lr * g / (|g| + eps') (m and v are bias-corrected to g and g^2): with lr = 0.1 and a tiny eps,
  by -0.1 sign(g), and not at all where g = 0:
    kernel [[1, 0], [0.5, 2]] -> [[1.1, 0], [0.5, 1.9]],  bias [0, 0] -> [0.1, -0.1].
  """
  learner = make(learning_rate=0.1, adam_epsilon=1e-10)
  step = learner.policy.action(ts.restart(tf.constant(np.eye(2, dtype=np.float32)),
                                          batch_size=2))
  np.testing.assert_array_equal(step.action.numpy(), [0, 1])   # argmax [1, 0], [0.5, 2]
  m = learner.train_on_batch(hand_batch())   # DqnAgent.train: its loss before the update
  np.testing.assert_allclose(float(m["loss"]), 1.0, rtol=1e-6)
  assert int(learner.train_step_counter.numpy()) == 1
  _, _, q_kernel, q_bias = learner.agent._q_network.variables  # pylint: disable=protected-access
  np.testing.assert_allclose(q_kernel.numpy(), [[1.1, 0.0], [0.5, 1.9]], atol=1e-5)
  np.testing.assert_allclose(q_bias.numpy(), [0.1, -0.1], atol=1e-5)


def test_tf_agents_public_loss_ignores_gamma():
  """A TF-Agents 0.19 quirk the wrapper lives with: DqnAgent.loss() calls _loss with its
  default gamma = 1.0 (only train() passes the agent's gamma). Here:
  t1: y = 1 + 1.0 * 2 = 3, x = -2 -> Huber 1.5; t2: terminal, x = 2 -> 1.5; mean 1.5.
  DQNLearner uses loss() only as a NaN/inf pre-check, which gamma does not change."""
  learner = make()
  loss = learner.agent.loss(learner.trajectory(hand_batch())).loss
  np.testing.assert_allclose(float(loss), 1.5, rtol=1e-6)


def test_nan_loss_raises_without_an_update_and_checkpoint_round_trip(tmp_path):
  learner = make()
  learner.train_on_batch(hand_batch())
  before = [v.numpy().copy() for v in learner.agent._q_network.variables]  # pylint: disable=protected-access
  with pytest.raises(FloatingPointError, match="DQN .*train step 1"):
    learner.train_on_batch(dict(hand_batch(), reward=np.array([np.nan, 0], np.float32)))
  assert int(learner.train_step_counter.numpy()) == 1
  for b, v in zip(before, learner.agent._q_network.variables):  # pylint: disable=protected-access
    np.testing.assert_array_equal(b, v.numpy())
  path = learner.make_checkpoint().save(str(tmp_path / "ckpt"))
  expected = float(learner.train_on_batch(hand_batch())["loss"])
  fresh = dqn_agent.DQNLearner(*specs(), learner.config, LINEAR)
  fresh.make_checkpoint().restore(path).assert_existing_objects_matched()
  assert int(fresh.train_step_counter.numpy()) == 1
  np.testing.assert_allclose(float(fresh.train_on_batch(hand_batch())["loss"]), expected,
                             rtol=1e-6)
