"""The ladder's first rungs (docs/ladder.md): CCVL's settings that make its loss CQL's.

Expected values are computed here by hand with NumPy (logsumexp, Huber, softmax), not with the
code under test.
"""
import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.algorithm.readings import bound
from ccvl_tf.algorithm import networks


def _huber(x, kappa=1.0):
  a = np.abs(x)
  return np.where(a <= kappa, 0.5 * x * x, kappa * (a - 0.5 * kappa))


def _lse(q):
  m = q.max(-1, keepdims=True)
  return (m + np.log(np.exp(q - m).sum(-1, keepdims=True)))[..., 0]


def test_fixed_delta_fills_every_delta_and_keeps_pairs_below_it():
  delta, d1, d2 = losses.sample_confidences(3, 2, 4, tf.constant([1, 2]), fixed_delta=0.25)
  np.testing.assert_array_equal(delta.numpy(), np.full([3, 2], 0.25, np.float32))
  for pairs in (d1.numpy(), d2.numpy()):
    assert pairs.shape == (3, 2, 4)
    assert np.all(pairs > 0) and np.all(pairs <= 0.25)
  with pytest.raises(ValueError, match="delta"):
    losses.sample_confidences(3, 2, 4, tf.constant([1, 2]), fixed_delta=1.0)


def test_constant_delta_weight_drops_the_log_term():
  delta = tf.constant([[0.1, 0.9]])
  inv = tf.constant([0.25])
  # alpha sqrt(n^-1) = 2 * 0.5 = 1 at every delta; sqrt_log: 2 sqrt(log(1/delta) / 4).
  np.testing.assert_allclose(bound.confidence_weight(delta, inv, 2.0, "constant").numpy(),
                             [[1.0, 1.0]], rtol=1e-6)
  np.testing.assert_allclose(bound.confidence_weight(delta, inv, 2.0).numpy(),
                             [[np.sqrt(np.log(10.0)), np.sqrt(np.log(1 / 0.9))]], rtol=1e-5)
  d1 = tf.constant([[[0.5, 0.01]]])
  np.testing.assert_allclose(
      paper.regularizer_weight(d1, inv, 2.0, "constant").numpy(), [[[1.0, 1.0]]])
  with pytest.raises(ValueError, match="delta_weight"):
    losses.log_inverse_delta(delta, "linear")


def test_rung_one_pair_loss_is_cql_value_and_gradient():
  """N = M = 1, 'bound', constant weight, n^-1 = 1: alpha (lse - Q(a_D)) + Huber(Q(a_D) - y)."""
  q = np.array([[[0.3, -1.2, 2.0]], [[0.0, 0.5, -0.5]]], np.float32)      # [B=2, N=1, A=3]
  actions = np.array([2, 0])
  y = np.array([[[0.1]], [[2.5]]], np.float32)                            # [B, N, M=1]
  alpha = 0.7
  q_t = tf.constant(q)
  with tf.GradientTape() as tape:
    tape.watch(q_t)
    res = bound.loss(q_t, tf.constant(actions), tf.constant(y),
                                 tf.constant([[0.5], [0.5]]), tf.ones([2]), alpha,
                                 td_loss_type="huber", delta_weight="constant")
  grad = tape.gradient(res["loss"], q_t).numpy()
  q2 = q[:, 0]
  q_sa = q2[np.arange(2), actions]
  td_err = q_sa - y[:, 0, 0]
  expected = np.mean(alpha * (_lse(q2) - q_sa) + _huber(td_err))
  np.testing.assert_allclose(res["loss"].numpy(), expected, rtol=1e-5)
  # The same as the project's CQL loss.
  cql = losses.cql_loss(tf.constant(q2), tf.constant(actions), tf.constant(y[:, 0, 0]), alpha,
                        "huber")
  np.testing.assert_allclose(res["loss"].numpy(), cql["loss"].numpy(), rtol=1e-6)
  # d/dQ: (alpha (softmax - onehot) + onehot clip(td, -1, 1)) / B.
  soft = np.exp(q2 - q2.max(-1, keepdims=True))
  soft /= soft.sum(-1, keepdims=True)
  onehot = np.eye(3)[actions]
  g = (alpha * (soft - onehot) + onehot * np.clip(td_err, -1, 1)[:, None]) / 2
  np.testing.assert_allclose(grad[:, 0], g, rtol=1e-5, atol=1e-7)


