"""One online torso pass over [s; s']: the loss and every gradient equal the
two-pass computation (Q and phi(s) from q_and_phi_model on s, phi(s') from phi_model on s'),
for CCVL (both delta entries, lower and upper objective) and the CQL / REM / AEVL baselines.

The two-pass reference is written out here from the public models, not taken from the code
under test; tolerances are float32 reduction-order noise (the two computations batch the
convolutions differently)."""
import dataclasses

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import aevl_agent
from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.agents import cql_agent
from ccvl_tf.agents import rem_agent
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm import networks

SHAPE = (40, 40, 2)  # the smallest cheap frame the Nature torso takes (>= 36 per side)
SMALL_NATURE = networks.QNetworkConfig(torso="nature", torso_units=32, n_cos=8,
                                       hidden_units=16)
SMALL_CONV = dataclasses.replace(SMALL_NATURE, delta_entry="conv")
MINATAR = networks.QNetworkConfig(torso="minatar", torso_units=16, n_cos=8, hidden_units=16)


def _specs(shape, dtype, num_actions=3):
  obs_spec = tf.TensorSpec(shape, dtype)
  act_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1)
  return ts.time_step_spec(obs_spec), act_spec


def _batch(shape, dtype, b=4, num_actions=3, seed=0):
  rng = np.random.default_rng(seed)
  if dtype == tf.uint8:
    obs = lambda: rng.integers(0, 256, (b, *shape), np.uint8)  # noqa: E731
  else:
    obs = lambda: (rng.random((b, *shape)) < 0.3).astype(np.float32)  # noqa: E731
  return {"observation": tf.constant(obs()), "next_observation": tf.constant(obs()),
          "action": tf.constant(rng.integers(0, num_actions, b), tf.int32),
          "reward": tf.constant(rng.random(b), tf.float32),
          "terminal": tf.constant([0.0, 1.0, 0.0, 0.0][:b], tf.float32)}


def _assert_same_loss_and_grads(loss_fn_a, loss_fn_b, variables, rtol=2e-5, atol=1e-6):
  with tf.GradientTape(persistent=True) as tape:
    out_a, out_b = loss_fn_a(), loss_fn_b()
  grads_a = tape.gradient(out_a["loss"], variables)
  grads_b = tape.gradient(out_b["loss"], variables)
  np.testing.assert_allclose(float(out_a["loss"]), float(out_b["loss"]), rtol=rtol)
  np.testing.assert_allclose(float(out_a["dr3_penalty"]), float(out_b["dr3_penalty"]),
                             rtol=rtol)
  assert float(out_a["dr3_penalty"]) > 0
  nonzero = 0
  for v, ga, gb in zip(variables, grads_a, grads_b):
    assert ga is not None and gb is not None, v.name
    scale = max(float(tf.reduce_max(tf.abs(gb))), 1e-8)
    np.testing.assert_allclose(ga.numpy(), gb.numpy(), rtol=rtol, atol=atol * scale + 1e-9,
                               err_msg=v.name)
    nonzero += int(float(tf.reduce_max(tf.abs(ga))) > 0)
  assert nonzero == len(variables)  # every layer, torso included, gets a gradient


