"""CQLAgent: the loss and its gradient by hand on a linear network, NaN guard, checkpoint round
trip, policy."""
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

import ccvl_tf  # noqa: F401
from ccvl_tf.agents import cql_agent
from ccvl_tf.algorithm import losses, networks, q_ensemble

# One-hot states of 2 cells, a 2-unit ReLU torso set to the identity, so Q(s) is a row of the
# output kernel: a network whose Q values we choose.
LINEAR = networks.QNetworkConfig(torso="mlp", mlp_units=(2,))


def specs(num_obs=2, num_actions=2):
  obs = tensor_spec.BoundedTensorSpec((num_obs,), tf.float32, 0, 1)
  return ts.time_step_spec(obs), tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1)


def set_linear_q(net: q_ensemble.QEnsembleNetwork, kernels):
  """Member e: torso = identity, Q(s_i) = kernels[e][i] (output kernel rows), zero biases."""
  dense = [l for l in net.q_model.layers if isinstance(l, __import__("keras").layers.Dense)]
  torsos = [l for l in dense if "_mlp0" in l.name]
  heads = [l for l in dense if l.name.endswith("_q")]
  assert len(torsos) == len(heads) == len(kernels)
  for t, h, k in zip(torsos, heads, kernels):
    t.set_weights([np.eye(2, dtype=np.float32), np.zeros(2, np.float32)])
    k = np.asarray(k, np.float32)
    h.set_weights([k, np.zeros(k.shape[1], np.float32)])


def hand_batch():
  # t1: s0, a=0, r=1 -> s1 (not terminal);  t2: s1, a=1, r=0 -> s0 (terminal)
  return dict(observation=np.eye(2, dtype=np.float32), action=np.array([0, 1], np.int32),
              reward=np.array([1.0, 0.0], np.float32),
              next_observation=np.eye(2, dtype=np.float32)[[1, 0]],
              terminal=np.array([0.0, 1.0], np.float32))


Q_HAND = [[1.0, 0.0], [0.5, 2.0]]  # Q(s0) = [1, 0], Q(s1) = [0.5, 2]


def make(**cfg):
  base = dict(alpha=1.0, gamma=0.5, td_loss="squared", dr3_coef=0.0, learning_rate=1e-2)
  base.update(cfg)
  agent = cql_agent.CQLAgent(*specs(), cql_agent.CQLConfig(**base), LINEAR)
  set_linear_q(agent.online_network, [Q_HAND])
  set_linear_q(agent.target_network, [Q_HAND])
  return agent


def test_cql_loss_by_hand_squared_and_huber():
  # gamma 0.5, alpha 1.
  # t1: y = 1 + 0.5 max(0.5, 2) = 2, Q(s0,0) = 1: TD = 0.5 (1-2)^2 = 0.5;
  #     gap = log(e^1 + e^0) - 1 = 0.3132617
  # t2: y = 0 (terminal), Q(s1,1) = 2: TD = 0.5 * 4 = 2; gap = log(e^0.5 + e^2) - 2 = 0.2014133
  # loss = ((0.5 + 0.3132617) + (2 + 0.2014133)) / 2 = 1.5073375
  agent = make()
  m = agent.loss(hand_batch()).extra
  np.testing.assert_allclose(float(m["loss"]), 1.5073375, rtol=1e-5)
  np.testing.assert_allclose(float(m["td_term"]), 1.25, rtol=1e-6)
  np.testing.assert_allclose(float(m["cql_gap"]), (0.3132617 + 0.2014133) / 2, rtol=1e-5)
  # Huber (kappa 1): t2's |x| = 2 > 1 -> 1 * (2 - 0.5) = 1.5; t1 unchanged (0.5)
  # loss = ((0.5 + 0.3132617) + (1.5 + 0.2014133)) / 2 = 1.2573375
  huber = make(td_loss="huber")
  np.testing.assert_allclose(float(huber.loss(hand_batch()).loss), 1.2573375, rtol=1e-5)
  # alpha = 0: plain (squared) DQN TD loss, 1.25
  np.testing.assert_allclose(float(make(alpha=0.0).loss(hand_batch()).loss), 1.25, rtol=1e-6)


