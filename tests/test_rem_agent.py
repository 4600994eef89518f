"""REMAgent: convex weights, the loss and its gradient by hand on a 2-head linear network, NaN,
checkpoints."""
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

import ccvl_tf  # noqa: F401
from ccvl_tf.agents import rem_agent
from ccvl_tf.algorithm import losses
from test_cql_agent import LINEAR, hand_batch, set_linear_q, specs

# Two heads on the identity torso, A = 2. Output unit h * A + a is head h, action a:
# head 0: Q0(s0) = [1, 0], Q0(s1) = [0, 1];  head 1: Q1(s0) = [3, 1], Q1(s1) = [2, 0].
HEADS = [[1.0, 0.0, 3.0, 1.0],
         [0.0, 1.0, 2.0, 0.0]]


def make(num_heads=2, **cfg):
  base = dict(num_heads=num_heads, gamma=0.5, td_loss="squared", learning_rate=1e-2)
  base.update(cfg)
  agent = rem_agent.REMAgent(*specs(), rem_agent.REMConfig(**base), LINEAR)
  if num_heads == 2:
    set_linear_q(agent.online_network, [HEADS])
    set_linear_q(agent.target_network, [HEADS])
  return agent


def test_rem_weights_are_convex_per_draw_and_redrawn():
  draws = [losses.rem_weights(200, seed=tf.constant([0, i], tf.int64)).numpy()
           for i in range(5)]
  for w in draws:
    assert w.shape == (200,) and (w >= 0).all()
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-5)
  assert not np.allclose(draws[0], draws[1])             # a new combination every step
  np.testing.assert_array_equal(                          # stateless: reproducible
      draws[2], losses.rem_weights(200, seed=tf.constant([0, 2], tf.int64)).numpy())
  # u ~ U(0, 1) normalized: the mean weight is 1/H, none dominates.
  assert np.max(draws) < 0.05
  with pytest.raises(ValueError, match="num_heads"):
    losses.rem_weights(0)


def test_rem_loss_by_hand():
  # alpha = [0.25, 0.75]:  Q(s0) = 0.25 [1, 0] + 0.75 [3, 1] = [2.5, 0.75]
  #                        Q(s1) = 0.25 [0, 1] + 0.75 [2, 0] = [1.5, 0.25]
  # t1: y = 1 + 0.5 max(1.5, 0.25) = 1.75, Q(s0, 0) = 2.5: TD = 0.5 * 0.75^2 = 0.28125
  # t2: y = 0 (terminal), Q(s1, 1) = 0.25: TD = 0.5 * 0.25^2 = 0.03125
  # loss = (0.28125 + 0.03125) / 2 = 0.15625
  agent = make()
  batch = agent.prepare_batch(hand_batch())
  q, _, next_q, _ = agent._forward(batch, training=False)             # [B, 1, H, A]
  out = rem_agent.rem_objective(q[:, 0], next_q[:, 0], tf.constant([0.25, 0.75]), batch,
                                agent.config)
  np.testing.assert_allclose(float(out["loss"]), 0.15625, rtol=1e-6)
  np.testing.assert_allclose(
      losses.convex_combination(q[:, 0], tf.constant([0.25, 0.75])).numpy(),
      [[2.5, 0.75], [1.5, 0.25]], rtol=1e-6)


