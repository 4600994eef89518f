"""ccvl_tf/algorithm/counts.py: one-hot features recover 1/n(s); seen vs unseen states separate."""
import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.algorithm import counts


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


# ---- online fine-tuning: n(s)^-1 follows the data ----------------------------------
def _offline_one_hot_counts(**kwargs):
  """States 0, 1, 2 seen n = 2, 3, 5 times offline (|D| = 10), one-hot features, a negligible
  absolute ridge: n(s)^-1 = 1 / (n(s) + 1e-6) ~ [1/2, 1/3, 1/5] after one update + refresh."""
  visits = np.array([2, 3, 5])
  phi = np.eye(3, dtype=np.float32)[np.repeat(np.arange(3), visits)]    # [10, 3]
  est = counts.LinearInverseCounts(3, dataset_size=10, ridge=1e-6, normalization="mean",
                                   **kwargs)
  est.update(tf.constant(phi))
  est.refresh()
  return est, phi


def _weight(est, state, delta=0.5, alpha=0.1):
  """The regularizer weight alpha sqrt(log(1/delta) n(s)^-1) of a one-hot state."""
  inv = est.inverse_count(tf.one_hot([state], 3)).numpy()[0]
  return alpha * np.sqrt(np.log(1 / delta) * inv)


@pytest.mark.parametrize("spi,rows,k", [(1.0, 4, 4.0), (2.0, 4, 2.0)])
def test_online_counts_shrink_the_weight_by_sqrt_n_over_n_plus_k(spi, rows, k):
  """State 0 (n = 2 offline) trained on `rows` times online at SPI `spi`: k = rows / SPI more
  transitions, |D| = 10 + k, Phi^T Phi = diag(2 + k, 3, 5): n(0)^-1 = 1 / (2 + k), the others
  unchanged, and the normalized weight of state 0 shrinks by sqrt(2 / (2 + k)) (the
  normalization constant is frozen at its offline value)."""
  est, _ = _offline_one_hot_counts()
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(), [1 / 2, 1 / 3, 1 / 5],
                             rtol=1e-4)
  frozen = float(est.running_mean_inverse_count().numpy())
  before = [_weight(est, s) for s in range(3)]
  est.start_online(online_rows=rows, samples_per_insert=spi)
  est.update(tf.one_hot([0] * rows, 3))                    # every row online, all of state 0
  est.refresh()
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(),
                             [1 / (2 + k), 1 / 3, 1 / 5], rtol=1e-4)
  assert float(est.total_size().numpy()) == 10 + k
  assert float(est.running_mean_inverse_count().numpy()) == frozen
  after = [_weight(est, s) for s in range(3)]
  np.testing.assert_allclose(after[0] / before[0], np.sqrt(2 / (2 + k)), rtol=1e-4)
  np.testing.assert_allclose(after[1:], before[1:], rtol=1e-4)


def test_online_counts_route_offline_rows_to_the_offline_moment():
  """A batch of 4 online rows (state 1) followed by the 10 offline rows again: the offline
  rows only refresh C_off (its mean stays diag(.2, .3, .5), no count added), the online ones
  add k = 4 to state 1: n^-1 = [1/2, 1/7, 1/5]. Two such updates: k = 8, n^-1(1) = 1/11."""
  est, offline = _offline_one_hot_counts()
  est.start_online(online_rows=4, samples_per_insert=1.0)
  batch = np.concatenate([np.eye(3, dtype=np.float32)[[1, 1, 1, 1]], offline])   # [14, 3]
  est.update(tf.constant(batch))
  est.refresh()
  np.testing.assert_allclose(est.second_moment.numpy(), np.diag([0.2, 0.3, 0.5]), atol=1e-6)
  np.testing.assert_allclose(est.online_moment.numpy(), np.diag([0.0, 1.0, 0.0]), atol=1e-6)
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(), [1 / 2, 1 / 7, 1 / 5],
                             rtol=1e-4)
  est.update(tf.constant(batch))
  est.refresh()
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(), [1 / 2, 1 / 11, 1 / 5],
                             rtol=1e-4)
  assert est.num_seen.numpy() == 30 and est.online_seen.numpy() == 8


