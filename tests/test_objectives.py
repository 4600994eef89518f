"""The three CCVL objectives (ccvl_tf/algorithm/losses.py OBJECTIVES): hand-computed values and gradients.

Fixed inputs: B=1, N=2 deltas, M=2 candidate targets, A=2 actions, a_D = 0, n(s)^-1 = 0.25,
alpha = 2, so the weight alpha sqrt(log(1/delta) n^-1) = sqrt(log(1/delta)); deltas e^-4 and
e^-1 give weights 2 and 1.
  row 0: Q = [1, 1]      gap = ln 2, Q_sa = 1, targets [0, 3] -> max 3
  row 1: Q = [0, ln 3]   gap = ln 4, Q_sa = 0, targets [2, 1] -> max 2
"""
import math

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm.readings import ablation
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.algorithm.readings import bound
from ccvl_tf.algorithm.readings import bonus

LN2, LN4 = math.log(2.0), math.log(4.0)


def _inputs():
  q = tf.constant([[[1.0, 1.0], [0.0, math.log(3.0)]]])     # [1, 2, 2]
  actions = tf.constant([0])
  targets = tf.constant([[[0.0, 3.0], [2.0, 1.0]]])         # [1, 2, 2]
  delta = tf.constant([[math.exp(-4.0), math.exp(-1.0)]])   # [1, 2]
  inv_count = tf.constant([0.25])
  return q, actions, targets, delta, inv_count


def test_bound_objective_by_hand():
  q, a, y, delta, inv = _inputs()
  out = bound.loss(q, a, y, delta, inv, alpha=2.0, td_loss_type="squared")
  # weights [2, 1]; reg = [2 ln2, ln4]; TD = 1/2 (Q_sa - max y)^2 = [1/2 (1-3)^2, 1/2 (0-2)^2]
  #   = [2, 2]; loss = mean(2 ln2 + 2, ln4 + 2) = (4 ln 2 + 4) / 2 = 2 ln 2 + 2
  np.testing.assert_allclose(out["weight"].numpy(), [[2.0, 1.0]], rtol=1e-5)
  np.testing.assert_allclose(out["target"].numpy(), [[3.0, 2.0]])
  np.testing.assert_allclose(out["regularizer"].numpy(), [[2 * LN2, LN4]], rtol=1e-5)
  np.testing.assert_allclose(out["td"].numpy(), [[2.0, 2.0]], rtol=1e-6)
  np.testing.assert_allclose(out["loss"].numpy(), 2 * LN2 + 2.0, rtol=1e-5)
  np.testing.assert_array_equal(out["argmax_j"].numpy(), [[1, 0]])


def test_bonus_objective_by_hand():
  q, a, y, delta, inv = _inputs()
  out = bonus.loss(q, a, y, delta, inv, alpha=2.0, td_loss_type="squared")
  # y' = max y - weight = [3 - 2, 2 - 1] = [1, 1]; TD = 1/2 (Q_sa - y')^2 = [0, 1/2];
  # no regularizer; loss = 1/4.
  np.testing.assert_allclose(out["target"].numpy(), [[1.0, 1.0]], rtol=1e-6)
  np.testing.assert_allclose(out["td"].numpy(), [[0.0, 0.5]], atol=1e-6)
  np.testing.assert_allclose(out["regularizer"].numpy(), [[0.0, 0.0]])
  np.testing.assert_allclose(out["loss"].numpy(), 0.25, rtol=1e-5)


def test_bound_gradient_by_hand():
  """dL/dQ(s, ., delta_i) = (1/N) [w_i (softmax(Q_i) - onehot(a_D)) + (Q_sa - y_i) onehot(a_D)]."""
  q, a, y, delta, inv = _inputs()
  q = tf.Variable(q)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([y, inv])
    out = bound.loss(q, a, y, delta, inv, alpha=2.0, td_loss_type="squared")
  grad = tape.gradient(out["loss"], q).numpy()
  # row 0: softmax [1/2, 1/2], w 2: 2 * [-1/2, 1/2] + (1 - 3) [1, 0] = [-3, 1]; / N=2
  # row 1: softmax [1/4, 3/4], w 1: [-3/4, 3/4] + (0 - 2) [1, 0] = [-2.75, 0.75]; / 2
  np.testing.assert_allclose(grad, [[[-1.5, 0.5], [-1.375, 0.375]]], rtol=1e-5)
  assert tape.gradient(out["loss"], y) is None
  assert tape.gradient(out["loss"], inv) is None