def test_rem_gradient_by_hand_each_head_gets_its_mixture_weight():
  """rem_objective on the heads above, alpha = [0.25, 0.75], squared TD, B = 2 (numbers of
  test_rem_loss_by_hand): loss = 1/B sum_b 1/2 (Q(s_b, a_b) - y_b)^2 on the mixture
  Q = sum_k alpha_k Q_k, so dL/dQ_k(s_b, a) = alpha_k (1/B) x_b onehot(a_b):

    t1 (s0, a = 0): x = 2.5 - 1.75 = 0.75 -> dL/dQ(s0) = [0.375, 0]
                    head 0: 0.25 [0.375, 0] = [0.09375, 0]; head 1: 0.75 [0.375, 0] = [0.28125, 0]
    t2 (s1, a = 1): x = 0.25 - 0 = 0.25   -> dL/dQ(s1) = [0, 0.125]
                    head 0: [0, 0.03125]; head 1: [0, 0.09375]
  The target heads get no gradient.
  """
  agent = make()
  batch = agent.prepare_batch(hand_batch())
  q, _, next_q, _ = agent._forward(batch, training=False)             # [B, 1, H, A]
  q, next_q = q[:, 0], next_q[:, 0]
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([q, next_q])
    out = rem_agent.rem_objective(q, next_q, tf.constant([0.25, 0.75]), batch, agent.config)
  np.testing.assert_allclose(out["loss"].numpy(), 0.15625, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(out["loss"], q).numpy(),
                             [[[0.09375, 0.0], [0.28125, 0.0]],
                              [[0.0, 0.03125], [0.0, 0.09375]]], rtol=1e-6, atol=1e-8)
  assert tape.gradient(out["loss"], next_q) is None


def test_agent_uses_the_step_weights_for_online_and_target():
  agent = make()
  seed = agent.step_seed()
  w = agent.mixture_weights(seed).numpy()
  np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-6)
  # By hand with these weights: Q(s0) = w0 [1, 0] + w1 [3, 1], Q(s1) = w0 [0, 1] + w1 [2, 0]
  q_s0_a0, q_s1 = w[0] + 3 * w[1], np.array([2 * w[1], w[0]])
  y1 = 1.0 + 0.5 * q_s1.max()
  expected = (0.5 * (q_s0_a0 - y1) ** 2 + 0.5 * q_s1[1] ** 2) / 2
  np.testing.assert_allclose(float(agent.loss(hand_batch()).loss), expected, rtol=1e-5)
  agent.train_on_batch(hand_batch())
  assert not np.allclose(agent.mixture_weights(agent.step_seed()).numpy(), w)  # redrawn


def test_policy_acts_on_the_mean_of_heads():
  agent = make()
  # mean heads: Q(s0) = [2, 0.5] -> 0;  Q(s1) = [1, 0.5] -> 0
  step = agent.policy.action(ts.restart(tf.constant(np.eye(2, dtype=np.float32)), batch_size=2))
  np.testing.assert_array_equal(step.action.numpy(), [0, 0])
  q = agent.q_network({"observation": np.eye(2, dtype=np.float32),
                       "delta": np.full([2, 3], 0.5, np.float32)}).numpy()   # [B, K, A]
  np.testing.assert_allclose(q[:, 0], [[2.0, 0.5], [1.0, 0.5]], rtol=1e-6)
  np.testing.assert_allclose(q[:, 0], q[:, 2])                          # delta is ignored


def test_default_is_200_heads_and_nan_and_checkpoint(tmp_path):
  assert rem_agent.REMConfig().num_heads == 200
  agent = make(num_heads=200)
  assert agent.online_network.q_model.output.shape[-2:] == (200, 2)
  agent.train_on_batch(hand_batch())
  before = [v.numpy().copy() for v in agent.online_network.variables]
  with pytest.raises(FloatingPointError, match="REM"):
    agent.train_on_batch(dict(hand_batch(), reward=np.array([np.inf, 0], np.float32)))
  for b, v in zip(before, agent.online_network.variables):
    np.testing.assert_array_equal(b, v.numpy())
  path = agent.make_checkpoint().save(str(tmp_path / "ckpt"))
  expected = float(agent.train_on_batch(hand_batch())["loss"])
  fresh = make(num_heads=200)
  fresh.make_checkpoint().restore(path).assert_existing_objects_matched()
  np.testing.assert_allclose(float(fresh.train_on_batch(hand_batch())["loss"]), expected,
                             rtol=1e-6)