def test_online_counts_mix_the_online_states_in_proportion():
  """Online rows 0, 0, 2, 2, 2, 2 (SPI 2: 3 transitions, C_on = diag(1/3, 0, 2/3)):
  Phi^T Phi = 10 diag(.2, .3, .5) + 3 diag(1/3, 0, 2/3) = diag(3, 3, 7)."""
  est, _ = _offline_one_hot_counts()
  est.start_online(online_rows=6, samples_per_insert=2.0)
  est.update(tf.one_hot([0, 0, 2, 2, 2, 2], 3))
  est.refresh()
  np.testing.assert_allclose(est.gram().numpy(), np.diag([3.0, 3.0, 7.0]), atol=1e-5)
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(), [1 / 3, 1 / 3, 1 / 7],
                             rtol=1e-4)


def test_without_start_online_the_normalized_weight_is_pinned():
  """Today's behaviour (--online_counts=offline): online batches of state 0 alone enter the
  running mean that normalizes n(s)^-1, so the normalized n(0)^-1 goes to 1 (the weight to
  alpha sqrt(log(1/delta))) however often state 0 is seen, and |D| stays 10. (The raw n(0)^-1
  does fall, to 1 / (10 * 162 / 170) with C's cumulative mean: 162 of 170 rows are state 0;
  the running mean (decay 0.5) lags it by < 1%.)"""
  est, _ = _offline_one_hot_counts(normalization_decay=0.5)
  for _ in range(40):
    est.update(tf.one_hot([0] * 4, 3))
    est.refresh()
  assert float(est.total_size().numpy()) == 10
  np.testing.assert_allclose(est.raw_inverse_count(tf.one_hot([0], 3)).numpy(),
                             [170 / 1620], rtol=1e-4)
  np.testing.assert_allclose(est.inverse_count(tf.one_hot([0], 3)).numpy(), [1.0], rtol=1e-2)
  np.testing.assert_allclose(_weight(est, 0), 0.1 * np.sqrt(np.log(2)), rtol=1e-2)


def test_online_relative_ridge_follows_the_grown_gram():
  """Relative ridge online: lambda = ridge * trace(|D_off| C_off + n_on C_on) / D
  = 0.1 * trace(diag(3, 3, 7)) / 3 = 13 / 30 (the case above)."""
  est, _ = _offline_one_hot_counts()
  est.ridge_mode, est.ridge = "relative", 0.1
  est.start_online(online_rows=6, samples_per_insert=2.0)
  est.update(tf.one_hot([0, 0, 2, 2, 2, 2], 3))
  est.refresh()
  lam = 13 / 30
  assert abs(float(est.ridge_used.numpy()) - lam) < 1e-5
  np.testing.assert_allclose(est.raw_inverse_count(tf.eye(3)).numpy(),
                             [1 / (3 + lam), 1 / (3 + lam), 1 / (7 + lam)], rtol=1e-4)


