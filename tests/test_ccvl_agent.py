"""ccvl_tf/agents/ccvl_agent.py: the objective by hand (N=2, M=3), gradients, the train step, guards,
checkpoints, policies, Fixed-CCVL, and short trainings on a synthetic MDP and the gridworld."""
import math

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory as trajectory_lib

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import q_agent_base
from ccvl_tf.algorithm import counts
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm.readings import ablation
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.tabular import gridworld
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi

E = math.exp
TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)


def _specs(num_obs, num_actions, minimum=0):
  obs_spec = tf.TensorSpec((num_obs,), tf.float32)
  act_spec = tensor_spec.BoundedTensorSpec((), tf.int64, minimum, minimum + num_actions - 1)
  return ts.time_step_spec(obs_spec), act_spec


def _random_batch(b, num_obs, num_actions, seed=0, minimum=0):
  rng = np.random.default_rng(seed)
  return {
      "observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
      "action": rng.integers(minimum, minimum + num_actions, b).astype(np.int32),
      "reward": rng.random(b).astype(np.float32),
      "next_observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
      "terminal": (rng.random(b) < 0.2).astype(np.float32),
  }


def _tiny_agent(num_obs=5, num_actions=3, **cfg):
  keras.utils.set_random_seed(0)
  cfg = dict(dict(num_deltas=2, num_pairs=3, alpha=0.5, dr3_coef=0.1), **cfg)
  # Flat settings as flags give them: CCVLConfig.with_values makes the reading.
  return ccvl_agent.CCVLAgent(*_specs(num_obs, num_actions),
                              ccvl_agent.CCVLConfig().with_values(cfg), TINY, dataset_size=100)


# ---- the objective on a deterministic tiny network, by hand ----------------------------------
def _linear_network(name):
  """Q(s, a, delta) = W[s, a] + delta * u_a with W = [[1, 0], [0.5, 1]], u = [4, 0]; phi(s) = W[s].

  A contract model: dict inputs {'observation' one-hot [B, 2], 'delta' [B, K]} -> [B, K, 2].
  """
  obs = keras.Input((2,), name="observation")
  delta = keras.Input((None,), name="delta")
  base = keras.layers.Dense(2, use_bias=False, name=f"{name}_w",
                            kernel_initializer=keras.initializers.Constant(
                                [[1.0, 0.0], [0.5, 1.0]]))(obs)              # [B, A] = W[s]
  slope = keras.layers.Dense(2, use_bias=False, name=f"{name}_u",
                             kernel_initializer=keras.initializers.Constant([[4.0, 0.0]]))(
                                 ops.expand_dims(delta, -1))                  # [B, K, A]
  q = ops.expand_dims(base, 1) + slope                                        # [B, K, A]
  both = keras.Model({"observation": obs, "delta": delta}, {"q": q, "phi": base})
  return networks.CCVLNetwork(
      q_model=keras.Model({"observation": obs, "delta": delta}, q),
      phi_model=keras.Model({"observation": obs}, base), q_and_phi_model=both,
      config=TINY, observation_shape=(2,), observation_dtype="float32", num_actions=2,
      phi_dim=2)


# The paper's objective (readings/paper.py, the default step) and the ablation reading's at
# its defaults (the paper's loss through a research reading's own objective) must both give
# the hand-computed values.
OBJECTIVES = {"ablation": ablation.Ablation().objective, "paper": paper.Paper().objective}


