"""AEVLAgent: distinct member initializations, the ensemble loss by hand, the belief over
members (ConfidenceAdaptivePolicy with deltas indexing members), NaN, checkpoints."""
import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

import ccvl_tf  # noqa: F401
from ccvl_tf.agents import aevl_agent
from ccvl_tf.algorithm import belief, networks, policies, q_ensemble
from test_cql_agent import LINEAR, Q_HAND, hand_batch, head_gradients, set_linear_q, specs


def make(num_members=2, kernels=None, **cfg):
  base = dict(num_members=num_members, alpha=1.0, gamma=0.5, td_loss="squared", dr3_coef=0.0,
              learning_rate=1e-2, sample_member=False)
  base.update(cfg)
  agent = aevl_agent.AEVLAgent(*specs(), aevl_agent.AEVLConfig(**base), LINEAR)
  if kernels is not None:
    set_linear_q(agent.online_network, kernels)
    set_linear_q(agent.target_network, kernels)
  return agent


def test_members_really_differ_in_initialization():
  agent = make(num_members=3)
  dense = [l for l in agent.online_network.q_model.layers if isinstance(l, keras.layers.Dense)]
  torsos = [l.get_weights()[0] for l in dense if "_mlp0" in l.name]
  assert len(torsos) == 3
  for i in range(3):
    for j in range(i + 1, 3):
      assert not np.allclose(torsos[i], torsos[j])
  q = agent.online_network.q_model({"observation": np.eye(2, dtype=np.float32)}).numpy()
  assert q.shape == (2, 3, 1, 2)
  assert np.abs(q[:, 0] - q[:, 1]).max() > 1e-4 and np.abs(q[:, 1] - q[:, 2]).max() > 1e-4


def test_ensemble_loss_by_hand_is_the_sum_of_member_cql_losses():
  # member 0 = the CQL test network: its CQL loss is 1.5073375 (tests/test_cql_agent.py).
  # member 1: Q = 0 everywhere. t1: y = 1 + 0 = 1, TD = 0.5 * 1 = 0.5, gap = log 2;
  #           t2: y = 0, TD = 0, gap = log 2.  mean = (0.5 + 2 log 2) / 2 = 0.9431472
  # AEVL loss = 1.5073375 + 0.9431472 = 2.4504847 (each member against its own target)
  agent = make(kernels=[Q_HAND, [[0.0, 0.0], [0.0, 0.0]]])
  m = agent.loss(hand_batch()).extra
  np.testing.assert_allclose(float(m["loss"]), 2.4504847, rtol=1e-5)


def test_ensemble_gradient_by_hand_each_member_gets_its_own_cql_gradient():
  """The sum over members: member e's head gets exactly the gradient of its own CQL loss
  (tests/test_cql_agent.py's formula, B = 2, alpha = 1, squared TD, gamma 0.5).

  member 0 (Q_HAND): dL/dQ(s0) = [-0.6344707, 0.1344707], dL/dQ(s1) = [0.0912128, 0.9087872]
  member 1 (Q = 0):  softmax = [1/2, 1/2] everywhere.
     t1 (s0, a = 0): y = 1 + 0.5 max(0, 0) = 1, x = -1 -> 1/2 [1/2 - 1 - 1, 1/2] = [-0.75, 0.25]
     t2 (s1, a = 1): y = 0, x = 0                      -> 1/2 [1/2, 1/2 - 1]     = [0.25, -0.25]
  No gradient reaches either target network.
  """
  agent = make(kernels=[Q_HAND, [[0.0, 0.0], [0.0, 0.0]]])
  grads, target_grads = head_gradients(agent, hand_batch())
  expected = ([[-0.6344707, 0.1344707], [0.0912128, 0.9087872]], [[-0.75, 0.25], [0.25, -0.25]])
  assert len(grads) == 2
  for (kernel, bias), exp in zip(grads, expected):
    np.testing.assert_allclose(kernel, exp, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bias, np.sum(exp, 0), rtol=1e-5, atol=1e-7)
  assert target_grads and all(g is None for g in target_grads)