def test_cql_loss_pure_function_and_dr3_term():
  res = losses.cql_loss(tf.constant(Q_HAND), tf.constant([0, 1]), tf.constant([2.0, 0.0]),
                        alpha=1.0, td_loss_type="squared")
  np.testing.assert_allclose(res["td"].numpy(), [0.5, 2.0], rtol=1e-6)
  np.testing.assert_allclose(res["gap"].numpy(), [0.3132617, 0.2014133], rtol=1e-5)
  # DR3 with the identity torso: phi(s) = one-hot, phi(s').phi(s) = 0 for s' != s -> 0.
  agent = make(dr3_coef=0.5)
  m = agent.loss(hand_batch()).extra
  assert float(m["dr3_penalty"]) == 0.0
  same = dict(hand_batch(), next_observation=np.eye(2, dtype=np.float32))  # s' = s: |1| each
  m2 = agent.loss(same).extra
  np.testing.assert_allclose(float(m2["dr3_penalty"]), 1.0, rtol=1e-6)
  np.testing.assert_allclose(float(m2["loss"]), float(m2["cql_loss"]) + 0.5, rtol=1e-6)


def head_gradients(agent, batch):
  """d loss / d (output kernel, output bias) of each member, and the target's gradients.

  The torso is the identity, h(s_i) = onehot(i), so d loss / d kernel[i, a] is the sum over the
  batch rows at state i of d loss / d Q(s_i, a): with one row per state, the kernel gradient IS
  the matrix dL/dQ(s, a) (rows = states), and the bias gradient is its column sum.
  """
  import keras
  heads = [l for l in agent.online_network.q_model.layers
           if isinstance(l, keras.layers.Dense) and l.name.endswith("_q")]
  target = agent.target_network.trainable_variables
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([v.value if isinstance(v, keras.Variable) else v for v in target])
    loss = agent._objective(agent.prepare_batch(batch), agent.step_seed(),
                            training=False)["loss"]
  grads = [(tape.gradient(loss, h.kernel).numpy(), tape.gradient(loss, h.bias).numpy())
           for h in heads]
  return grads, [tape.gradient(loss, v) for v in target]


def test_cql_gradient_by_hand_through_the_agent_objective():
  """hand_batch on Q_HAND, alpha = 1, gamma = 0.5, B = 2:

    dL/dQ(s_b, .) = 1/B [ alpha (softmax(Q(s_b)) - onehot(a_b))
                          + TD'(Q(s_b, a_b) - y_b) onehot(a_b) ]

  t1 (s0, a = 0): softmax([1, 0]) = [0.7310586, 0.2689414], y = 1 + 0.5 * 2 = 2, x = -1
  t2 (s1, a = 1): softmax([0.5, 2]) = [0.1824255, 0.8175745], y = 0 (terminal), x = 2
  squared (TD' = x):    s0: 1/2 [0.7310586 - 1 - 1, 0.2689414]  = [-0.6344707, 0.1344707]
                        s1: 1/2 [0.1824255, 0.8175745 - 1 + 2] = [ 0.0912128, 0.9087872]
  Huber kappa = 0.5:    s0: 1/2 [0.7310586 - 1 - 0.5, 0.2689414] = [-0.3844707, 0.1344707]
  (TD' = clip(x, +-0.5)) s1: 1/2 [0.1824255, 0.8175745 - 1 + 0.5] = [ 0.0912128, 0.1587872]
  The target network gets no gradient.
  """
  for cfg, expected in (
      (dict(), [[-0.6344707, 0.1344707], [0.0912128, 0.9087872]]),
      (dict(td_loss="huber", huber_kappa=0.5), [[-0.3844707, 0.1344707], [0.0912128, 0.1587872]])):
    grads, target_grads = head_gradients(make(**cfg), hand_batch())
    (kernel, bias), = grads
    np.testing.assert_allclose(kernel, expected, rtol=1e-5, atol=1e-7, err_msg=str(cfg))
    np.testing.assert_allclose(bias, np.sum(expected, 0), rtol=1e-5, err_msg=str(cfg))
    assert target_grads and all(g is None for g in target_grads)