@pytest.mark.parametrize("which", sorted(OBJECTIVES))
def test_objective_hand_computed_on_a_tiny_linear_network(which):
  """B=1, N=2, M=3; s = state 0, a_D = 1, r = 0.5, s' = state 1, not terminal, gamma = 0.5.

  Online Q(s0, ., delta) = [1 + 4 delta, 0]:
    delta = 0.5  -> [3, 0]: Q(s,a_D) = 0, gap = ln(e^3 + 1) = 3.048587
    delta = 0.25 -> [2, 0]: Q(s,a_D) = 0, gap = ln(e^2 + 1) = 2.126928
  Target Q(s1, ., delta_2) = [0.5 + 4 delta_2, 1], max = max(0.5 + 4 delta_2, 1):
    row 0, delta_2 = [0.4, 0.1, 0.25]   -> max [2.1, 1, 1.5] -> y = 0.5 + 0.5 max = [1.55, 1, 1.25]
                                        -> 1/2 (0 - y)^2 = [1.20125, 0.5, 0.78125]
    row 1, delta_2 = [0.2, 0.05, 0.125] -> max [1.3, 1, 1]   -> y = [1.15, 1, 1]
                                        -> [0.66125, 0.5, 0.5]
  n(s)^-1 = 0.25, alpha = 1: weight = sqrt(log(1/delta_1) / 4) = 0.5 sqrt(x) for delta_1 = e^-x:
    row 0, x = [1, 4, 2.25]      -> [0.5, 1, 0.75]    * 3.048587 = [1.524294, 3.048587, 2.286440]
    row 1, x = [4, 2.25, 1.5625] -> [1, 0.75, 0.625]  * 2.126928 = [2.126928, 1.595196, 1.329330]
  L row 0 = [2.725544, 3.548587, 3.067690] -> max 3.548587 (j = 1)
  L row 1 = [2.788178, 2.095196, 1.829330] -> max 2.788178 (j = 0)
  CCVL loss = (3.548587 + 2.788178) / 2 = 3.168383
  DR3: phi(s0) . phi(s1) = [1, 0] . [0.5, 1] = 0.5; with c = 0.1 the total is 3.218383.
  """
  online, target = _linear_network("online"), _linear_network("target")
  batch = {"observation": tf.constant([[1.0, 0.0]]), "action": tf.constant([1]),
           "reward": tf.constant([0.5]), "next_observation": tf.constant([[0.0, 1.0]]),
           "terminal": tf.constant([0.0])}
  delta = tf.constant([[0.5, 0.25]])
  delta_1 = tf.constant([[[E(-1), E(-4), E(-2.25)], [E(-4), E(-2.25), E(-1.5625)]]])
  delta_2 = tf.constant([[[0.4, 0.1, 0.25], [0.2, 0.05, 0.125]]])
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=3, alpha=1.0, gamma=0.5,
                              td_loss="squared", dr3_coef=0.1, reading=paper.Paper())
  out = OBJECTIVES[which](online, target, batch, delta, delta_1, delta_2,
                          lambda obs, phi: tf.fill([tf.shape(obs)[0]], 0.25), cfg)
  np.testing.assert_allclose(out["ccvl_loss"].numpy(), 3.168383, rtol=1e-5)
  np.testing.assert_allclose(out["dr3_penalty"].numpy(), 0.5, rtol=1e-6)
  np.testing.assert_allclose(out["loss"].numpy(), 3.218383, rtol=1e-5)
  # mean TD term over the 6 pairs: (1.20125 + 0.5 + 0.78125 + 0.66125 + 0.5 + 0.5) / 6
  np.testing.assert_allclose(out["td_term"].numpy(), 4.14375 / 6, rtol=1e-5)
  np.testing.assert_allclose(out["cql_gap"].numpy(), (3.048587 + 2.126928) / 2, rtol=1e-5)


# ---- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize("which", sorted(OBJECTIVES))
def test_objective_gradient_by_hand_on_the_tiny_linear_network(which):
  """dL/dW and dL/du of the linear network Q(s, a, delta) = W[s, a] + delta u_a, the setup of
  the test above with c_DR3 = 0 (B = 1, N = 2, a_D = 1, s = state 0).

  Per delta row i, with j* the selected pair (1/(B N) = 1/2):
    dL/dQ(s, ., delta_i) = 1/2 [ w_ij* (softmax(Q_i) - onehot(a_D))
                                 + (Q_i(a_D) - y_ij*) onehot(a_D) ]
  row 0 (delta 0.5):  Q = [3, 0], softmax = [0.9525741, 0.0474259]; j* = 1: w = 1, y = 1, x = -1
                      -> 1/2 [0.9525741, 0.0474259 - 1 - 1] = [0.4762871, -0.9762871]
  row 1 (delta 0.25): Q = [2, 0], softmax = [0.8807971, 0.1192029]; j* = 0: w = 1, y = 1.15,
                      x = -1.15 -> 1/2 [0.8807971, 0.1192029 - 1 - 1.15] = [0.4403985, -1.0153985]
  dQ/dW[s0, a] = 1 for both rows, dQ/du_a = delta_i:
    dL/dW = [[0.4762871 + 0.4403985, -0.9762871 - 1.0153985], [0, 0]]
          = [[0.9166856, -1.9916856], [0, 0]]
    dL/du = [0.5 (0.4762871) + 0.25 (0.4403985), 0.5 (-0.9762871) + 0.25 (-1.0153985)]
          = [0.3482432, -0.7419932]
  The target network and n(s)^-1 get no gradient.
  """
  online, target = _linear_network("online"), _linear_network("target")
  batch = {"observation": tf.constant([[1.0, 0.0]]), "action": tf.constant([1]),
           "reward": tf.constant([0.5]), "next_observation": tf.constant([[0.0, 1.0]]),
           "terminal": tf.constant([0.0])}
  delta_1 = tf.constant([[[E(-1), E(-4), E(-2.25)], [E(-4), E(-2.25), E(-1.5625)]]])
  delta_2 = tf.constant([[[0.4, 0.1, 0.25], [0.2, 0.05, 0.125]]])
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=3, alpha=1.0, gamma=0.5,
                              td_loss="squared", dr3_coef=0.0, reading=paper.Paper())
  inv = tf.Variable([0.25])
  w, u = online.q_model.get_layer("online_w").kernel, online.q_model.get_layer("online_u").kernel
  target_vars = [v.value for v in target.trainable_variables]
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(target_vars)
    out = OBJECTIVES[which](online, target, batch, tf.constant([[0.5, 0.25]]), delta_1,
                            delta_2, lambda obs, phi: inv + 0.0 * phi[:, 0], cfg)
  np.testing.assert_allclose(out["loss"].numpy(), 3.168383, rtol=1e-5)
  np.testing.assert_allclose(tape.gradient(out["loss"], w).numpy(),
                             [[0.9166856, -1.9916856], [0.0, 0.0]], rtol=1e-5, atol=1e-7)
  # u is a [1, A] kernel on the delta input.
  np.testing.assert_allclose(tape.gradient(out["loss"], u).numpy(), [[0.3482432, -0.7419932]],
                             rtol=1e-5)
  assert all(tape.gradient(out["loss"], v) is None for v in target_vars)
  assert tape.gradient(out["loss"], inv) is None


