"""ccvl_tf/counts.py: one-hot features recover 1/n(s); seen vs unseen states separate."""
import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf import counts


def test_linear_counts_recover_inverse_counts_on_one_hot_features():
  # 5 states visited [1, 2, 4, 8, 0] times: |D| = 15 transitions, state 4 never seen.
  visits = np.array([1, 2, 4, 8, 0])
  states = np.repeat(np.arange(5), visits)
  rng = np.random.default_rng(0)
  rng.shuffle(states)
  phi = np.eye(5, dtype=np.float32)[states]               # [15, 5]
  est = counts.LinearInverseCounts(5, dataset_size=len(states), ridge=1e-4)
  for chunk in np.array_split(phi, 4):                      # fed as 4 minibatches
    est.update(tf.constant(chunk))
  est.refresh()
  inv = est.inverse_count(tf.eye(5)).numpy()
  # Phi^T Phi = diag(n) -> phi_s^T (diag(n) + 1e-4 I)^-1 phi_s = 1 / (n(s) + 1e-4) ~ 1/n(s);
  # the unseen state: 1 / 1e-4, capped at 1 (n wedge 1 = 1).
  np.testing.assert_allclose(inv, [1.0, 0.5, 0.25, 0.125, 1.0], rtol=1e-3)


def test_linear_counts_separate_seen_from_unseen_states():
  # 8 seen states with random features in a 6-dim subspace of R^16 (each seen 50 times);
  # 8 unseen states with random features in all of R^16.
  rng = np.random.default_rng(1)
  basis = np.linalg.qr(rng.normal(size=(16, 6)))[0]                  # [16, 6]
  seen = (rng.normal(size=(8, 6)) @ basis.T).astype(np.float32)        # [8, 16]
  unseen = rng.normal(size=(8, 16)).astype(np.float32)
  data = np.repeat(seen, 50, axis=0)
  est = counts.LinearInverseCounts(16, dataset_size=len(data), ridge=1.0)
  for chunk in np.array_split(data, 10):
    est.update(tf.constant(chunk))
  est.refresh()
  inv_seen = est.inverse_count(tf.constant(seen)).numpy()
  inv_unseen = est.inverse_count(tf.constant(unseen)).numpy()
  # Every unseen state looks rarer than every seen one, by a wide margin.
  assert inv_seen.max() < 0.2, inv_seen
  assert inv_unseen.min() > 0.5, inv_unseen
  assert inv_unseen.min() > 5 * inv_seen.max()


def test_running_mean_matches_the_full_batch_second_moment():
  rng = np.random.default_rng(2)
  phi = rng.normal(size=(40, 3)).astype(np.float32)
  est = counts.LinearInverseCounts(3, dataset_size=40)
  for chunk in np.split(phi, [7, 20, 21]):                 # uneven minibatches
    est.update(tf.constant(chunk))
  np.testing.assert_allclose(est.second_moment.numpy(), phi.T @ phi / 40, rtol=1e-5)
  assert est.num_seen.numpy() == 40


def test_ema_forgets_old_features():
  est = counts.LinearInverseCounts(2, dataset_size=10, decay=0.5)
  est.update(tf.constant([[1.0, 0.0]]))
  for _ in range(20):
    est.update(tf.constant([[0.0, 1.0]]))
  c = est.second_moment.numpy()
  assert c[0, 0] < 1e-5 and abs(c[1, 1] - 1.0) < 1e-5


def test_no_gradient_flows_into_phi():
  est = counts.LinearInverseCounts(3, dataset_size=10)
  est.update(tf.ones([4, 3]))
  est.refresh()
  phi = tf.Variable([[1.0, 0.0, 0.5]])
  with tf.GradientTape(persistent=True) as tape:
    inv = est.inverse_count(phi)
    est.update(phi)
  assert tape.gradient(inv, phi) is None
  assert tape.gradient(est.second_moment, phi) is None


def test_exact_counts():
  est = counts.ExactInverseCounts([0, 0, 1, 3, 3, 3], num_states=5)
  np.testing.assert_allclose(est.inverse_count(tf.constant([0, 1, 2, 3, 4])).numpy(),
                             [0.5, 1.0, 1.0, 1 / 3, 1.0])
  one_hot = tf.one_hot([3, 0], 5)
  np.testing.assert_allclose(est.inverse_count_one_hot(one_hot).numpy(), [1 / 3, 0.5])


@pytest.mark.parametrize("kwargs,match", [
    (dict(feature_dim=0, dataset_size=1), "feature_dim"),
    (dict(feature_dim=2, dataset_size=0), "dataset_size"),
    (dict(feature_dim=2, dataset_size=1, ridge=0.0), "ridge"),
    (dict(feature_dim=2, dataset_size=1, decay=1.0), "decay"),
])
def test_bad_arguments_raise(kwargs, match):
  with pytest.raises(ValueError, match=match):
    counts.LinearInverseCounts(**kwargs)


def test_exact_counts_rejects_out_of_range_states():
  with pytest.raises(ValueError, match=r"\[0, 3\)"):
    counts.ExactInverseCounts([0, 5], num_states=3)