def test_bonus_gradient_is_td_only_and_reaches_no_target():
  q, a, y, delta, inv = _inputs()
  q = tf.Variable(q)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([y, inv])
    out = bonus.loss(q, a, y, delta, inv, alpha=2.0, td_loss_type="squared")
  grad = tape.gradient(out["loss"], q).numpy()
  # (Q_sa - y') / N on the data action only: row 0 (1 - 1)/2 = 0, row 1 (0 - 1)/2 = -0.5.
  np.testing.assert_allclose(grad, [[[0.0, 0.0], [-0.5, 0.0]]], atol=1e-6)
  assert tape.gradient(out["loss"], y) is None
  assert tape.gradient(out["loss"], inv) is None


def test_bonus_with_a_delta_independent_gap_by_hand():
  """reading 'bonus' with w0 = 0.5: the TD part as above plus w0 * gap, gap = [ln 2, ln 4];
  loss = mean(0 + 0.5 ln 2, 0.5 + 0.5 ln 4) = 0.25 + 0.75 ln 2. Gradient per row (/ N = 2):
  w0 (softmax(Q) - onehot(a_D)) + (Q_sa - y') onehot(a_D):
    row 0: 0.5 [-1/2, 1/2] + 0 = [-0.25, 0.25] -> [-0.125, 0.125]
    row 1: 0.5 [-3/4, 3/4] + (0 - 1) [1, 0] = [-1.375, 0.375] -> [-0.6875, 0.1875]."""
  q, a, y, delta, inv = _inputs()
  q = tf.Variable(q)
  with tf.GradientTape() as tape:
    out = bonus.loss(q, a, y, delta, inv, alpha=2.0, td_loss_type="squared",
                                 gap_weight=0.5)
  np.testing.assert_allclose(out["regularizer"].numpy(), [[0.5 * LN2, 0.5 * LN4]], rtol=1e-5)
  np.testing.assert_allclose(out["loss"].numpy(), 0.25 + 0.75 * LN2, rtol=1e-5)
  np.testing.assert_allclose(tape.gradient(out["loss"], q).numpy(),
                             [[[-0.125, 0.125], [-0.6875, 0.1875]]], rtol=1e-5)
  got = bonus.Bonus(gap_weight=0.5).loss(q, a, y, delta, None, inv, 2.0, "squared")
  np.testing.assert_allclose(got["loss"].numpy(), out["loss"].numpy())
  with pytest.raises(ValueError, match="alpha"):
    bonus.loss(q, a, y, delta, inv, alpha=2.0, gap_weight=-1.0)


def test_each_reading_computes_its_modules_loss_and_target_confidences():
  q, a, y, delta, inv = _inputs()
  d1 = tf.constant([[[0.01, 0.02], [0.1, 0.2]]])
  for variant, fn in ((bound.Bound(), bound.loss), (bonus.Bonus(), bonus.loss)):
    got = variant.loss(q, a, y, delta, d1, inv, 2.0, "squared")
    np.testing.assert_allclose(got["loss"].numpy(),
                               fn(q, a, y, delta, inv, 2.0, "squared")["loss"].numpy())
  want = paper.loss(q, a, y, d1, inv, 2.0, "squared")["loss"].numpy()
  for variant in (paper.Paper(), ablation.Ablation()):  # the ablation at its defaults: paper
    np.testing.assert_allclose(variant.loss(q, a, y, delta, d1, inv, 2.0, "squared")["loss"],
                               want)
  # An ablation option reaches the loss: R(pi) = 0 gives another value.
  assert not np.isclose(ablation.Ablation(gap="max").loss(
      q, a, y, delta, d1, inv, 2.0, "squared")["loss"].numpy(), want)
  d2 = tf.constant([[[0.3, 0.4], [0.5, 0.6]]])
  for variant in (paper.Paper(), ablation.Ablation()):
    np.testing.assert_allclose(variant.target_confidences(delta, d2).numpy(), d2.numpy())
  # bound / bonus: pair 0 bootstraps from delta itself, pair 1 keeps its draw.
  for variant in (bound.Bound(), bonus.Bonus()):
    np.testing.assert_allclose(variant.target_confidences(delta, d2).numpy(),
                               [[[math.exp(-4.0), 0.4], [math.exp(-1.0), 0.6]]], rtol=1e-6)


def test_bonus_fixed_point_is_monotone_in_delta():
  """With the same candidate targets at every delta, the bonus target max y - w(delta) grows
  with delta (w = alpha sqrt(log(1/delta) n^-1) falls): Lemma 1 by construction."""
  grid = tf.constant([[0.05, 0.25, 0.5, 0.75, 0.95]])           # [1, 5]
  q = tf.zeros([1, 5, 2])
  y = tf.ones([1, 5, 2])
  out = bonus.loss(q, tf.constant([0]), y, grid, tf.constant([0.5]), alpha=1.0)
  t = out["target"].numpy()[0]
  assert np.all(np.diff(t) > 0)
  np.testing.assert_allclose(t, 1.0 - np.sqrt(np.log(1.0 / grid.numpy()[0]) * 0.5), rtol=1e-5)