@pytest.mark.parametrize("net_config,shape,dtype", [
    (SMALL_NATURE, SHAPE, tf.uint8),
    (SMALL_CONV, SHAPE, tf.uint8),
    (MINATAR, (10, 10, 4), tf.float32),
])
def test_q_phi_and_next_phi_equals_two_passes(net_config, shape, dtype):
  keras.utils.set_random_seed(1)
  net = networks.build_ccvl_network(shape, dtype.name, 3, net_config)
  batch = _batch(shape, dtype)
  delta = tf.constant(np.random.default_rng(0).random((4, 5)), tf.float32)  # [B, K]
  q, phi, next_phi = networks.q_phi_and_next_phi(net, batch["observation"],
                                                 batch["next_observation"], delta)
  ref = net.q_and_phi_model({"observation": batch["observation"], "delta": delta})
  ref_next = net.phi_model({"observation": batch["next_observation"]})
  np.testing.assert_allclose(q.numpy(), ref["q"].numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(phi.numpy(), ref["phi"].numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(next_phi.numpy(), ref_next.numpy(), rtol=1e-5, atol=1e-6)
  assert q.shape == (4, 5, 3) and phi.shape == next_phi.shape == (4, net.phi_dim)


def _two_pass_network(net):
  """The same layers without the torso split: q_phi_and_next_phi falls back to two passes."""
  return dataclasses.replace(net, torso_model=None, head_model=None, features_phi_model=None)


@pytest.mark.parametrize("net_config", [SMALL_NATURE, SMALL_CONV])
@pytest.mark.parametrize("reading", [readings.paper.Paper(), readings.bound.Bound()])
def test_reading_objective_single_pass_equals_two_passes(net_config, reading):
  keras.utils.set_random_seed(2)
  # delta_entry='conv' exists for the cosine head only (the monotone head reads the features)
  head = "cosine" if net_config.delta_entry == "conv" else "monotone"
  cfg = ccvl_agent.CCVLConfig(num_deltas=3, num_pairs=2, alpha=0.5, dr3_coef=0.5,
                              reading=reading, delta_head=head)
  agent = ccvl_agent.CCVLAgent(*_specs(SHAPE, tf.uint8), cfg, net_config, dataset_size=100)
  batch = agent.prepare_batch(_batch(SHAPE, tf.uint8))
  delta, delta_1, delta_2 = losses.sample_confidences(4, 3, 2, tf.constant([3, 4], tf.int64))
  inv = lambda obs, phi: tf.fill([tf.shape(obs)[0]], 0.3)  # noqa: E731
  online, target = agent.online_network, agent.target_network
  assert online.torso_model is not None
  _assert_same_loss_and_grads(
      lambda: reading.objective(online, target, batch, delta, delta_1, delta_2, inv, cfg,
                                training=True),
      lambda: reading.objective(_two_pass_network(online), target, batch, delta, delta_1,
                                delta_2, inv, cfg, training=True),
      online.trainable_variables)


def test_upper_objective_single_pass_equals_two_passes():
  keras.utils.set_random_seed(3)
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, alpha=0.5, dr3_coef=0.5)
  agent = ccvl_bounds_agent.UpperCCVLAgent(*_specs(SHAPE, tf.uint8), cfg, SMALL_NATURE,
                                           dataset_size=100)
  batch = agent.prepare_batch(_batch(SHAPE, tf.uint8))
  delta, delta_1, delta_2 = losses.sample_confidences(4, 2, 2, tf.constant([5, 6], tf.int64))
  inv = lambda obs, phi: tf.fill([tf.shape(obs)[0]], 0.3)  # noqa: E731
  bounds = ccvl_bounds_agent.BoundsConfig()
  online, target = agent.online_network, agent.target_network
  upper = ccvl_bounds_agent.UpperBound(cfg, bounds)
  _assert_same_loss_and_grads(
      lambda: upper.objective(online, target, batch, delta, delta_1, delta_2, inv, cfg, True),
      lambda: upper.objective(_two_pass_network(online), target, batch, delta, delta_1,
                              delta_2, inv, cfg, True),
      online.trainable_variables)


def _baseline_two_pass(agent, batch):
  """The baselines' objective with the online network run separately on s and s'."""
  # pylint: disable=protected-access
  net = agent.online_network
  out = net.q_and_phi_model({"observation": batch["observation"]}, training=True)
  next_phi = net.phi_model({"observation": batch["next_observation"]}, training=True)
  next_q = tf.stop_gradient(agent.target_network.q_model(
      {"observation": batch["next_observation"]}))
  q, phi = out["q"], out["phi"]
  original = agent._forward
  agent._forward = lambda b, training: (q, phi, next_q, next_phi)
  try:
    return agent._objective(batch, tf.constant([0, 0], tf.int64), training=True)
  finally:
    agent._forward = original


@pytest.mark.parametrize("make", [
    lambda s: cql_agent.CQLAgent(*s, cql_agent.CQLConfig(alpha=0.5, dr3_coef=0.5), MINATAR),
    lambda s: rem_agent.REMAgent(*s, rem_agent.REMConfig(num_heads=3, dr3_coef=0.5), MINATAR),
    lambda s: aevl_agent.AEVLAgent(*s, aevl_agent.AEVLConfig(num_members=2, dr3_coef=0.5),
                                   MINATAR),
], ids=["cql", "rem", "aevl"])
def test_baseline_single_pass_equals_two_passes(make):
  keras.utils.set_random_seed(4)
  agent = make(_specs((10, 10, 4), tf.float32))
  batch = agent.prepare_batch(_batch((10, 10, 4), tf.float32))
  seed = tf.constant([0, 0], tf.int64)
  _assert_same_loss_and_grads(
      lambda: agent._objective(batch, seed, training=True),  # pylint: disable=protected-access
      lambda: _baseline_two_pass(agent, batch),
      agent.online_network.trainable_variables)
