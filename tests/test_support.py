"""ccvl_tf/algorithm/support.py and the support head: the mask by hand (values and gradients), the
network's masked Q-model, the agent's behaviour-cloning term, and an exported policy that never
picks an action the data does not take."""
import math
import subprocess
import sys

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import networks, policies, support
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm.readings import bonus, paper
from ccvl_tf.algorithm.support import SupportMask


def test_mask_by_hand_values_and_gradient():
  """pi = (0.6, 0.35, 0.05), tau 0.1: ratios (1, 0.583, 0.083) -> action 2 is outside the
  support. Its value is min_a Q - 1 at each delta: 1 - 1 = 0 and 2 - 1 = 1. The gradient of the
  sum of the masked Q: 1 on the supported actions, and the masked slot's 1 flows to the
  smallest action (action 0), which is where min_a Q takes it."""
  q = tf.Variable([[[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]])                  # [1, K=2, A=3]
  logits = tf.constant([[math.log(0.6), math.log(0.35), math.log(0.05)]])
  with tf.GradientTape() as tape:
    masked = SupportMask(0.1)([q, logits])
    total = tf.reduce_sum(masked)
  np.testing.assert_allclose(masked.numpy(), [[[1.0, 2.0, 0.0], [2.0, 3.0, 1.0]]], rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(total, q).numpy(), [[[2.0, 1.0, 0.0], [2.0, 1.0, 0.0]]])
  # tau below every ratio: nothing is masked.
  np.testing.assert_allclose(SupportMask(0.05)([q, logits]).numpy(), q.numpy())


def test_mask_keeps_a_family_nondecreasing_in_delta():
  q = tf.constant(np.sort(np.random.default_rng(0).normal(size=(4, 5, 3)), axis=1),
                  tf.float32)                                            # nondecreasing in K
  logits = tf.constant(np.random.default_rng(1).normal(size=(4, 3)) * 3, tf.float32)
  masked = SupportMask(0.3)([q, logits]).numpy()
  assert np.all(np.diff(masked, axis=1) >= 0)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_threshold_outside_the_open_interval_is_refused(bad):
  with pytest.raises(ValueError, match="support_threshold must be in"):
    SupportMask(bad)


def test_network_masks_its_q_model_and_keeps_the_raw_q():
  net = networks.build_ccvl_network((5,), "float32", 3, networks.QNetworkConfig(
      torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8), delta_head="monotone",
      support_threshold=0.2)
  obs = tf.constant(np.eye(5, dtype=np.float32))
  delta = tf.constant(np.tile([[0.25, 0.75]], (5, 1)), tf.float32)
  out = net.q_and_phi_model({"observation": obs, "delta": delta})
  assert set(out) == {"q", "phi", "q_raw", "support_logits"}
  expected = SupportMask(0.2)([out["q_raw"], out["support_logits"]])
  np.testing.assert_allclose(net.q_model({"observation": obs, "delta": delta}).numpy(),
                             expected.numpy(), rtol=1e-6)
  np.testing.assert_allclose(out["q"].numpy(), expected.numpy(), rtol=1e-6)
  # The head split at the torso gives the same outputs.
  head = net.head_model({"features": net.torso_model({"observation": obs}), "delta": delta})
  np.testing.assert_allclose(head["q"].numpy(), out["q"].numpy(), rtol=1e-6)
  # Without a support head the outputs are as before.
  plain = networks.build_ccvl_network((5,), "float32", 3, networks.QNetworkConfig(
      torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8), delta_head="monotone")
  assert set(plain.q_and_phi_model({"observation": obs, "delta": delta})) == {"q", "phi"}


def _agent(**cfg):
  obs_spec = tensor_spec.TensorSpec([3], tf.float32, name="observation")
  action_spec = tensor_spec.BoundedTensorSpec([], tf.int32, 0, 2, name="action")
  config = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, alpha=0.1, gamma=0.9,
                                 td_loss="squared", dr3_coef=0.0, learning_rate=1e-2,
                                 adam_epsilon=1e-7, target_update_period=5,
                                 reading=bonus.Bonus(**cfg), delta_head="monotone", seed=0)
  tf.keras.utils.set_random_seed(0)
  agent = ccvl_agent.CCVLAgent(
      ts.time_step_spec(obs_spec), action_spec, config,
      networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=4, hidden_units=16),
      inverse_count_fn=lambda obs: tf.ones([tf.shape(obs)[0]]))
  return agent, ts.time_step_spec(obs_spec), action_spec