def test_rung_one_agent_objective_is_cql_on_its_own_q_values():
  """CCVLAgent at rung 1's settings: its objective equals CQL's loss computed by hand from
  its online Q(s, ., 0.5) and target Q(s', ., 0.5)."""
  obs_dim, num_actions, b = 5, 3, 4
  time_step_spec = ts.time_step_spec(tensor_spec.TensorSpec([obs_dim], tf.float32))
  action_spec = tensor_spec.BoundedTensorSpec([], tf.int32, 0, num_actions - 1)
  config = ccvl_agent.CCVLConfig(
      alpha=0.8, num_deltas=1, num_pairs=1, delta_head="cosine",
      reading=bound.Bound(train_delta=0.5, delta_weight="constant", count_weight="off"),
      dr3_coef=0.0, td_loss="huber", gamma=0.9)
  agent = ccvl_agent.CCVLAgent(
      time_step_spec, action_spec, config,
      networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8),
      dataset_size=100.0)
  rng = np.random.default_rng(0)
  batch = {"observation": tf.constant(rng.normal(size=[b, obs_dim]), tf.float32),
           "next_observation": tf.constant(rng.normal(size=[b, obs_dim]), tf.float32),
           "action": tf.constant([0, 2, 1, 2]), "reward": tf.constant([1.0, 0.0, -1.0, 0.5]),
           "terminal": tf.constant([0.0, 1.0, 0.0, 0.0])}
  metrics = agent._objective(batch, tf.constant([3, 4], tf.int64), training=False)  # pylint: disable=protected-access
  q = agent.q_values(batch["observation"], 0.5).numpy()[:, 0]             # [B, A]
  next_q = agent.target_network.q_model(
      {"observation": batch["next_observation"], "delta": tf.fill([b, 1], 0.5)}).numpy()[:, 0]
  y = batch["reward"].numpy() + 0.9 * (1 - batch["terminal"].numpy()) * next_q.max(-1)
  q_sa = q[np.arange(b), batch["action"].numpy()]
  expected = np.mean(0.8 * (_lse(q) - q_sa) + _huber(q_sa - y))
  np.testing.assert_allclose(metrics["loss"].numpy(), expected, rtol=1e-5)


# ---- docs/ladder.md's decision, recomputed from the committed rows --------------------------
ROWS = __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "docs",
                                  "results", "ladder_rows.csv")


def _rows():
  import csv  # pylint: disable=g-import-not-at-top
  with open(ROWS) as f:
    return list(csv.DictReader(f))


def test_the_ladders_rule_chooses_algorithm1_with_the_monotone_head():
  """Rule 1 of docs/ladder.md on the third pass's candidates (rungs 6-10): both table rows at
  least the behaviour policy's mean and CQL's CI low (rung 0 of the first pass); rule 2: the
  highest mean of the two rows among those that qualify."""
  rows = _rows()
  cql = next(r for r in rows if r["pass"] == "first" and r["rung"] == "0")
  floor = max(float(cql["behaviour"]), float(cql["cql_ci_low"]))
  assert abs(floor - 22.1975) < 1e-3
  candidates = [r for r in rows if r["pass"] == "_fix2" and r["rung"] in "6 7 8 9 10".split()]
  assert len(candidates) == 5
  qualify = [r for r in candidates
             if min(float(r["ccvl_adaptive"]), float(r["fixed_ccvl"])) >= floor]
  assert [r["rung"] for r in qualify] == ["9"]
  assert "--objective=algorithm1" in qualify[0]["flags"]
  assert "--delta_head=monotone" in qualify[0]["flags"]


def test_the_breaking_rungs_collapse_and_the_rungs_before_them_learn():
  """The rule's collapse (greedy mode share >= 0.9) and learning (final evaluation >= half the
  behaviour mean, no collapse) on the committed rows: pass one breaks at rung 1, pass two at
  rung 4 (rung 5 collapses), and no candidate of pass three collapses."""
  rows = {(r["pass"], r["rung"]): r for r in _rows()}
  learns = lambda r: (float(r["final_eval"]) >= float(r["behaviour"]) / 2  # noqa: E731
                      and float(r["greedy_mode_share"]) < 0.9)
  assert learns(rows[("first", "0")]) and not learns(rows[("first", "1")])
  assert float(rows[("first", "1")]["greedy_mode_share"]) >= 0.9
  assert all(learns(rows[("_fix", r)]) for r in "123")
  assert not learns(rows[("_fix", "4")])
  assert float(rows[("_fix", "5")]["greedy_mode_share"]) >= 0.9
  assert all(float(rows[("_fix2", r)]["greedy_mode_share"]) < 0.9
             for r in "5 6 7 8 9 10".split())