def test_training_lowers_the_loss_and_moves_only_online_until_the_target_period():
  agent = make(target_update_period=3)
  before = [v.numpy().copy() for v in agent.target_network.variables]
  first = float(agent.train_on_batch(hand_batch())["loss"])
  for _ in range(1):
    agent.train_on_batch(hand_batch())
  for b, v in zip(before, agent.target_network.variables):
    np.testing.assert_array_equal(b, v.numpy())          # 2 steps: target not copied yet
  agent.train_on_batch(hand_batch())                     # step 3: copied
  for s, t in zip(agent.online_network.variables, agent.target_network.variables):
    np.testing.assert_array_equal(s.numpy(), t.numpy())
  assert int(agent.train_step_counter.numpy()) == 3
  assert float(agent.loss(hand_batch()).loss) < first


def test_nan_loss_raises_and_keeps_every_variable():
  agent = make()
  agent.train_on_batch(hand_batch())
  ckpt_vars = [v.numpy().copy() for v in agent.make_checkpoint().online]
  bad = dict(hand_batch(), reward=np.array([np.nan, 0.0], np.float32))
  with pytest.raises(FloatingPointError, match="train step 1"):
    agent.train_on_batch(bad)
  assert int(agent.train_step_counter.numpy()) == 1
  for b, v in zip(ckpt_vars, agent.make_checkpoint().online):
    np.testing.assert_array_equal(b, v.numpy())


def test_checkpoint_round_trip_gives_the_same_next_step(tmp_path):
  agent = make()
  for _ in range(2):
    agent.train_on_batch(hand_batch())
  path = agent.make_checkpoint().save(str(tmp_path / "ckpt"))
  expected = float(agent.train_on_batch(hand_batch())["loss"])
  fresh = cql_agent.CQLAgent(*specs(), agent.config, LINEAR)
  fresh.make_checkpoint().restore(path).assert_existing_objects_matched()
  assert int(fresh.train_step_counter.numpy()) == 2
  np.testing.assert_allclose(float(fresh.train_on_batch(hand_batch())["loss"]), expected,
                             rtol=1e-6)


def test_policy_is_greedy_in_q():
  agent = make()
  step = agent.policy.action(ts.restart(tf.constant(np.eye(2, dtype=np.float32)), batch_size=2))
  np.testing.assert_array_equal(step.action.numpy(), [0, 1])   # argmax [1, 0], [0.5, 2]


def test_config_errors_name_the_value():
  with pytest.raises(ValueError, match="alpha"):
    cql_agent.CQLConfig(alpha=-1.0).validate()
  with pytest.raises(ValueError, match="td_loss"):
    cql_agent.CQLConfig(td_loss="l1").validate()
  with pytest.raises(ValueError, match="missing keys"):
    make().train_on_batch({k: v for k, v in hand_batch().items() if k != "terminal"})


def test_trajectory_input_gives_the_dict_loss():
  """TFAgent.loss / train on a Trajectory [B, 2] (discount 0 marks the terminal t2)."""
  from tf_agents.trajectories import trajectory as trajectory_lib
  agent = make()
  b = hand_batch()
  mid = np.full((2, 2), ts.StepType.MID, np.int32)
  traj = trajectory_lib.Trajectory(
      step_type=mid, observation=np.stack([b["observation"], b["next_observation"]], 1),
      action=np.stack([b["action"], b["action"]], 1), policy_info=(), next_step_type=mid,
      reward=np.stack([b["reward"], b["reward"]], 1),
      discount=np.stack([1.0 - b["terminal"], np.ones(2)], 1).astype(np.float32))
  np.testing.assert_allclose(float(agent.loss(traj).loss), 1.5073375, rtol=1e-5)