@pytest.mark.parametrize("cfg,paper_step", [
    ({}, True), ({"delta_head": "cosine", "td_loss": "squared"}, True),
    ({"count_weight": "off", "train_delta": 0.5}, False),
    ({"objective": "bound"}, False), ({"objective": "bonus"}, False), ({"gap": "max"}, False),
    ({"delta_weight": "constant"}, False),
    ({"objective": "bonus", "support_threshold": 0.5}, False)])
def test_the_step_calls_its_readings_objective_and_the_ablation_at_defaults_is_the_papers(
    cfg, paper_step):
  """The tape calls the reading's own objective: readings/paper.py `objective` for reading
  'paper' (any head or TD loss), the research reading's (here 'ablation', 'bound', 'bonus')
  otherwise. The ablation reading at its defaults gives the paper's loss and gradients bit for
  bit on a real network (DR3 on) through its own objective."""
  agent = _tiny_agent(**cfg)
  assert agent._reading is agent.config.reading
  assert (agent._reading.objective is paper.objective) is paper_step
  batch = agent.prepare_batch(_random_batch(8, 5, 3))
  agent.counts.update(tf.random.stateless_uniform([16, 16], seed=[1, 1]))
  agent.counts.refresh()
  metrics, grads = agent.loss_and_grads(batch, agent.step_seed())
  # TFAgent's `_loss` path: the same objective without the tape.
  again = agent._objective(batch, agent.step_seed(), training=True)
  assert list(again) == list(metrics)
  np.testing.assert_array_equal(again["loss"].numpy(), metrics["loss"].numpy())
  if paper_step:
    agent._reading = ablation.Ablation()
    m_a, g_a = agent.loss_and_grads(batch, agent.step_seed())
    assert list(m_a) == list(metrics)  # the same metrics, in the same order
    for key in metrics:
      np.testing.assert_array_equal(metrics[key].numpy(), m_a[key].numpy(), err_msg=key)
    for a, b in zip(grads, g_a):
      np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("head,parts", [("cosine", ("mlp0", "delta_embed", "hidden", "_q/")),
                                         ("monotone", ("mlp0", "hidden", "_q/")),
                                         ("cosine_monotone",
                                          ("mlp0", "delta_embed", "hidden", "_q/")),
                                         ("quantized", ("mlp0", "_m0_hidden", "_m7_q/"))])
def test_gradients_reach_torso_embedding_and_head_but_not_target_or_counts(head, parts):
  agent = _tiny_agent(delta_head=head)
  batch = agent.prepare_batch(_random_batch(8, 5, 3))
  agent.counts.update(tf.random.stateless_uniform([16, 16], seed=[1, 1]))
  agent.counts.refresh()
  online = agent.online_network.trainable_variables
  target = agent.target_network.trainable_variables
  watched = online + target + [agent.counts.precision, agent.counts.second_moment]
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([v.value if isinstance(v, keras.Variable) else v for v in watched])
    metrics = agent._objective(batch, agent.step_seed(), training=True)
  grads = tape.gradient(metrics["loss"], online)
  names = [v.path for v in online]
  for part in parts:  # the monotone head has no delta embedding: delta enters its ramps
    got = [g for g, n in zip(grads, names) if part in n]
    assert got, part
    assert all(g is not None for g in got), part
    assert any(float(tf.reduce_max(tf.abs(g))) > 0 for g in got), part
  assert all(g is None for g in tape.gradient(metrics["loss"], target))
  assert tape.gradient(metrics["loss"], agent.counts.precision) is None
  # n(s)^-1 is computed from phi(s) under a stop-gradient: no gradient reaches the network.
  with tf.GradientTape() as tape2:
    inv = agent._inverse_counts(batch["observation"],
                                agent.online_network.phi_model(
                                    {"observation": batch["observation"]}))
  assert tape2.gradient(inv, online) == [None] * len(online)


# ---- train step, target period, guards --------------------------------------------------------
def test_train_step_counts_and_target_update_period():
  agent = _tiny_agent(target_update_period=3)
  batch = _random_batch(8, 5, 3)
  online, target = agent.online_network, agent.target_network
  x = {"observation": np.eye(5, dtype=np.float32), "delta": np.full((5, 2), 0.3, np.float32)}
  same = lambda: np.allclose(online.q_model(x).numpy(), target.q_model(x).numpy())
  assert same()
  m = agent.train_on_batch(batch)
  assert int(m["step"]) == 0 and bool(m["finite"])
  assert not same()                                  # online moved, target did not
  agent.train_on_batch(batch)
  assert not same()
  agent.train_on_batch(batch)                        # step 3: copied
  assert int(agent.train_step_counter.numpy()) == 3
  assert same()
  for key in ("loss", "ccvl_loss", "dr3_penalty", "td_term", "regularizer_term", "cql_gap",
              "q_data", "inverse_count"):
    assert np.isfinite(float(m[key])), key


