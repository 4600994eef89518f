"""ccvl_tf/algorithm/losses.py: hand-computed numbers (N=2, M=3), shapes, max over j, validation,
and gradients by hand (CCVL, CQL, Huber at kappa != 1, convex combination) with the gradient paths
that must be cut (targets, regularizer weights, counts)."""
import math

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.algorithm import upper_losses

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
  out = paper.loss(q, actions, targets, delta_1, inv_count, alpha=2.0,
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
  out = paper.loss(q, actions, targets, delta_1, inv_count, alpha=2.0,
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
  out = paper.loss(q, tf.zeros([b], tf.int32), tf.reshape(targets, [b, n, m]), d1,
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


def test_max_gap_hand_computed_and_its_gradient():
  q = tf.constant([[3.0, -1.0, 0.5, 2.0]])
  with tf.GradientTape() as tape:
    tape.watch(q)
    gap, q_sa = losses.cql_gap(q, tf.constant([3]), gap="max")
  # max_a Q - Q(s, a_D) = 3 - 2 = 1; the gradient is +1 at the argmax and -1 at a_D.
  np.testing.assert_allclose(gap.numpy(), [1.0])
  np.testing.assert_allclose(tape.gradient(gap, q).numpy(), [[1.0, 0.0, 0.0, -1.0]])
  with pytest.raises(ValueError, match="gap must be one of"):
    losses.cql_gap(q, tf.constant([0]), gap="softmax")


def test_dr3_penalty_hand_computed():
  phi = tf.constant([[1.0, 2.0], [0.0, 1.0]])
  next_phi = tf.constant([[3.0, -1.0], [2.0, -4.0]])
  # dots: 1*3 + 2*(-1) = 1; 0*2 + 1*(-4) = -4 -> mean |.| = (1 + 4) / 2 = 2.5
  np.testing.assert_allclose(losses.dr3_penalty(phi, next_phi).numpy(), 2.5)


def test_max_over_pairs_gradient_only_through_the_selected_pair():
  pairs = tf.Variable([[[0.1, 0.7, 0.3], [2.0, -1.0, 5.0]]])
  with tf.GradientTape() as tape:
    best, arg = paper.max_over_pairs(pairs)
    total = tf.reduce_sum(best)
  np.testing.assert_allclose(best.numpy(), [[0.7, 5.0]])
  np.testing.assert_array_equal(arg.numpy(), [[1, 2]])
  grad = tape.gradient(total, pairs).numpy()
  np.testing.assert_array_equal(grad, [[[0, 1, 0], [0, 0, 1]]])


def test_regularizer_weight_has_no_gradient_into_counts():
  inv = tf.Variable([0.5])
  with tf.GradientTape() as tape:
    w = paper.regularizer_weight(tf.constant([[[0.1]]]), inv, alpha=1.0)
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
    paper.loss(q, actions, targets, delta_1, inv_count, alpha=alpha)


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


# ---- gradients by hand -------------------------------------------------------------
# The expected gradients below are derived in the comments and computed with numpy from those
# formulas (or written as literals); nothing here calls the code under test to get them.
def _softmax(x):
  z = np.exp(x - np.max(x, axis=-1, keepdims=True))
  return z / z.sum(axis=-1, keepdims=True)


def _huber_np(x, kappa):
  """Huber_kappa(x) = x^2 / 2 for |x| <= kappa, else kappa (|x| - kappa / 2)."""
  ax = np.abs(x)
  return np.where(ax <= kappa, 0.5 * x * x, kappa * (ax - 0.5 * kappa))


@pytest.mark.parametrize("kappa,x,value,derivative", [
    # kappa = 0.5: |x| > 0.5 is linear with slope +-0.5; inside it is x^2 / 2 with slope x.
    #   -3   -> 0.5 (3 - 0.25)   = 1.375,  slope -0.5
    #   -0.2 -> 0.04 / 2         = 0.02,   slope -0.2
    #    0.3 -> 0.09 / 2         = 0.045,  slope  0.3
    #    1.5 -> 0.5 (1.5 - 0.25) = 0.625,  slope  0.5
    (0.5, [-3.0, -0.2, 0.3, 1.5], [1.375, 0.02, 0.045, 0.625], [-0.5, -0.2, 0.3, 0.5]),
    # kappa = 2: 3 -> 2 (3 - 1) = 4 (slope 2); -1.5 -> 1.125 (slope -1.5); -5 -> 2 (5 - 1) = 8.
    (2.0, [3.0, -1.5, -5.0], [4.0, 1.125, 8.0], [2.0, -1.5, -2.0]),
])
def test_huber_value_and_derivative_by_hand_at_kappa_not_one(kappa, x, value, derivative):
  x = tf.constant(x)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = losses.td_loss(x, "huber", huber_kappa=kappa)
  np.testing.assert_allclose(y.numpy(), value, rtol=1e-6)
  # d/dx of a sum of elementwise losses is the elementwise derivative: clip(x, -kappa, kappa).
  np.testing.assert_allclose(tape.gradient(y, x).numpy(), derivative, rtol=1e-6)
  # 'squared' ignores kappa: x^2 / 2, slope x.
  with tf.GradientTape() as tape:
    tape.watch(x)
    sq = losses.td_loss(x, "squared", huber_kappa=kappa)
  np.testing.assert_allclose(sq.numpy(), 0.5 * x.numpy() ** 2, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(sq, x).numpy(), x.numpy(), rtol=1e-6)


def test_ccvl_loss_gradient_wrt_q_by_hand():
  """dL/dQ(s, ., delta_i) on the fixed inputs above (B = 1, N = 2, a_D = 0, alpha = 2).

  loss = 1/(B N) sum_i max_j L_ij with L_ij = w_ij gap_i + TD(Q(s, a_D, delta_i) - y_ij), so with
  j* = argmax_j L_ij (the max passes the gradient to the selected pair only),

    dL/dQ(s, ., delta_i) = 1/(B N) [ w_ij* (softmax(Q_i) - onehot(a_D))
                                     + TD'(Q_i(a_D) - y_ij*) onehot(a_D) ].

  Squared TD (TD' = x):
    row 0: Q = [1, 1], softmax = [1/2, 1/2]; j* = 1 (L = 3.386), w = 2, x = 1 - 3 = -2
           -> 1/2 [2 (1/2 - 1) - 2, 2 (1/2)] = 1/2 [-3, 1] = [-1.5, 0.5]
    row 1: Q = [0, ln 3], softmax = [1/4, 3/4]; j* = 2 (L = 5.886), w = 1, x = 0 - 3 = -3
           -> 1/2 [(1/4 - 1) - 3, 3/4] = 1/2 [-3.75, 0.75] = [-1.875, 0.375]
  Huber, kappa = 1 (TD' = clip(x, -1, 1); j* is the same: L row 0 = [0.69, 2.89, 0.85],
  row 1 = [2.77, 1.39, 3.89]):
    row 0: 1/2 [2 (1/2 - 1) - 1, 1] = [-1, 0.5];   row 1: 1/2 [-3/4 - 1, 3/4] = [-0.875, 0.375]
  """
  q, actions, targets, delta_1, inv_count = _fixed_inputs()
  for td_type, expected in (("squared", [[[-1.5, 0.5], [-1.875, 0.375]]]),
                            ("huber", [[[-1.0, 0.5], [-0.875, 0.375]]])):
    with tf.GradientTape() as tape:
      tape.watch(q)
      out = paper.loss(q, actions, targets, delta_1, inv_count, alpha=2.0,
                             td_loss_type=td_type, huber_kappa=1.0)
    np.testing.assert_allclose(tape.gradient(out["loss"], q).numpy(), expected, rtol=1e-5,
                               err_msg=td_type)
  # alpha = 0: only the TD term is left, on the pair with the largest TD loss:
  # row 0: j* = 1 (x = -2) -> 1/2 [-2, 0]; row 1: j* = 2 (x = -3) -> 1/2 [-3, 0].
  with tf.GradientTape() as tape:
    tape.watch(q)
    out = paper.loss(q, actions, targets, delta_1, inv_count, alpha=0.0)
  np.testing.assert_allclose(tape.gradient(out["loss"], q).numpy(),
                             [[[-1.0, 0.0], [-1.5, 0.0]]], rtol=1e-6)


def _ccvl_reference(q, a, y, log_inv_d1, inv_n, alpha, kappa):
  """numpy: the Huber CCVL loss and dL/dQ from the formula in the test above.

  q [B, N, A], a [B], y [B, N, M], log_inv_d1 = log(1/delta_1) [B, N, M], inv_n [B]."""
  b, n, _ = q.shape
  onehot = np.eye(q.shape[-1])[a][:, None, :]                        # [B, 1, A]
  lse = np.log(np.exp(q).sum(-1))                                    # [B, N]
  q_sa = (q * onehot).sum(-1)                                        # [B, N]
  w = alpha * np.sqrt(log_inv_d1 * inv_n[:, None, None])             # [B, N, M]
  x = q_sa[:, :, None] - y                                           # [B, N, M]
  pair = w * (lse - q_sa)[:, :, None] + _huber_np(x, kappa)          # [B, N, M]
  j = pair.argmax(-1)                                                # [B, N]
  w_j = np.take_along_axis(w, j[..., None], -1)                      # [B, N, 1]
  x_j = np.take_along_axis(x, j[..., None], -1)                      # [B, N, 1]
  grad = (w_j * (_softmax(q) - onehot) + np.clip(x_j, -kappa, kappa) * onehot) / (b * n)
  return pair.max(-1).mean(), grad


def test_ccvl_loss_gradient_matches_the_numpy_formula_on_a_random_batch():
  """B = 3, N = 2, M = 4, A = 3, Huber with kappa = 0.7, per-state n(s)^-1: loss and dL/dQ
  against `_ccvl_reference` (numpy, the worked formula; j* chosen by numpy)."""
  rng = np.random.default_rng(5)
  q = rng.normal(size=(3, 2, 3)).astype(np.float32)
  a = np.array([2, 0, 1])
  y = rng.normal(scale=2.0, size=(3, 2, 4)).astype(np.float32)
  delta_1 = rng.uniform(0.01, 0.9, size=(3, 2, 4)).astype(np.float32)
  inv_n = np.array([1.0, 0.25, 0.04], np.float32)
  qt = tf.constant(q)
  with tf.GradientTape() as tape:
    tape.watch(qt)
    out = paper.loss(qt, tf.constant(a), tf.constant(y), tf.constant(delta_1),
                           tf.constant(inv_n), alpha=1.5, td_loss_type="huber", huber_kappa=0.7)
  ref_loss, ref_grad = _ccvl_reference(q.astype(np.float64), a, y.astype(np.float64),
                                       -np.log(delta_1.astype(np.float64)),
                                       inv_n.astype(np.float64), 1.5, 0.7)
  np.testing.assert_allclose(out["loss"].numpy(), ref_loss, rtol=1e-5)
  np.testing.assert_allclose(tape.gradient(out["loss"], qt).numpy(), ref_grad, rtol=1e-4,
                             atol=1e-6)
  # Several TD errors are outside [-0.7, 0.7], so the Huber slope (not x) is being tested.
  x = np.abs(out["q_sa"].numpy()[:, :, None] - y)
  assert (x > 0.7).any() and (x < 0.7).any()


def test_no_gradient_reaches_targets_regularizer_weights_or_counts():
  """Through td_targets -> ccvl_loss, the way the agent composes them: the target network's
  Q(s', ., delta_2), the reward, delta_1 (the weight) and n(s)^-1 are constants of the update."""
  q = tf.constant([[[1.0, 1.0], [0.0, math.log(3.0)]]])             # [B=1, N=2, A=2]
  next_q = tf.constant([[[1.0, 4.0], [0.5, 0.0], [2.0, 2.0],
                         [0.0, 3.0], [1.0, -1.0], [0.3, 0.2]]])    # [B, N*M = 6, A]
  reward = tf.constant([0.5])
  delta_1 = tf.constant([[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]])
  inv_count = tf.constant([0.25])
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([q, next_q, reward, delta_1, inv_count])
    y = losses.td_targets(reward, tf.constant([0.0]), 0.9, next_q)  # [1, 6]
    out = paper.loss(q, tf.constant([0]), tf.reshape(y, [1, 2, 3]), delta_1, inv_count,
                           alpha=2.0)
    upper = upper_losses.ccvl_upper_loss(q, tf.constant([0]), tf.reshape(y, [1, 2, 3]), delta_1,
                                   inv_count, alpha=2.0)
  for name, loss in (("ccvl", out["loss"]), ("upper", upper["loss"])):
    assert tape.gradient(loss, q) is not None, name
    for what, tensor in (("next_q", next_q), ("reward", reward), ("delta_1", delta_1),
                         ("inverse_count", inv_count)):
      assert tape.gradient(loss, tensor) is None, (name, what)
  assert tape.gradient(y, next_q) is None and tape.gradient(y, reward) is None
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([delta_1, inv_count])
    weight = paper.regularizer_weight(delta_1, inv_count, 2.0)
  assert tape.gradient(weight, delta_1) is None and tape.gradient(weight, inv_count) is None


def test_cql_loss_gradient_by_hand_and_no_gradient_into_the_target():
  """cql_loss on Q = [[1, 0], [0.5, 2]], a_D = [0, 1], y = [2, 0] (tests/test_cql_agent.py),
  alpha = 1, B = 2:

    dL/dQ(s_b, .) = 1/B [ alpha (softmax(Q_b) - onehot(a_b)) + TD'(Q_b(a_b) - y_b) onehot(a_b) ]

    row 0: softmax([1, 0]) = [e, 1] / (e + 1) = [0.7310586, 0.2689414], x = 1 - 2 = -1
    row 1: softmax([0.5, 2]) = [0.1824255, 0.8175745], x = 2 - 0 = 2
    squared:        row 0: 1/2 [0.7310586 - 1 - 1, 0.2689414]  = [-0.6344707, 0.1344707]
                    row 1: 1/2 [0.1824255, 0.8175745 - 1 + 2] = [ 0.0912128, 0.9087872]
    Huber, kappa 0.5 (TD' = clip(x, -0.5, 0.5)):
                    row 0: 1/2 [0.7310586 - 1 - 0.5, 0.2689414] = [-0.3844707, 0.1344707]
                    row 1: 1/2 [0.1824255, 0.8175745 - 1 + 0.5] = [ 0.0912128, 0.1587872]
  """
  q = tf.constant([[1.0, 0.0], [0.5, 2.0]])
  y = tf.constant([2.0, 0.0])
  for td_type, kappa, expected in (
      ("squared", 1.0, [[-0.6344707, 0.1344707], [0.0912128, 0.9087872]]),
      ("huber", 0.5, [[-0.3844707, 0.1344707], [0.0912128, 0.1587872]])):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([q, y])
      res = losses.cql_loss(q, tf.constant([0, 1]), y, alpha=1.0, td_loss_type=td_type,
                            huber_kappa=kappa)
    np.testing.assert_allclose(tape.gradient(res["loss"], q).numpy(), expected, rtol=1e-5,
                               err_msg=td_type)
    assert tape.gradient(res["loss"], y) is None, td_type


def test_convex_combination_gradient_is_the_mixture_weight():
  """sum_k alpha_k Q_k: d/dQ_k(s, a) of sum over (s, a) is alpha_k, for every s and a."""
  heads = tf.constant(np.arange(12, dtype=np.float32).reshape(2, 2, 3))  # [B=2, H=2, A=3]
  with tf.GradientTape() as tape:
    tape.watch(heads)
    mixed = losses.convex_combination(heads, tf.constant([0.25, 0.75]))
  np.testing.assert_allclose(mixed.numpy(), [[2.25, 3.25, 4.25], [8.25, 9.25, 10.25]])
  np.testing.assert_allclose(tape.gradient(mixed, heads).numpy(),
                             np.broadcast_to(np.array([0.25, 0.75])[None, :, None], (2, 2, 3)))
