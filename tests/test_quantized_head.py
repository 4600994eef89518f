"""delta_head='quantized' (paper Sec. 5's ensemble of fixed deltas): values by hand, the bins of
delta, Lemma 1 for both signs, which layers each delta trains, a CCVL and a bounds train step,
the SavedModel round trip and the refusals of a grid that is not the members'."""
import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.algorithm import belief
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.experiments import agent_registry
from tests import policy_compare

# Two-unit identity torso, no hidden layer: psi(s) = relu(s), member outputs x_k = psi W_k + b_k.
HAND = networks.QNetworkConfig(torso="mlp", mlp_units=(2,), n_cos=4, hidden_units=0)
# Each member with its own hidden layer (hidden_units > 0).
TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=6)


def _inv_softplus(y):
  return np.log(np.expm1(y))


def _hand_network(sign):
  """K = 4 members, A = 2 actions, weights set by hand:
  x_0(s) = psi(s) + [1, -1] (W_0 = I); x_j = softplus^-1(4 u_j) with the steps
  u_1, u_2, u_3 = [0.5, 0.25], [1.0, 0.25], [0.25, 0.25] (W_j = 0)."""
  net = networks.build_ccvl_network((2,), np.float32, 2, HAND, name="h", delta_head="quantized",
                                    delta_sign=sign, delta_members=4)
  layers = {layer.name: layer for layer in net.q_model.layers}
  layers["h_mlp0"].set_weights([np.eye(2, dtype=np.float32), np.zeros(2, np.float32)])
  layers["h_m0_q"].set_weights([np.eye(2, dtype=np.float32), np.array([1.0, -1.0], np.float32)])
  steps = np.array([[0.5, 0.25], [1.0, 0.25], [0.25, 0.25]], np.float32)
  for j in (1, 2, 3):
    layers[f"h_m{j}_q"].set_weights([np.zeros((2, 2), np.float32),
                                     _inv_softplus(4 * steps[j - 1]).astype(np.float32)])
  return net


# Deltas in every bin of K = 4, the bin edges included (k / 4 is bin k's; 1 is the top bin's).
DELTAS = np.array([0.0, 0.1, 0.25, 0.375, 0.4999, 0.5, 0.625, 0.75, 0.99, 1.0], np.float32)
BINS = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_values_by_hand_in_every_bin_and_at_the_edges(sign):
  """s = [1, 2]: x_0 = [2, 1]. Lower bound: Q_0 = [2, 1], Q_1 = Q_0 + u_1 = [2.5, 1.25],
  Q_2 = [3.5, 1.5], Q_3 = [3.75, 1.75]. Upper bound (sign -1): the steps summed from the top,
  Q_3 = [2, 1], Q_2 = [2.25, 1.25], Q_1 = [3.25, 1.5], Q_0 = [3.75, 1.75]."""
  net = _hand_network(sign)
  members = ({1.0: [[2.0, 1.0], [2.5, 1.25], [3.5, 1.5], [3.75, 1.75]],
              -1.0: [[3.75, 1.75], [3.25, 1.5], [2.25, 1.25], [2.0, 1.0]]}[sign])
  obs = np.array([[1.0, 2.0]], np.float32)
  q = net.q_model({"observation": obs, "delta": DELTAS[None]}).numpy()[0]   # [10, 2]
  np.testing.assert_allclose(q, np.array(members)[BINS], rtol=1e-6, atol=1e-6)
  # Another state moves the base only: s = [3, 0] -> x_0 = [4, -1], the same steps.
  q2 = net.q_model({"observation": np.array([[3.0, 0.0]], np.float32),
                    "delta": DELTAS[None]}).numpy()[0]
  np.testing.assert_allclose(q2 - q, np.tile([[2.0, -2.0]], (10, 1)), rtol=1e-6, atol=1e-6)


