"""ccvl_tf/losses.py: hand-computed numbers (N=2, M=3), shapes, max over j, validation."""
import math

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf import losses

E = math.exp


def _fixed_inputs():
  """B=1, N=2 deltas, M=3 pairs, A=2 actions, a_D = 0, n(s)^-1 = 0.25, alpha = 2.

  Row i=0: Q(s,.,delta_0) = [1, 1]       -> logsumexp = 1 + ln 2, Q(s,a_D) = 1, gap = ln 2
  Row i=1: Q(s,.,delta_1) = [0, ln 3]    -> logsumexp = ln 4,     Q(s,a_D) = 0, gap = ln 4
  Weight alpha*sqrt(log(1/delta_1) * 1/4) = sqrt(log(1/delta_1)), so choosing
  delta_1 = e^-x gives weight sqrt(x):
    row 0: x = [1, 4, 0.25] -> weights [1, 2, 0.5]
    row 1: x = [4, 1, 1]    -> weights [2, 1, 1]
  Targets: row 0 [1, 3, 0] (TD errors Q - y = [0, -2, 1]), row 1 [0, 0, 3] ([0, 0, -3]).
  """
  q = tf.constant([[[1.0, 1.0], [0.0, math.log(3.0)]]])               # [1, 2, 2]
  actions = tf.constant([0])
  targets = tf.constant([[[1.0, 3.0, 0.0], [0.0, 0.0, 3.0]]])         # [1, 2, 3]
  delta_1 = tf.constant([[[E(-1), E(-4), E(-0.25)], [E(-4), E(-1), E(-1)]]])  # [1, 2, 3]
  inv_count = tf.constant([0.25])
  return q, actions, targets, delta_1, inv_count


def test_ccvl_loss_hand_computed_squared():
  q, actions, targets, delta_1, inv_count = _fixed_inputs()
  out = losses.ccvl_loss(q, actions, targets, delta_1, inv_count, alpha=2.0,
                         td_loss_type="squared")
  ln2, ln4 = math.log(2.0), math.log(4.0)
  # regularizer = weight * gap:
  #   row 0: [1, 2, 0.5] * ln2 = [0.693147, 1.386294, 0.346574]
  #   row 1: [2, 1, 1]   * ln4 = [2.772589, 1.386294, 1.386294]
  # TD = 1/2 err^2: row 0 [0, 2, 0.5]; row 1 [0, 0, 4.5]
  # L:  row 0 [0.693147, 3.386294, 0.846574]  -> max at j=1: 3.386294
  #     row 1 [2.772589, 1.386294, 5.886294]  -> max at j=2: 5.886294
  # loss = (3.386294 + 5.886294) / 2 = 4.636294
  expected_pairs = np.array([[[ln2, 2 * ln2 + 2.0, 0.5 * ln2 + 0.5],
                              [2 * ln4, ln4, ln4 + 4.5]]])
  np.testing.assert_allclose(out["gap"].numpy(), [[ln2, ln4]], rtol=1e-6)
  np.testing.assert_allclose(out["q_sa"].numpy(), [[1.0, 0.0]], rtol=1e-6)
  np.testing.assert_allclose(out["regularizer"].numpy(),
                             [[[ln2, 2 * ln2, 0.5 * ln2], [2 * ln4, ln4, ln4]]], rtol=1e-5)
  np.testing.assert_allclose(out["td"].numpy(), [[[0.0, 2.0, 0.5], [0.0, 0.0, 4.5]]],
                             rtol=1e-6)
  np.testing.assert_allclose(out["pair_losses"].numpy(), expected_pairs, rtol=1e-5)
  np.testing.assert_array_equal(out["argmax_j"].numpy(), [[1, 2]])
  np.testing.assert_allclose(out["max_losses"].numpy(), [[3.386294, 5.886294]], rtol=1e-5)
  np.testing.assert_allclose(out["loss"].numpy(), 4.636294, rtol=1e-5)


def test_ccvl_loss_hand_computed_huber():
  q, actions, targets, delta_1, inv_count = _fixed_inputs()
  out = losses.ccvl_loss(q, actions, targets, delta_1, inv_count, alpha=2.0,
                         td_loss_type="huber", huber_kappa=1.0)
  # Huber_1 of TD errors: |0| -> 0, |-2| -> 2 - 0.5 = 1.5, |1| -> 0.5, |-3| -> 2.5
  #   row 0 TD [0, 1.5, 0.5]   L = [0.693147, 2.886294, 0.846574] -> max 2.886294 (j=1)
  #   row 1 TD [0, 0, 2.5]     L = [2.772589, 1.386294, 3.886294] -> max 3.886294 (j=2)
  # loss = (2.886294 + 3.886294) / 2 = 3.386294
  np.testing.assert_allclose(out["td"].numpy(), [[[0.0, 1.5, 0.5], [0.0, 0.0, 2.5]]],
                             rtol=1e-6)
  np.testing.assert_allclose(out["loss"].numpy(), 3.386294, rtol=1e-5)


def test_shapes_of_every_intermediate():
  b, n, m, a = 5, 2, 3, 4
  delta, d1, d2 = losses.sample_confidences(b, n, m, seed=tf.constant([1, 2]))
  assert delta.shape == (b, n) and d1.shape == (b, n, m) and d2.shape == (b, n, m)
  q = tf.random.stateless_normal([b, n, a], seed=[3, 4])
  next_q = tf.random.stateless_normal([b, n * m, a], seed=[5, 6])
  targets = losses.td_targets(tf.ones([b]), tf.zeros([b]), 0.9, next_q)
  assert targets.shape == (b, n * m)
  out = losses.ccvl_loss(q, tf.zeros([b], tf.int32), tf.reshape(targets, [b, n, m]), d1,
                         tf.fill([b], 0.5), alpha=1.0)
  for key in ("pair_losses", "regularizer", "td"):
    assert out[key].shape == (b, n, m), key
  for key in ("max_losses", "argmax_j", "gap", "q_sa"):
    assert out[key].shape == (b, n), key
  assert out["loss"].shape == ()
  phi = tf.ones([b, 7])
  assert losses.dr3_penalty(phi, 2 * phi).shape == ()