def test_nan_loss_raises_naming_the_step_and_keeps_weights(tmp_path):
  agent = _tiny_agent()
  good = _random_batch(8, 5, 3)
  agent.train_on_batch(good)
  agent.train_on_batch(good)
  ckpt = agent.make_checkpoint()
  path = ckpt.save(str(tmp_path / "ckpt"))
  before = [v.numpy().copy() for v in agent.online_network.variables]
  second_moment = agent.counts.second_moment.numpy().copy()
  bad = dict(good, reward=np.full(8, np.nan, np.float32))
  with pytest.raises(q_agent_base.NonFiniteLossError, match="train step 2") as err:
    agent.train_on_batch(bad)
  assert err.value.step == 2
  after = [v.numpy() for v in agent.online_network.variables]
  for b, a in zip(before, after):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(agent.counts.second_moment.numpy(), second_moment)
  assert int(agent.train_step_counter.numpy()) == 2
  inf = dict(good, reward=np.full(8, np.inf, np.float32))
  with pytest.raises(q_agent_base.NonFiniteLossError, match="step 2"):
    agent.train(inf)                                 # the TFAgent.train entry point too
  # Training goes on from the last good state, then a restore brings back the checkpoint.
  agent.train_on_batch(good)
  ckpt.restore(path).assert_consumed()
  for b, a in zip(before, agent.online_network.variables):
    np.testing.assert_array_equal(a.numpy(), b)
  assert int(agent.train_step_counter.numpy()) == 2


@pytest.mark.slow
@pytest.mark.parametrize("make", [lambda agent: agent.make_checkpoint(),
                                  lambda agent: tf.train.Checkpoint(agent=agent)],
                         ids=["make_checkpoint", "checkpoint_of_agent"])
def test_checkpoint_restores_networks_optimizer_counts_and_step(tmp_path, make):
  agent = _tiny_agent()
  batch = _random_batch(8, 5, 3)
  for _ in range(3):
    agent.train_on_batch(batch)
  path = make(agent).save(str(tmp_path / "c"))
  saved_moment = agent.counts.second_moment.numpy().copy()
  expected = float(agent.train_on_batch(batch)["loss"])   # step 3 from the saved state
  fresh = _tiny_agent()
  assert not np.allclose(fresh.counts.second_moment.numpy(), saved_moment)
  make(fresh).restore(path).assert_consumed()
  assert int(fresh.train_step_counter.numpy()) == 3
  np.testing.assert_array_equal(fresh.counts.second_moment.numpy(), saved_moment)
  # Same networks, Adam moments, counts and step -> the same next loss.
  np.testing.assert_allclose(float(fresh.train_on_batch(batch)["loss"]), expected, rtol=1e-5)


def test_trajectory_and_dict_inputs_give_the_same_loss():
  agent = _tiny_agent(num_actions=3)
  batch = _random_batch(6, 5, 3, seed=3)
  obs = np.stack([batch["observation"], batch["next_observation"]], 1)   # [B, 2, 5]
  mid = np.full((6, 2), ts.StepType.MID, np.int32)
  traj = trajectory_lib.Trajectory(
      step_type=mid, observation=obs,
      action=np.stack([batch["action"], batch["action"]], 1).astype(np.int64),
      policy_info=(), next_step_type=mid,
      reward=np.stack([batch["reward"], batch["reward"]], 1),
      discount=np.stack([1.0 - batch["terminal"], np.ones(6)], 1).astype(np.float32))
  from_dict = agent.loss(batch).loss.numpy()
  from_traj = agent.loss(traj).loss.numpy()
  np.testing.assert_allclose(from_traj, from_dict, rtol=1e-6)


def test_action_spec_minimum_is_subtracted():
  agent = _tiny_agent(num_actions=3)
  shifted = ccvl_agent.CCVLAgent(*_specs(5, 3, minimum=2), agent.config, TINY,
                                 dataset_size=100)
  networks.copy_weights(agent.online_network, shifted.online_network)
  networks.copy_weights(agent.online_network, shifted.target_network)
  batch = _random_batch(6, 5, 3, seed=4)
  np.testing.assert_allclose(
      shifted.loss(dict(batch, action=batch["action"] + 2)).loss.numpy(),
      agent.loss(batch).loss.numpy(), rtol=1e-6)


def test_policies_act_with_valid_actions():
  agent = _tiny_agent(num_actions=3, collect_epsilon=1.0)
  time_step = ts.restart(tf.constant(np.eye(5, dtype=np.float32)), batch_size=5)
  step = agent.policy.action(time_step)
  q = agent.q_values(np.eye(5, dtype=np.float32), agent.config.policy_delta).numpy()[:, 0]
  np.testing.assert_array_equal(step.action.numpy(), q.argmax(-1))
  collect = agent.collect_policy.action(time_step).action.numpy()
  assert collect.shape == (5,) and np.all((collect >= 0) & (collect < 3))