def test_online_counts_errors_and_no_gradient():
  est, _ = _offline_one_hot_counts()
  with pytest.raises(ValueError, match="online_rows"):
    est.start_online(online_rows=0, samples_per_insert=1.0)
  with pytest.raises(ValueError, match="samples_per_insert"):
    est.start_online(online_rows=2, samples_per_insert=0.0)
  est.start_online(online_rows=2, samples_per_insert=1.0)
  with pytest.raises(ValueError, match="already"):
    est.start_online(online_rows=2, samples_per_insert=1.0)
  phi = tf.Variable([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
  with tf.GradientTape(persistent=True) as tape:
    est.update(phi)
    inv = est.inverse_count(phi)
  assert tape.gradient(est.online_moment, phi) is None
  assert tape.gradient(inv, phi) is None


def test_online_counts_checkpoint_round_trip(tmp_path):
  """An offline checkpoint (no online variables) restores before start_online; the online
  variables then round-trip through a checkpoint made after it."""
  est, _ = _offline_one_hot_counts()
  offline_path = tf.train.Checkpoint(counts=est).save(str(tmp_path / "offline"))
  fresh = counts.LinearInverseCounts(3, dataset_size=10, ridge=1e-6, normalization="mean")
  tf.train.Checkpoint(counts=fresh).restore(offline_path).assert_existing_objects_matched()
  fresh.start_online(online_rows=4, samples_per_insert=1.0)
  fresh.update(tf.one_hot([0] * 4, 3))
  online_path = tf.train.Checkpoint(counts=fresh).save(str(tmp_path / "online"))
  again = counts.LinearInverseCounts(3, dataset_size=10, ridge=1e-6, normalization="mean")
  again.start_online(online_rows=4, samples_per_insert=1.0)
  tf.train.Checkpoint(counts=again).restore(online_path).assert_consumed()
  assert again.online_size.numpy() == 4.0
  np.testing.assert_allclose(again.online_moment.numpy(), np.diag([1.0, 0.0, 0.0]))


# ---- the normalization the agent trains with -------------------------------------------------
def test_batch_normalization_divides_by_the_batch_mean_and_keeps_the_ratios():
  """States seen 2, 3, 5 times (n^-1 = 1/2, 1/3, 1/5): over a batch of one of each the batch
  mean is (1/2 + 1/3 + 1/5) / 3 = 31/90, so the normalized values are 45/31, 30/31, 18/31."""
  visits = np.array([2, 3, 5])
  phi = np.eye(3, dtype=np.float32)[np.repeat(np.arange(3), visits)]
  est = counts.LinearInverseCounts(3, dataset_size=10, ridge=1e-6, normalization="batch")
  est.update(tf.constant(phi))
  est.refresh()
  np.testing.assert_allclose(est.inverse_count(tf.eye(3)).numpy(),
                             [45 / 31, 30 / 31, 18 / 31], rtol=1e-4)
  # Online the scale is the running mean frozen at its offline value, as 'mean' does.
  frozen = float(est.running_mean_inverse_count().numpy())
  est.start_online(online_rows=1, samples_per_insert=1.0)
  np.testing.assert_allclose(est.inverse_count(tf.eye(3)).numpy(),
                             np.array([1 / 2, 1 / 3, 1 / 5]) / frozen, rtol=1e-4)


def _batch_weight_means(normalization: str, steps: int = 600, seed: int = 0) -> np.ndarray:
  """The mean normalized n(s)^-1 of each training batch while the features drift as early
  training drifts them (their scale grows 0.5% a step), with the agent's default count
  settings (CCVLConfig: relative ridge, EMA decay, refresh period) and only `normalization`
  set."""
  from ccvl_tf.agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  cfg = ccvl_agent.CCVLConfig()
  rng = np.random.default_rng(seed)
  base = rng.random([64, 16]).astype(np.float32)
  est = counts.LinearInverseCounts(16, 50_000.0, ridge=cfg.count_ridge, decay=cfg.count_decay,
                                   ridge_mode=cfg.count_ridge_mode,
                                   normalization=normalization)
  means = []
  for step in range(steps):
    phi = tf.constant(base[rng.integers(0, 64, 32)] * 1.005 ** step
                      + 0.01 * rng.random([32, 16]).astype(np.float32))
    means.append(float(tf.reduce_mean(est.inverse_count(phi))))
    est.update(phi)
    if step % cfg.count_refresh_period == 0:
      est.refresh()
  return np.array(means)


def test_the_default_normalization_keeps_every_batchs_weight_at_alpha():
  """The regularizer weight's scale must not swing from batch to batch: with the default
  normalization every batch's mean normalized n(s)^-1 is 1. Dividing by a running mean (the
  earlier default, 'mean') lags the precision's refreshes, and the batch mean swings (on
  drifting features here, and 0.68-1.32 on Atari, where the network then collapsed:
  docs/ladder.md)."""
  from ccvl_tf.agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  default = _batch_weight_means(ccvl_agent.CCVLConfig().count_normalization)
  np.testing.assert_allclose(default, 1.0, rtol=1e-5)
  lagging = _batch_weight_means("mean")[100:]
  assert lagging.max() / lagging.min() > 1.2, (lagging.min(), lagging.max())


# ---- gram_source='exact': the dataset's own Phi^T Phi --------------------------------------
# 3 dataset states, 3 features: Phi = [[1, 0, 0], [1, 0, 0], [0, 2, 0]], so Phi^T Phi =
# diag(2, 4, 0); relative ridge 0.5 x trace / D = 0.5 x 6 / 3 = 1, precision diag(1/3, 1/5, 1).
_PHI = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], np.float32)


def _exact(**kw):
  return counts.LinearInverseCounts(3, dataset_size=3, ridge=0.5, ridge_mode="relative",
                                    gram_source="exact", **kw)