def _batch(rng, n=32):
  """States 0-2 (one-hot), terminal; the data takes action 1 at state 0 (reward 0) and actions
  0 or 2 elsewhere, each with reward 1. Action 0 and 2 are never taken at state 0."""
  s = rng.integers(0, 3, n)
  a = np.where(s == 0, 1, rng.choice([0, 2], n))
  r = np.where(s == 0, 0.0, 1.0).astype(np.float32)
  obs = np.eye(3, dtype=np.float32)[s]
  return {"observation": obs, "action": a.astype(np.int32), "reward": r,
          "next_observation": obs, "terminal": np.ones(n, np.float32)}


def test_agent_trains_the_support_head_and_its_policy_stays_in_the_data():
  """At state 0 the data takes action 1 only (reward 0), so a greedy policy over the unmasked
  Q may prefer an action the data never took there (nothing trains it); with the support head
  the policy takes action 1. The BC term is part of the loss (its metrics are reported)."""
  agent, time_step_spec, action_spec = _agent(support_threshold=0.05)
  rng = np.random.default_rng(0)
  for _ in range(300):
    metrics = agent.train_on_batch(_batch(rng))
  assert "support_loss" in metrics and metrics["support_accuracy"] > 0.5
  obs = tf.constant(np.eye(3, dtype=np.float32))
  q = agent.q_values(obs, [0.5]).numpy()[:, 0]                      # [3, A]
  assert np.argmax(q[0]) == 1
  raw = agent.online_network.q_and_phi_model(
      {"observation": obs, "delta": tf.fill([3, 1], 0.5)})["q_raw"].numpy()[:, 0]
  assert q[0, 0] < q[0, 1] and q[0, 2] < q[0, 1]
  # The masked actions sit one unit below the smallest raw Q at that state.
  np.testing.assert_allclose(q[0, [0, 2]], raw[0].min() - support.SUPPORT_MARGIN, rtol=1e-5)


def test_support_gradient_reaches_the_head_through_the_bc_term():
  agent, _, _ = _agent(support_threshold=0.05)
  batch = {k: tf.constant(v) for k, v in _batch(np.random.default_rng(1), 8).items()}
  head = [v for v in agent.online_network.trainable_variables if "support" in v.path]
  assert head, [v.name for v in agent.online_network.trainable_variables]
  with tf.GradientTape() as tape:
    loss = agent._objective(batch, tf.constant([0, 0], tf.int32), training=True)["loss"]
  grads = tape.gradient(loss, head)
  assert all(g is not None and np.any(np.asarray(g) != 0) for g in grads)


@pytest.mark.slow
def test_exported_policy_with_a_support_head_loads_in_a_fresh_process(tmp_path):
  agent, time_step_spec, action_spec = _agent(support_threshold=0.05)
  rng = np.random.default_rng(0)
  for _ in range(300):
    agent.train_on_batch(_batch(rng))
  path = str(tmp_path / "policy")
  policies.export_policy(agent.policy, path, train_step=agent.train_step_counter)
  code = f"""
import numpy as np, tensorflow as tf
from tf_agents.trajectories import time_step as ts
p = tf.saved_model.load({path!r})
obs = tf.constant(np.eye(3, dtype=np.float32))
step = ts.restart(obs, batch_size=3)
print(p.action(step, p.get_initial_state(3)).action.numpy()[0])
"""
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.strip().splitlines()[-1] == "1"