@pytest.mark.parametrize("cfg,match", [
    (dict(num_deltas=0), "N .*0"),
    (dict(num_pairs=0), "M .*0"),
    (dict(alpha=-1.0), "alpha.*-1.0"),
    (dict(policy_delta=1.0), "policy_delta.*1.0"),
    (dict(policy_delta=0.0), "policy_delta.*0.0"),
    (dict(td_loss="l2"), "'l2'"),
])
def test_bad_config_raises_naming_the_value(cfg, match):
  with pytest.raises(ValueError, match=match):
    ccvl_agent.CCVLConfig(**cfg).validate()
  with pytest.raises(ValueError, match=match):
    ccvl_agent.CCVLAgent(*_specs(5, 3), ccvl_agent.CCVLConfig(**cfg), TINY, dataset_size=10)


def test_bad_observation_spec_and_missing_dataset_size_raise():
  spec = ts.time_step_spec(tf.TensorSpec((84, 84, 4), tf.float32))
  act = tensor_spec.BoundedTensorSpec((), tf.int64, 0, 3)
  with pytest.raises(ValueError, match="float32"):
    ccvl_agent.CCVLAgent(spec, act, dataset_size=10)  # Nature torso takes uint8 frames
  with pytest.raises(ValueError, match=r"\(84, 84, 4\)"):
    ccvl_agent.CCVLAgent(spec, act, network_config=TINY, dataset_size=10)
  with pytest.raises(ValueError, match="dataset_size"):
    ccvl_agent.CCVLAgent(*_specs(5, 3), network_config=TINY)


def test_q_values_rejects_delta_outside_unit_interval():
  agent = _tiny_agent()
  with pytest.raises(ValueError, match=r"\(0, 1\).*1\.5"):
    agent.q_values(np.eye(5, dtype=np.float32), 1.5)


def test_missing_batch_key_raises():
  agent = _tiny_agent()
  batch = _random_batch(4, 5, 3)
  del batch["terminal"]
  with pytest.raises(ValueError, match="terminal"):
    agent.train_on_batch(batch)


# ---- Fixed-CCVL ----------------------------------------------------------------------------------
def test_select_fixed_delta_picks_the_lowest_bellman_error():
  """Q(s, a, delta) = W[s, a] + 4 delta [a == 0] (the linear network above).

  One held-out transition: s = 0, a = 0, r = 1, s' = 1 terminal (no bootstrap), so
  e(delta) = (1 + 4 delta - 1)^2 = 16 delta^2 -> the smallest grid delta wins;
  with r = 3: e = (4 delta - 2)^2 -> delta = 0.5 wins.
  """
  net = _linear_network("fixed")
  grid = [0.125, 0.375, 0.5, 0.875]
  held_out = [{"observation": [[1.0, 0.0]], "action": [0], "reward": [1.0],
               "next_observation": [[0.0, 1.0]], "terminal": [1.0]}]
  delta, errors = ccvl_agent.select_fixed_delta(net.q_model, held_out, grid, gamma=0.9)
  np.testing.assert_allclose(errors, 16 * np.square(grid), rtol=1e-5)
  assert delta == 0.125
  held_out[0]["reward"] = [3.0]
  delta, errors = ccvl_agent.select_fixed_delta(net.q_model, held_out, grid, gamma=0.9)
  np.testing.assert_allclose(errors, np.square(4 * np.asarray(grid) - 2), rtol=1e-5)
  assert delta == 0.5
  with pytest.raises(ValueError, match="deltas"):
    ccvl_agent.select_fixed_delta(net.q_model, held_out, [0.5, 1.0], gamma=0.9)