def test_sampled_confidences_are_ordered_and_inside_unit_interval():
  delta, d1, d2 = losses.sample_confidences(64, 8, 4, seed=tf.constant([0, 7]))
  delta, d1, d2 = delta.numpy(), d1.numpy(), d2.numpy()
  assert np.all((delta > 0) & (delta < 1))
  for d in (d1, d2):
    assert np.all(d > 0)
    assert np.all(d <= delta[:, :, None])
  # U(0, delta): d / delta is uniform on (0, 1) -> mean near 1/2 (4096 samples, sd ~ 0.0045).
  assert abs(np.mean(d1 / delta[:, :, None]) - 0.5) < 0.03
  # Same seed, same samples; a different seed, different samples.
  again = losses.sample_confidences(64, 8, 4, seed=tf.constant([0, 7]))[0].numpy()
  other = losses.sample_confidences(64, 8, 4, seed=tf.constant([0, 8]))[0].numpy()
  np.testing.assert_array_equal(delta, again)
  assert not np.allclose(delta, other)


def test_td_targets_hand_computed():
  # B=2, K=2, A=3, gamma=0.5; transition 1 is terminal (no bootstrap).
  next_q = tf.constant([[[1.0, 4.0, 2.0], [0.0, -1.0, -2.0]],
                        [[9.0, 9.0, 9.0], [5.0, 6.0, 7.0]]])
  y = losses.td_targets(tf.constant([1.0, 2.0]), tf.constant([0.0, 1.0]), 0.5, next_q)
  # row 0: 1 + 0.5 * [4, 0] = [3, 1]; row 1: 2 + 0 = [2, 2]
  np.testing.assert_allclose(y.numpy(), [[3.0, 1.0], [2.0, 2.0]])


def test_cql_gap_hand_computed_and_nonnegative():
  q = tf.constant([[0.0, 0.0, 0.0, 0.0], [3.0, -1.0, 0.5, 2.0]])
  gap, q_sa = losses.cql_gap(q, tf.constant([2, 0]))
  # row 0: ln 4 - 0; row 1: ln(e^3 + e^-1 + e^0.5 + e^2) - 3
  row1 = math.log(E(3) + E(-1) + E(0.5) + E(2)) - 3.0
  np.testing.assert_allclose(gap.numpy(), [math.log(4.0), row1], rtol=1e-6)
  np.testing.assert_allclose(q_sa.numpy(), [0.0, 3.0])
  assert np.all(gap.numpy() >= 0)


def test_dr3_penalty_hand_computed():
  phi = tf.constant([[1.0, 2.0], [0.0, 1.0]])
  next_phi = tf.constant([[3.0, -1.0], [2.0, -4.0]])
  # dots: 1*3 + 2*(-1) = 1; 0*2 + 1*(-4) = -4 -> mean |.| = (1 + 4) / 2 = 2.5
  np.testing.assert_allclose(losses.dr3_penalty(phi, next_phi).numpy(), 2.5)


def test_max_over_pairs_gradient_only_through_the_selected_pair():
  pairs = tf.Variable([[[0.1, 0.7, 0.3], [2.0, -1.0, 5.0]]])
  with tf.GradientTape() as tape:
    best, arg = losses.max_over_pairs(pairs)
    total = tf.reduce_sum(best)
  np.testing.assert_allclose(best.numpy(), [[0.7, 5.0]])
  np.testing.assert_array_equal(arg.numpy(), [[1, 2]])
  grad = tape.gradient(total, pairs).numpy()
  np.testing.assert_array_equal(grad, [[[0, 1, 0], [0, 0, 1]]])


def test_regularizer_weight_has_no_gradient_into_counts():
  inv = tf.Variable([0.5])
  with tf.GradientTape() as tape:
    w = losses.ccvl_regularizer_weight(tf.constant([[[0.1]]]), inv, alpha=1.0)
  assert tape.gradient(w, inv) is None
  # alpha * sqrt(ln(10) * 0.5)
  np.testing.assert_allclose(w.numpy(), [[[math.sqrt(math.log(10.0) * 0.5)]]], rtol=1e-6)


@pytest.mark.parametrize("n,m", [(0, 1), (1, 0), (-2, 3), (1.5, 2)])
def test_bad_sample_counts_raise_naming_the_value(n, m):
  with pytest.raises(ValueError, match=repr(n if n < 1 or n != int(n) else m)):
    losses.sample_confidences(4, n, m)


@pytest.mark.parametrize("alpha", [-0.1, float("nan"), float("inf")])
def test_bad_alpha_raises(alpha):
  q, actions, targets, delta_1, inv_count = _fixed_inputs()
  with pytest.raises(ValueError, match="alpha"):
    losses.ccvl_loss(q, actions, targets, delta_1, inv_count, alpha=alpha)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.5, 1.5, float("nan")])
def test_bad_delta_raises_naming_the_value(delta):
  with pytest.raises(ValueError, match=r"\(0, 1\).*" + repr(delta).replace(".", r"\.")
                     if delta == delta else r"\(0, 1\).*nan"):
    losses.validate_delta(delta)
  with pytest.raises(ValueError, match="delta"):
    losses.validate_delta([0.5, delta])


def test_unknown_td_loss_type_raises():
  with pytest.raises(ValueError, match="'l1'"):
    losses.td_loss(tf.ones([2]), "l1")