def _fixed_network(q_row, logits_row, name):
  """A network whose Q(s, ., delta) is `q_row` at every state and delta, with behaviour logits
  `logits_row` (no weights that matter): for objectives by hand."""
  import keras
  from keras import ops
  obs = keras.Input((1,), name="observation")
  delta = keras.Input((None,), name="delta")
  q = ops.zeros_like(ops.expand_dims(delta, -1)) + ops.convert_to_tensor(q_row, "float32")
  logits = ops.zeros_like(obs) + ops.convert_to_tensor(logits_row, "float32")  # [B, A]
  outs = {"q": q, "phi": obs, "q_raw": q, "support_logits": logits}
  return networks.CCVLNetwork(
      q_model=keras.Model({"observation": obs, "delta": delta}, q, name=f"{name}_q"),
      phi_model=keras.Model({"observation": obs}, obs),
      q_and_phi_model=keras.Model({"observation": obs, "delta": delta}, outs),
      config=networks.QNetworkConfig(torso="mlp"), observation_shape=(1,),
      observation_dtype="float32", num_actions=2, phi_dim=1, support_threshold=0.05)


@pytest.mark.parametrize("counts,td", [("state", 0.125), ("state_action", 0.625)])
def test_the_bonus_with_per_action_counts_by_hand(counts, td):
  """One transition, a_D = 1, reward 0, terminal; Q(s, ., delta) = (1, 0); pi_beta = (0.8,
  0.2); n(s)^-1 = 0.25; alpha 1; delta = e^-1 (log 1/delta = 1); N = M = 1.
  'state': w = sqrt(1 * 0.25) = 0.5, y' = 0 - 0.5, TD = 1/2 (0 + 0.5)^2 = 0.125.
  'state_action': n(s, a_D)^-1 = 0.25 / 0.2 = 1.25, w = sqrt(1.25), TD = 1/2 (1.25) = 0.625.
  The behaviour-cloning term adds -log 0.2 = 1.609438 to the loss either way."""
  online = _fixed_network([1.0, 0.0], [math.log(0.8), math.log(0.2)], "online")
  target = _fixed_network([0.0, 0.0], [0.0, 0.0], "target")
  batch = {"observation": tf.constant([[0.0]]), "action": tf.constant([1]),
           "reward": tf.constant([0.0]), "next_observation": tf.constant([[0.0]]),
           "terminal": tf.constant([1.0])}
  cfg = ccvl_agent.CCVLConfig(num_deltas=1, num_pairs=1, alpha=1.0, gamma=0.9,
                              td_loss="squared", dr3_coef=0.0, reading=bonus.Bonus(
                                  support_threshold=0.05, bonus_counts=counts))
  d = tf.constant([[math.exp(-1.0)]])
  out = cfg.reading.objective(online, target, batch, d, d[:, :, None], d[:, :, None],
                              lambda obs, phi: tf.fill([tf.shape(obs)[0]], 0.25), cfg)
  np.testing.assert_allclose(out["ccvl_loss"].numpy(), td, rtol=1e-5)
  np.testing.assert_allclose(out["loss"].numpy(), td + 1.609438, rtol=1e-5)


def test_per_action_counts_need_the_bonus_and_a_support_head():
  with pytest.raises(ValueError, match="bonus_counts='state_action' needs a support head"):
    ccvl_agent.CCVLConfig(reading=bonus.Bonus(bonus_counts="state_action")).validate()
  with pytest.raises(ValueError, match=r"^--bonus_counts='state_action' is not an option of "
                                       r"reading 'bound'.*give --reading=bonus$"):
    readings.from_options({"objective": "bound", "bonus_counts": "state_action"})


def test_the_bonus_readings_gap_weight_is_refused_with_another_reading():
  # w0 weighs the gap only in readings/bonus.py; elsewhere it would be ignored without a word.
  for objective in ("algorithm1", "bound"):
    with pytest.raises(ValueError, match=r"^--gap_weight=0.3 is not an option of reading "
                                         r"'(paper|bound)'.*give --reading=bonus$"):
      readings.from_options({"objective": objective, "gap_weight": 0.3})
  assert readings.from_options({"objective": "bonus", "gap_weight": 0.3}) == bonus.Bonus(
      gap_weight=0.3)
  assert readings.from_options({"objective": "algorithm1", "gap_weight": 0.0}) == paper.Paper()