def test_member_of_a_delta_is_its_bin_and_the_grid_deltas_are_the_members():
  np.testing.assert_array_equal(networks.member_index(DELTAS, 4).numpy(), BINS)
  # Outside (0, 1) the end members (the loss's delta_1, delta_2 <= delta stay inside).
  np.testing.assert_array_equal(networks.member_index(np.array([-0.5, 1.5]), 4).numpy(), [0, 3])
  for k_count in (1, 3, 8, 16):
    np.testing.assert_array_equal(
        networks.member_index(belief.delta_grid(k_count), k_count).numpy(), np.arange(k_count))


def test_q_is_piecewise_constant_in_delta():
  """Any weights: Q at a uniform delta is Q at the grid delta of its bin."""
  net = networks.build_ccvl_network((5,), np.float32, 3, TINY, delta_head="quantized",
                                    delta_members=8)
  rng = np.random.default_rng(1)
  for v in net.q_model.trainable_variables:
    v.assign(rng.normal(0, 1, v.shape).astype(np.float32))
  obs = rng.normal(size=(4, 5)).astype(np.float32)
  deltas = rng.uniform(0, 1, (4, 64)).astype(np.float32)
  grid = belief.delta_grid(8)
  q = net.q_model({"observation": obs, "delta": deltas}).numpy()                   # [4, 64, 3]
  at_grid = net.q_model({"observation": obs, "delta": np.tile(grid[None], (4, 1))}).numpy()
  bins = np.minimum(np.floor(deltas * 8).astype(int), 7)                          # [4, 64]
  np.testing.assert_array_equal(q, np.take_along_axis(at_grid, bins[..., None], axis=1))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_lemma_1_for_any_weights_and_the_upper_bound_is_the_reflection(sign):
  net = networks.build_ccvl_network((5,), np.float32, 4, TINY, delta_head="quantized",
                                    delta_sign=sign, delta_members=8)
  rng = np.random.default_rng(0)
  for v in net.q_model.trainable_variables:  # arbitrary weights, large ones included
    v.assign(rng.normal(0, 3, v.shape).astype(np.float32))
  obs = rng.normal(size=(6, 5)).astype(np.float32)
  grid = np.sort(rng.uniform(0, 1, 200)).astype(np.float32)
  q = net.q_model({"observation": obs, "delta": np.tile(grid[None], (6, 1))}).numpy()
  steps = sign * np.diff(q, axis=1)                                  # [B, K-1, A]
  assert np.all(steps >= 0), steps.min()
  assert np.max(steps) > 0
  # phi(s) is the shared torso's output psi(s), with no delta in it.
  out = net.q_and_phi_model({"observation": obs, "delta": np.tile(grid[None], (6, 1))})
  np.testing.assert_array_equal(out["phi"].numpy(),
                                net.torso_model({"observation": obs}).numpy())
  if sign < 0:  # Q_u with Q_l's weights: Q_u(delta) = Q_l(0) + Q_l(1) - Q_l(delta)
    lower = networks.build_ccvl_network((5,), np.float32, 4, TINY, name="low",
                                        delta_head="quantized", delta_members=8)
    networks.copy_weights(net, lower)
    ql = lower.q_model({"observation": obs, "delta": np.tile(grid[None], (6, 1))}).numpy()
    ends = lower.q_model({"observation": obs,
                          "delta": np.tile([[0.0, 1.0]], (6, 1)).astype(np.float32)}).numpy()
    np.testing.assert_allclose(q, ends[:, :1] + ends[:, 1:] - ql, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_delta_trains_the_base_and_the_steps_up_to_its_member_and_the_shared_torso(sign):
  """A loss on deltas of bin k only: member 0's layers (the base) and those of the steps on the
  way to Q_k (members 1..k; with sign -1 members k+1..K-1) get a gradient, the other members'
  layers exactly zero, the shared torso always. In particular the top member's layers are
  trained by the top bin's deltas alone (sign +1) and member 1's by bin 0's alone (sign -1)."""
  k_count = 4
  net = networks.build_ccvl_network((5,), np.float32, 3, TINY, name="g", delta_head="quantized",
                                    delta_sign=sign, delta_members=k_count)
  obs = np.random.default_rng(0).normal(size=(8, 5)).astype(np.float32)
  variables = net.q_model.trainable_variables
  names = [v.path for v in variables]
  for k in range(k_count):
    deltas = np.random.default_rng(k).uniform(k / k_count, (k + 1) / k_count,
                                               (8, 3)).astype(np.float32)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(net.q_model({"observation": obs, "delta": deltas})))
    grads = dict(zip(names, tape.gradient(loss, variables)))
    trained = {0} | (set(range(1, k + 1)) if sign > 0 else set(range(k + 1, k_count)))
    for j in range(k_count):
      member = [n for n in names if n.startswith(f"g_m{j}_")]
      assert len(member) == 4, member  # its own hidden layer and output Dense
      for n in member:
        moved = float(tf.reduce_max(tf.abs(grads[n]))) > 0
        assert moved == (j in trained), (k, n)
    assert all(float(tf.reduce_max(tf.abs(grads[n]))) > 0 for n in names if "g_mlp0" in n)