def test_the_fixed_delta_against_a_target_network_bootstraps_from_it():
  """Online Q as above; the target Q'(s, a, delta) = W'[s, a] with W' = 0 but W'[1, 1] = 2 (its
  u = 0). One transition s = 0, a = 1, r = 0, s' = 1 not terminal, gamma 0.5:
  Q(0, 1, delta) = 0 for every delta; max_a' Q'(1, a', delta) = 2, so e = (0 - 0.5 x 2)^2 = 1 at
  every delta. With the online network on both sides, max_a' Q(1, a', delta) =
  max(0.5 + 4 delta, 1), e = (0.5 max(0.5 + 4 delta, 1))^2: 0.25 at delta 0.125, 1.5625 at 0.5."""
  net = _linear_network("online_t")
  target = _linear_network("target_t")
  target.q_model.get_layer("target_t_w").set_weights([np.array([[0.0, 0.0], [0.0, 2.0]])])
  target.q_model.get_layer("target_t_u").set_weights([np.zeros([1, 2])])
  grid = [0.125, 0.5]
  held_out = [{"observation": [[1.0, 0.0]], "action": [1], "reward": [0.0],
               "next_observation": [[0.0, 1.0]], "terminal": [0.0]}]
  errors = ccvl_agent.bellman_errors_on_grid(net.q_model, held_out, grid, 0.5,
                                             target_q_model=target.q_model)
  np.testing.assert_allclose(errors, [1.0, 1.0], rtol=1e-6)
  np.testing.assert_allclose(ccvl_agent.bellman_errors_on_grid(net.q_model, held_out, grid, 0.5),
                             [0.25, 1.5625], rtol=1e-6)
  delta, _ = ccvl_agent.select_fixed_delta(net.q_model, held_out, grid, 0.5,
                                           target_q_model=target.q_model)
  assert delta == 0.125  # a tie goes to the first grid entry
  # Both in one pass (what the Fixed-CCVL choice and the belief temperature read), twice over
  # the same transition: the means are unchanged.
  both = ccvl_agent.bellman_errors_both(net.q_model, held_out * 2, grid, 0.5,
                                        target_q_model=target.q_model)
  assert sorted(both) == ["consistency", "target"]
  np.testing.assert_allclose(both["target"], [1.0, 1.0], rtol=1e-6)
  np.testing.assert_allclose(both["consistency"], [0.25, 1.5625], rtol=1e-6)
  assert sorted(ccvl_agent.bellman_errors_both(net.q_model, held_out, grid, 0.5)) == [
      "consistency"]
  # With the number of transitions the means are over (the informed belief prior's N).
  assert ccvl_agent.bellman_errors_both(net.q_model, held_out * 3, grid, 0.5,
                                        with_count=True)["count"] == 3