def test_the_contract_model_indexes_members_by_delta():
  agent = make(kernels=[Q_HAND, [[5.0, 6.0], [7.0, 8.0]]])
  obs = np.eye(2, dtype=np.float32)
  grid = np.tile(belief.delta_grid(2)[None], [2, 1])                  # [0.25, 0.75]
  q = agent.q_network({"observation": obs, "delta": grid}).numpy()     # [B, K=E, A]
  np.testing.assert_allclose(q[:, 0], Q_HAND)                          # 0.25 -> member 0
  np.testing.assert_allclose(q[:, 1], [[5, 6], [7, 8]])                # 0.75 -> member 1
  q2 = agent.q_network({"observation": obs, "delta": np.full([2, 1], 0.99, np.float32)})
  np.testing.assert_allclose(q2.numpy()[:, 0], [[5, 6], [7, 8]])       # floor(0.99 * 2) = 1
  with pytest.raises(ValueError, match="mode"):
    q_ensemble.contract_q_model(agent.online_network, "median")


def test_adaptive_policy_belief_over_members_by_hand():
  # Transition (s0, a=0, r=0, s1), gamma 0.5, discount 1, temperature 1:
  # member 0 (Q_HAND): e0 = (1 - 0 - 0.5 * 2)^2 = 0;  member 1 (Q(s0) = [2, 0], Q(s1) = 0):
  # e1 = (2 - 0 - 0)^2 = 4.  b = softmax(log 1/2 - e) = [1, e^-4] / (1 + e^-4)
  agent = make(kernels=[Q_HAND, [[2.0, 0.0], [0.0, 0.0]]])
  policy = agent.evaluation_policy()
  assert isinstance(policy, policies.ConfidenceAdaptivePolicy)
  state = policy.get_initial_state(1)
  first = ts.restart(tf.constant([[1.0, 0.0]]), batch_size=1)
  step = policy.action(first, state)
  state = dict(step.state, prev_action=tf.constant([0], tf.int32))    # we executed a = 0
  nxt = ts.transition(tf.constant([[0.0, 1.0]]), reward=tf.constant([0.0]),
                      discount=tf.constant([1.0]))
  step = policy.action(nxt, state)
  b = np.exp(step.state["log_belief"].numpy()[0])
  np.testing.assert_allclose(b, [1 / (1 + np.exp(-4)), np.exp(-4) / (1 + np.exp(-4))],
                             rtol=1e-5)
  # argmax member (sample_member=False) = member 0, reported as its grid delta 0.25;
  # member 0 acts greedily in Q(s1) = [0.5, 2] -> action 1.
  np.testing.assert_allclose(step.info.delta.numpy(), [0.25])
  np.testing.assert_array_equal(step.action.numpy(), [1])


def test_nan_and_checkpoint_round_trip(tmp_path):
  agent = make(num_members=2)
  agent.train_on_batch(hand_batch())
  before = [v.numpy().copy() for v in agent.online_network.variables]
  with pytest.raises(FloatingPointError, match="AEVL .*train step 1"):
    agent.train_on_batch(dict(hand_batch(), reward=np.array([np.nan, 0], np.float32)))
  for b, v in zip(before, agent.online_network.variables):
    np.testing.assert_array_equal(b, v.numpy())
  path = agent.make_checkpoint().save(str(tmp_path / "ckpt"))
  expected = float(agent.train_on_batch(hand_batch())["loss"])
  fresh = make(num_members=2)
  fresh.make_checkpoint().restore(path).assert_existing_objects_matched()
  np.testing.assert_allclose(float(fresh.train_on_batch(hand_batch())["loss"]), expected,
                             rtol=1e-6)


def test_config_errors():
  with pytest.raises(ValueError, match="num_members"):
    aevl_agent.AEVLConfig(num_members=0).validate()
  with pytest.raises(ValueError, match="belief_temperature"):
    aevl_agent.AEVLConfig(belief_temperature=0.0).validate()