def _specs(num_obs, num_actions):
  obs_spec = tf.TensorSpec((num_obs,), tf.float32)
  act_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1)
  return ts.time_step_spec(obs_spec), act_spec


def _batch(b, num_obs, num_actions, seed=0):
  rng = np.random.default_rng(seed)
  return {
      "observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
      "action": rng.integers(0, num_actions, b).astype(np.int32),
      "reward": rng.random(b).astype(np.float32),
      "next_observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
      "terminal": (rng.random(b) < 0.2).astype(np.float32),
  }


CONFIG = ccvl_agent.CCVLConfig(num_deltas=4, num_pairs=2, alpha=0.5, dr3_coef=0.1,
                               delta_head="quantized", delta_members=4)


def _moved(before, variables):
  return [v.path for v, b in zip(variables, before) if np.array_equal(v.numpy(), b)]


@pytest.mark.slow
def test_ccvl_train_step_touches_every_member():
  """32 transitions x N = 4 deltas ~ U(0, 1) span the 4 bins: the loss is finite and one Adam
  step moves every trainable variable (every member's layers, the torso)."""
  keras.utils.set_random_seed(0)
  agent = ccvl_agent.CCVLAgent(*_specs(5, 3), CONFIG, TINY, dataset_size=100)
  variables = agent.online_network.trainable_variables
  assert sum("_m3_q" in v.path for v in variables) == 2
  before = [v.numpy().copy() for v in variables]
  metrics = agent.train_on_batch(_batch(32, 5, 3))
  assert bool(metrics["finite"]) and np.isfinite(float(metrics["loss"]))
  assert _moved(before, variables) == []


@pytest.mark.slow
def test_bounds_agent_trains_both_bounds_and_explores_on_the_members_grid():
  keras.utils.set_random_seed(0)
  bounds = ccvl_bounds_agent.BoundsConfig(num_grid_deltas=4)
  agent = ccvl_bounds_agent.CCVLBoundsAgent(*_specs(5, 3), CONFIG, TINY, bounds,
                                            dataset_size=100)
  grid = belief.delta_grid(4)
  states = np.eye(5, dtype=np.float32)
  ql = agent.lower.q_values(states, grid).numpy()                      # [5, 4, 3]
  qu = agent.upper.q_values(states, grid).numpy()
  assert np.all(np.diff(ql, axis=1) > 0) and np.all(np.diff(qu, axis=1) < 0)
  variables = agent.lower.online_network.trainable_variables + \
      agent.upper.online_network.trainable_variables
  before = [v.numpy().copy() for v in variables]
  metrics = agent.train_on_batch(_batch(32, 5, 3))
  assert np.isfinite(float(metrics["loss"]))
  assert _moved(before, variables) == []
  qu = agent.upper.q_values(states, grid).numpy()
  assert np.all(np.diff(qu, axis=1) <= 0)  # still ordered after training (by construction)