@pytest.mark.parametrize("agent_name", ["ccvl", "fixed_ccvl"])
def test_the_adaptive_policy_starts_from_the_belief_prior_of_the_held_out_errors(agent_name):
  """--belief_prior: 'uniform' (the default) starts the adaptive policy from -log K, bit for
  bit; 'heldout_mean' / 'heldout_sum' from log b_0 = -N e(delta) / T normalized, with e the
  held-out TD errors that choose Fixed-CCVL's delta (summary.json's 'bellman_errors'), T the
  belief temperature and N = 1 / the 3 x 8 held-out transitions. The extra values (summary.json)
  record which, N and log b_0."""
  from ccvl_tf.algorithm import belief  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments import agent_registry  # pylint: disable=g-import-not-at-top
  agent = _tiny_agent()
  held_out = [_random_batch(8, 5, 3, seed=i) for i in range(3)]
  spec = agent_registry.AGENT_REGISTRY[agent_name]
  adaptive_name = "policy" if agent_name == "ccvl" else "policy_adaptive"
  for prior, n in (("uniform", None), ("heldout_mean", 1), ("heldout_sum", 24)):
    settings = agent_registry.AgentSettings(num_grid_deltas=4, belief_prior=prior)
    exports, extra = spec.policies(agent, *_specs(5, 3), held_out, settings)
    start = exports[adaptive_name].get_initial_state(2)["log_belief"].numpy()
    assert (extra["belief_prior"], extra["belief_prior_transitions"],
            extra["held_out_transitions"]) == (prior, n, 24)
    np.testing.assert_array_equal(extra["initial_log_belief"], start[0])
    if prior == "uniform":
      np.testing.assert_array_equal(start, np.tile(belief.uniform_log_belief(4), [2, 1]))
      continue
    # By hand, in float64: logits -N e / T less their logsumexp.
    e, t = np.asarray(extra["bellman_errors"]), extra["belief_temperature"]
    logits = -n * e / t
    want = logits - (logits.max() + np.log(np.sum(np.exp(logits - logits.max()))))
    np.testing.assert_allclose(start, [want, want], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(start[0], belief.informed_log_prior(e, t, n))
    # Its mode is Fixed-CCVL's delta (the lowest held-out error).
    assert belief.delta_grid(4)[int(np.argmax(start[0]))] == np.float32(extra["fixed_delta"])
  with pytest.raises(ValueError, match=r"^belief_prior must be one of uniform, heldout_mean, "
                                       r"heldout_sum, got 'sum'$"):
    agent_registry.informed_prior("sum", [1.0, 2.0], 1.0, 10)


# ---- short trainings ------------------------------------------------------------------------------
def _train(agent, sample, steps):
  losses = []
  for i in range(steps):
    losses.append(float(agent.train_on_batch(sample(i))["ccvl_loss"]))
  return np.asarray(losses)


def test_synthetic_bandit_rare_actions_rise_and_the_data_action_falls_with_delta():
  """Three one-step states (terminal, r = 0), behaviour pi_b(a|s) = 0.7 on one action.

  The exact solution of Eq. (cql update) per state is Q(a) = -w (softmax_a / pi_b(a) - 1) with
  w = alpha sqrt(log(1/delta_1) / n(s)) decreasing in delta: rare actions (pushed down by
  the regularizer) rise with delta -- Lemma 1's direction -- while the frequent data action
  (pushed up) falls. This is the ordering the unconstrained (cosine) head must learn; the
  monotone head cannot let the data action fall (test below).
  """
  keras.utils.set_random_seed(0)
  cfg = ccvl_agent.CCVLConfig(num_deltas=8, num_pairs=2, alpha=1.0, gamma=0.0,
                              td_loss="squared", dr3_coef=0.0, learning_rate=3e-3,
                              adam_epsilon=1e-7, target_update_period=10, delta_head="cosine",
                              reading=paper.Paper())
  agent = ccvl_agent.CCVLAgent(*_specs(3, 4), cfg, TINY,
                               inverse_count_fn=lambda o: tf.fill([tf.shape(o)[0]], 1.0))
  rng = np.random.default_rng(0)
  frequent = np.array([0, 2, 3])                       # the 0.7 action of each state
  def sample(_):
    s = rng.integers(0, 3, 64)
    a = np.where(rng.random(64) < 0.6, frequent[s], rng.integers(0, 4, 64))  # 0.7 in total
    obs = np.eye(3, dtype=np.float32)[s]
    return {"observation": obs, "action": a, "reward": np.zeros(64, np.float32),
            "next_observation": obs, "terminal": np.ones(64, np.float32)}
  losses = _train(agent, sample, 1000)
  assert losses[-100:].mean() < losses[:100].mean()
  grid = np.linspace(0.05, 0.95, 7).astype(np.float32)
  q = agent.q_values(np.eye(3, dtype=np.float32), grid).numpy()   # [S, K, A]
  for s in range(3):
    rare = [a for a in range(4) if a != frequent[s]]
    # endpoint ordering for every rare action, and the data action the other way
    assert np.all(q[s, -1, rare] > q[s, 0, rare]), q[s]
    assert q[s, -1, frequent[s]] < q[s, 0, frequent[s]], q[s]
    # least-squares slope of Q along the 7-point grid: > 0 for rare actions, < 0 for the data
    # action. (Adjacent grid steps are noisier: measured 13-14 of 18 rare-action steps up.)
    slopes = np.polyfit(grid, q[s], 1)[0]                      # [A]
    assert np.all(slopes[rare] > 0) and slopes[frequent[s]] < 0, slopes


def test_synthetic_bandit_with_the_monotone_head_rare_actions_rise_the_data_action_stays():
  """The bandit above with the default (monotone) head: the rare actions still rise with delta
  (their exact values do), and the data action, whose exact value falls, cannot: every
  action's Q is nondecreasing along the grid, by construction, and the frequent action stays
  the greedy one at every delta (its exact value is the highest at every delta too)."""
  keras.utils.set_random_seed(0)
  cfg = ccvl_agent.CCVLConfig(num_deltas=8, num_pairs=2, alpha=1.0, gamma=0.0,
                              td_loss="squared", dr3_coef=0.0, learning_rate=3e-3,
                              adam_epsilon=1e-7, target_update_period=10, delta_head="monotone",
                              reading=paper.Paper())
  agent = ccvl_agent.CCVLAgent(*_specs(3, 4), cfg, TINY,
                               inverse_count_fn=lambda o: tf.fill([tf.shape(o)[0]], 1.0))
  rng = np.random.default_rng(0)
  frequent = np.array([0, 2, 3])

  def sample(_):
    s = rng.integers(0, 3, 64)
    a = np.where(rng.random(64) < 0.6, frequent[s], rng.integers(0, 4, 64))  # 0.7 in total
    obs = np.eye(3, dtype=np.float32)[s]
    return {"observation": obs, "action": a, "reward": np.zeros(64, np.float32),
            "next_observation": obs, "terminal": np.ones(64, np.float32)}
  _train(agent, sample, 1000)
  grid = np.linspace(0.05, 0.95, 7).astype(np.float32)
  q = agent.q_values(np.eye(3, dtype=np.float32), grid).numpy()   # [S, K, A]
  assert np.all(np.diff(q, axis=1) >= -1e-6)
  for s in range(3):
    rare = [a for a in range(4) if a != frequent[s]]
    assert np.all(q[s, -1, rare] > q[s, 0, rare]), q[s]
    assert np.all(q[s].argmax(-1) == frequent[s]), q[s]


@pytest.mark.slow
def test_gridworld_training_against_tabular_ccvl():
  """A few thousand cheap steps on the paper's gridworld dataset (one-hot states, exact n(s)).

  Measured on this code (seed 0, alpha 0.2, 1500 steps, ~4 s): the greedy policy at
  delta = 0.4375 agrees with the exact tabular CCVL (regularized) policy at the same delta on
  35/37 visited non-terminal states and both take the long, safe route; the CCVL loss falls
  by ~8%. The threshold below (0.85) leaves room for numeric differences across machines.

  What only the regularizer produces: at the 4 visited states where some action never occurs
  in the data, the exact solution sends the unseen actions to -inf (nothing anchors them, the
  penalty pushes them down), while plain TD leaves them wherever the network generalizes. The
  margin max_{seen a} Q - max_{unseen a} Q, averaged over those states, measured 0.47 (seeds
  1-3: 0.97, 0.45, 0.40) with the regularizer, but 0.09 (0.07, -0.01, 0.07) with the CQL gap
  under tf.stop_gradient and 0.08 with alpha = 0; the test asks for 0.25. (Agreement and route
  alone do not tell the two apart at seed 0: the gap-less run also scores 34/37, "long".)
  The per-delta ordering of Q is NOT asserted here: see docs/agent.md (on this dataset even
  the exact tabular solution of Eq. cql update has V(s, delta) *decreasing* in delta at 89% of
  the visited states, and the trained network's delta-trend is at noise level).
  """
  env = gridworld.GridWorld()
  data = tds.make_gridworld_dataset(seed=0)
  s_count, a_count = env.num_states, env.num_actions
  exact = counts.ExactInverseCounts(data.state, s_count)
  keras.utils.set_random_seed(0)
  cfg = ccvl_agent.CCVLConfig(num_deltas=4, num_pairs=2, alpha=0.2, gamma=env.gamma,
                              td_loss="squared", dr3_coef=0.0, learning_rate=3e-3,
                              adam_epsilon=1e-7, target_update_period=10,
                              reading=paper.Paper())
  agent = ccvl_agent.CCVLAgent(
      *_specs(s_count, a_count), cfg,
      networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=16, hidden_units=64),
      inverse_count_fn=exact.inverse_count_one_hot)
  rng = np.random.default_rng(0)
  def sample(_):
    idx = rng.integers(0, len(data), 64)
    return {"observation": env.one_hot(data.state[idx]), "action": data.action[idx],
            "reward": data.reward[idx], "next_observation": env.one_hot(data.next_state[idx]),
            "terminal": data.terminal[idx]}
  losses = _train(agent, sample, 1500)
  assert losses[-50:].mean() < losses[:50].mean()
  assert np.all(np.isfinite(losses))

  delta = 0.4375
  model = learners.empirical_model(data, s_count, a_count)
  q_tab = learners.ccvl_regularized_q(model, env.gamma, cfg.alpha, [delta])[0]   # [S, A]
  q_net = agent.q_values(env.one_hot(np.arange(s_count)), delta).numpy()[:, 0]    # [S, A]
  visited = model.seen_s & ~env.terminal_mask
  agreement = np.mean((q_net.argmax(-1) == vi.greedy_policy(q_tab))[visited])
  assert agreement >= 0.85, agreement
  assert env.route_name(q_net.argmax(-1)) == env.route_name(vi.greedy_policy(q_tab)) == "long"
  # The regularizer's own effect: unseen actions pushed below the seen ones.
  partly_seen = visited & ~model.seen_sa.all(-1)                                  # [S]
  assert partly_seen.sum() == 4
  assert np.all(np.isneginf(q_tab[partly_seen][~model.seen_sa[partly_seen]]))   # exact: -inf
  best_seen = np.where(model.seen_sa, q_net, -np.inf).max(-1)[partly_seen]
  best_unseen = np.where(model.seen_sa, -np.inf, q_net).max(-1)[partly_seen]
  margin = np.mean(best_seen - best_unseen)
  assert margin > 0.25, (margin, best_seen - best_unseen)