def test_exact_gram_gives_the_leverage_by_hand_and_rescales_alpha_once():
  est = _exact()
  out = est.refresh_exact([tf.constant(_PHI[:2]), tf.constant(_PHI[2:])])  # two batches
  np.testing.assert_allclose(est.gram().numpy(), np.diag([2.0, 4.0, 0.0]), atol=1e-6)
  np.testing.assert_allclose(float(est.ridge_used.numpy()), 1.0, rtol=1e-6)
  # Leverage phi^T (Phi^T Phi + I)^-1 phi: 1/3 for [1, 0, 0], 4/5 for [0, 2, 0]; an unseen
  # direction [0, 0, 1]: 1/1 = 1 (at the cap).
  probe = tf.constant([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
  np.testing.assert_allclose(est.raw_inverse_count(probe).numpy(), [1 / 3, 4 / 5, 1.0],
                             rtol=1e-5)
  # m_0 = the mean over the dataset's rows = (1/3 + 1/3 + 4/5) / 3 = 22/45 (= tr(G (G + I)^-1)
  # / |D| = (2/3 + 4/5) / 3); n(s)^-1 = raw / m_0, i.e. alpha / sqrt(m_0) with raw n(s)^-1.
  assert out["rows"] == 3
  np.testing.assert_allclose([out["mean_raw"], out["first_mean"]], [22 / 45, 22 / 45],
                             rtol=1e-5)
  np.testing.assert_allclose(est.inverse_count(probe).numpy(),
                             np.array([1 / 3, 4 / 5, 1.0]) * 45 / 22, rtol=1e-5)
  # The unseen state weighs more than every dataset state.
  inv = est.inverse_count(probe).numpy()
  assert inv[2] > inv[:2].max()


def test_exact_gram_m0_is_frozen_at_the_first_refresh():
  est = _exact()
  est.refresh_exact([tf.constant(_PHI)])
  # Second refresh on Phi = I: Gram I, ridge 0.5 x 3 / 3 = 0.5, leverage 1 / 1.5 = 2/3 each.
  out = est.refresh_exact([tf.eye(3)])
  np.testing.assert_allclose([out["mean_raw"], out["first_mean"]], [2 / 3, 22 / 45], rtol=1e-5)
  np.testing.assert_allclose(est.inverse_count(tf.eye(3)).numpy(), [2 / 3 * 45 / 22] * 3,
                             rtol=1e-5)


def test_exact_gram_scales_a_subsample_to_the_dataset_and_ignores_training_batches():
  est = counts.LinearInverseCounts(3, dataset_size=6, ridge=1.0, gram_source="exact")
  est.update(tf.constant(_PHI))                       # training batches: not in the Gram
  assert not est.second_moment.numpy().any()
  est.refresh_exact([tf.constant(_PHI)])             # 3 rows of |D| = 6: Gram x 2
  np.testing.assert_allclose(est.gram().numpy(), np.diag([4.0, 8.0, 0.0]), atol=1e-6)
  # Before any refresh (the prior precision) n(s)^-1 is the raw value, not divided by 0.
  fresh = _exact()
  np.testing.assert_allclose(fresh.inverse_count(tf.constant([[0.5, 0.0, 0.0]])).numpy(),
                             [0.25], rtol=1e-6)


def test_exact_gram_sums_in_float64():
  # One batch [4096] (phi^2 = 2^24), then 16 batches [1]: a float32 running sum rounds every
  # 2^24 + 1 back to 2^24 and ends at 2^24; the float64 sum ends at 2^24 + 16 (a float32).
  batches = [tf.constant([[4096.0]])] + [tf.ones([1, 1])] * 16
  gram, rows = counts.exact_gram(batches)
  assert float(gram.numpy()[0, 0]) == 2.0 ** 24 + 16
  assert rows == 17


@pytest.mark.parametrize("kw,match", [
    (dict(gram_source="dataset"), "gram_source must be one of"),
    (dict(gram_source="exact", normalization="batch"), "normalization='none'"),
])
def test_exact_gram_settings_are_validated(kw, match):
  with pytest.raises(ValueError, match=match):
    counts.LinearInverseCounts(3, dataset_size=3, **kw)


def test_exact_gram_errors():
  with pytest.raises(ValueError, match="at least one feature row"):
    counts.exact_gram([])
  with pytest.raises(ValueError, match="needs gram_source='exact'"):
    counts.LinearInverseCounts(3, dataset_size=3).refresh_exact([tf.constant(_PHI)])
  with pytest.raises(ValueError, match="offline estimate"):
    _exact().start_online(online_rows=1, samples_per_insert=1.0)