@pytest.mark.slow
def test_export_and_reload_acts_the_same(tmp_path):
  """The adaptive policy (belief over the 4 members) and Fixed-CCVL's at a grid delta, exported
  and run in a fresh TensorFlow-only process: the same actions, deltas and states."""
  keras.utils.set_random_seed(0)
  net = networks.build_ccvl_network((2,), np.float32, 3, TINY, delta_head="quantized",
                                    delta_members=4)
  tss, aspec = _specs(2, 3)
  built = {"adaptive": policies.ConfidenceAdaptivePolicy(
               tss, aspec, net.q_model, num_grid_deltas=4, gamma=0.9, temperature=0.01,
               sample_delta=True, seed=5),
           "fixed": policies.FixedDeltaPolicy(tss, aspec, net.q_model, delta=0.625)}
  for name, policy in built.items():
    policies.export_policy(policy, str(tmp_path / name))
  rng = np.random.RandomState(0)
  step_type = np.array([[0, 0], [1, 1], [1, 1], [2, 1], [0, 1], [1, 2]], np.int32)
  data = dict(step_type=step_type,
              reward=np.where(step_type == 0, 0.0, rng.uniform(0, 1, (6, 2))).astype(np.float32),
              discount=np.where(step_type == 2, 0.0, 1.0).astype(np.float32),
              observation=rng.uniform(-1, 1, (6, 2, 2)).astype(np.float32))
  child = policy_compare.saved_policy_steps(tmp_path, list(built), data, tmp_path, timeout=120)
  for name, policy in built.items():
    policy_compare.assert_same_steps(child, policy_compare.in_process_steps(policy, data), name)
  assert set(np.concatenate([child[f"adaptive/delta/{i}"] for i in range(6)]).tolist()) <= set(
      belief.delta_grid(4).tolist())


EXPECTED = ("num_grid_deltas must be 8, the delta_members of delta_head='quantized' (one "
            "member per grid delta (k + 0.5) / K), got 16")


def test_a_grid_other_than_the_members_is_refused_in_one_line():
  settings = agent_registry.make_settings(num_grid_deltas=16, delta_head="quantized",
                                          dataset_size=100)
  spec = agent_registry.get_agent_spec("ccvl")
  with pytest.raises(ValueError) as e:
    spec.resolve(settings)
  assert str(e.value) == EXPECTED
  # The same settings with the members' grid resolve.
  ok = spec.resolve(agent_registry.make_settings(num_grid_deltas=8, delta_head="quantized"))
  assert ok.agent_config.delta_members == 8
  # The online learners: the exploration belief's grid (BoundsConfig.num_grid_deltas).
  online = agent_registry.make_settings(
      delta_head="quantized", bounds=ccvl_bounds_agent.BoundsConfig(num_grid_deltas=16))
  with pytest.raises(ValueError, match="^num_grid_deltas must be 8, "):
    agent_registry.get_agent_spec("ccvl_bounds", offline=False).resolve(online)
  # A policy built by hand on such a network.
  net = networks.build_ccvl_network((5,), np.float32, 3, TINY, delta_head="quantized",
                                    delta_members=8)
  with pytest.raises(ValueError) as e:
    policies.ConfidenceAdaptivePolicy(*_specs(5, 3), net.q_model, num_grid_deltas=16)
  assert str(e.value) == EXPECTED


def test_other_invalid_combinations_are_refused_naming_the_setting():
  with pytest.raises(ValueError, match="^delta_members takes effect only with "
                                       "delta_head='quantized'"):
    ccvl_agent.CCVLConfig(delta_members=4).validate()
  with pytest.raises(ValueError, match="delta_members must be"):
    ccvl_agent.CCVLConfig(delta_head="quantized", delta_members=0).validate()
  with pytest.raises(ValueError, match="delta_head='quantized' needs delta_entry='features'"):
    networks.build_ccvl_network((84, 84, 4), np.uint8, 3,
                                networks.QNetworkConfig(delta_entry="conv"),
                                delta_head="quantized", delta_members=8)
  with pytest.raises(ValueError, match="^delta_members must be an integer >= 1"):
    networks.build_ccvl_network((5,), np.float32, 3, TINY, delta_head="quantized",
                                delta_members=0)