@pytest.mark.slow
def test_default_family_on_the_gridworld_is_ordered_varies_and_agrees_with_its_exact_solution():
  """The neural agent in the reading `bonus` (Eq. update's bonus with the support head and
  the monotone head; the gridworld's default reading until docs/gridworld_reading.md), the
  family study's network and 6,000 steps on one-hot states with exact n(s)^-1, on
  dataset 0 at alpha 0.2 (measured: V ordered 1.0, varying 0.135, V max 0.969, agreement
  0.924), against the exact tabular family of the same reading
  (ccvl_tf/experiments/gridworld/family.py) on the 10-point grid: V(s, delta) nondecreasing
  along the grid at >= 0.9 of the visited states (Lemma 1), the greedy action varying along
  delta at >= 0.05 of them (the family is more than one policy), V <= 1.05 (no return exceeds
  1), and its greedy action one of the exact solution's greedy actions at >= 0.85 of the
  (delta, state) pairs. The earlier default (logsumexp gap, monotone head) varied at 0-5%."""
  from ccvl_tf.algorithm import belief
  from ccvl_tf.experiments.gridworld import family
  env = gridworld.GridWorld()
  data = tds.make_gridworld_dataset(seed=0)
  reading = "bonus"  # the gridworld's reading when this was measured (family.GRIDWORLD_READING)
  grid = belief.delta_grid(10)
  model = learners.empirical_model(data, env.num_states, env.num_actions)
  visited = model.seen_s & ~env.terminal_mask
  exact = family.exact_family(model, env.gamma, 0.2, grid, reading)
  agent = family.train_neural(env, data, reading, 0.2, seed=0, steps=6000)
  q = family.neural_family(agent, env, grid)                           # [K, S, A]
  stats = learners.family_stats(q, visited)
  agreement = family.greedy_agreement(q, exact, visited)
  assert stats["v_nondecreasing_share"] >= 0.9, (reading, stats)
  assert stats["greedy_varies_share"] >= 0.05, (reading, stats)
  assert stats["v_max"] <= 1.05, (reading, stats)
  assert agreement >= 0.85, (reading, agreement)