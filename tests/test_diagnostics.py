"""ccvl_tf/evaluation/diagnostics.py: each diagnostic on a case with a hand-computed (closed-form) answer."""
import ccvl_tf  # noqa: F401

import csv
import math
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from ccvl_tf.algorithm import counts
from ccvl_tf.evaluation import diagnostics
from ccvl_tf.evaluation import policy_diagnostics
from ccvl_tf.algorithm.belief import delta_grid
from ccvl_tf.evaluation.rollouts import EpisodeRecord

GRID4 = delta_grid(4)  # [0.125, 0.375, 0.625, 0.875]


# ------------------------------------------------------------------------------ toy Q-models
def additive_q_model(w, c, obs_dim=3):
  """Contract model with Q(s, a, delta) = w_a * sum(s) + c_a * delta -> [B, K, A]."""
  w = np.asarray(w, np.float32)
  c = np.asarray(c, np.float32)
  obs = keras.Input(shape=(obs_dim,), dtype="float32", name="observation")
  delta = keras.Input(shape=(None,), dtype="float32", name="delta")        # [B, K]
  total = ops.sum(obs, axis=-1)                                             # [B, D] -> [B]
  # [B] -> [B, 1, 1] times [1, 1, A]; [B, K] -> [B, K, 1] times [1, 1, A].
  q = (ops.reshape(total, (-1, 1, 1)) * w[None, None, :]
       + ops.expand_dims(delta, -1) * c[None, None, :])
  return keras.Model({"observation": obs, "delta": delta}, q)


def scaled_q_model(w, c, obs_dim=3):
  """Contract model with Q(s, a, delta) = sum(s) * (w_a + c_a * delta) -> [B, K, A]."""
  w = np.asarray(w, np.float32)
  c = np.asarray(c, np.float32)
  obs = keras.Input(shape=(obs_dim,), dtype="float32", name="observation")
  delta = keras.Input(shape=(None,), dtype="float32", name="delta")
  total = ops.reshape(ops.sum(obs, axis=-1), (-1, 1, 1))                    # [B] -> [B, 1, 1]
  # KerasTensor on the left of each op: numpy would otherwise try to absorb it.
  q = total * (ops.expand_dims(delta, -1) * c[None, None, :] + w[None, None, :])
  return keras.Model({"observation": obs, "delta": delta}, q)


# sum(s) = 1, 3, 1 (mean 5/3).
STATES = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 2.0]], np.float32)


# ------------------------------------------------------------------------------ delta family
def test_delta_family_of_a_model_increasing_in_delta():
  # Q = [S + 0.5 delta, 2 S + 1.5 delta]; S > 0 so V = 2 S + 1.5 delta, strictly increasing.
  model = additive_q_model([1.0, 2.0], [0.5, 1.5])
  out = diagnostics.delta_family(model, STATES, GRID4, batch_size=2)  # 2 batches: 2 + 1 states
  s = np.array([1.0, 3.0, 1.0])
  np.testing.assert_allclose(out["values"], 2 * s[:, None] + 1.5 * GRID4[None, :], rtol=1e-6)
  assert out["values"].shape == (3, 4)
  np.testing.assert_allclose(out["grid"], GRID4)
  np.testing.assert_allclose(out["mean_value"], 10 / 3 + 1.5 * GRID4, rtol=1e-6)
  assert out["monotone_fraction"] == 1.0
  assert out["strictly_increasing_fraction"] == 1.0
  # V(0.875) - V(0.125) = 1.5 * 0.75 = 1.125 at every state.
  assert out["spread_raw"] == pytest.approx(1.125, rel=1e-6)
  # No TD scale: divide by mean |V| = 2 * 5/3 + 1.5 * 0.5 = 49/12.
  assert out["spread_scale_kind"] == "mean_abs_value"
  assert out["spread_scale"] == pytest.approx(49 / 12, rel=1e-6)
  assert out["spread"] == pytest.approx(1.125 * 12 / 49, rel=1e-6)
  # max_a Q - min_a Q = S + delta; mean = 5/3 + 0.5 = 13/6.
  assert out["action_gap"] == pytest.approx(13 / 6, rel=1e-6)
  scaled = diagnostics.delta_family(model, STATES, GRID4, td_target_scale=2.25)
  assert scaled["spread_scale_kind"] == "td_target"
  assert scaled["spread"] == pytest.approx(0.5, rel=1e-6)  # 1.125 / 2.25


def test_delta_family_of_a_model_decreasing_in_delta():
  # Both actions decrease in delta, so their max does too: no state satisfies Lemma 1.
  model = additive_q_model([1.0, 2.0], [-0.5, -1.5])
  out = diagnostics.delta_family(model, STATES, GRID4)
  assert out["monotone_fraction"] == 0.0
  assert out["strictly_increasing_fraction"] == 0.0
  assert out["spread_raw"] < 0.0


def test_a_flat_family_is_monotone_but_not_strictly_and_has_no_spread():
  model = additive_q_model([1.0, 2.0], [0.0, 0.0])  # Q = w_a * S: no delta at all
  out = diagnostics.delta_family(model, STATES, GRID4)
  assert out["monotone_fraction"] == 1.0
  assert out["strictly_increasing_fraction"] == 0.0
  assert out["spread_raw"] == 0.0
  assert out["spread"] == 0.0
  assert out["action_gap"] == pytest.approx(5 / 3, rel=1e-6)  # (2 - 1) * mean S


def test_delta_family_fraction_counts_states():
  # Q = S (w_a + c_a delta): V increasing in delta where S > 0 (S = 1, 3), decreasing where
  # S < 0 (V = S (1 + 0.5 delta)): 2 of 3 states.
  states = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]], np.float32)
  out = diagnostics.delta_family(scaled_q_model([1.0, 2.0], [0.5, 1.5]), states, GRID4)
  assert out["monotone_fraction"] == pytest.approx(2 / 3)
  # spread_raw: mean of 1.5 * 0.75, 3 * 1.5 * 0.75, -0.5 * 0.75 = 0.75 * (1.5 + 4.5 - 0.5) / 3.
  assert out["spread_raw"] == pytest.approx(0.75 * 5.5 / 3, rel=1e-6)


def bump_q_model(obs_dim=3):
  """Contract model with one action, Q(s, delta) = sum(s) * (delta - 4 (delta - 0.5)^2):
  at GRID4 the factor is 0.125 - 0.5625 = -0.4375, 0.375 - 0.0625 = 0.3125, 0.5625, 0.3125 --
  up, up, down: V(delta_K) > V(delta_1) for sum(s) > 0, but not nondecreasing step by step."""
  obs = keras.Input(shape=(obs_dim,), dtype="float32", name="observation")
  delta = keras.Input(shape=(None,), dtype="float32", name="delta")
  total = ops.reshape(ops.sum(obs, axis=-1), (-1, 1, 1))                    # [B] -> [B, 1, 1]
  d = ops.expand_dims(delta, -1)                                            # [B, K, 1]
  return keras.Model({"observation": obs, "delta": delta},
                     total * (d - 4.0 * ops.square(d - 0.5)))


def test_end_ordering_and_the_largest_return():
  # sum(s) = 1, 3, 1 > 0: every state is end-ordered (0.3125 s > -0.4375 s) but none is
  # stepwise nondecreasing. V = s * factor: the largest is 3 * 0.5625 = 1.6875. Against
  # value_max 1: only the state with sum 3 exceeds it (0.5625 <= 1 for the others) -> 1/3.
  out = diagnostics.delta_family(bump_q_model(), STATES, GRID4, value_max=1.0)
  assert out["monotone_fraction"] == 0.0
  assert out["end_ordered_fraction"] == 1.0
  assert out["v_max"] == pytest.approx(1.6875)
  assert out["above_value_max_fraction"] == pytest.approx(1 / 3)
  summary = diagnostics.summarize(out)
  assert summary["lemma1_end_fraction"] == 1.0 and summary["lemma1_fraction"] == 0.0
  assert summary["v_above_value_max_fraction"] == pytest.approx(1 / 3)
  # Without a known largest return the check is omitted.
  out = diagnostics.delta_family(bump_q_model(), STATES, GRID4)
  assert math.isnan(out["above_value_max_fraction"])
  assert "v_above_value_max_fraction" not in diagnostics.summarize(out)
  with pytest.raises(ValueError, match="value_max must be None or finite"):
    diagnostics.delta_family(bump_q_model(), STATES, GRID4, value_max=float("inf"))


def test_delta_family_rejects_bad_arguments():
  model = additive_q_model([1.0, 2.0], [0.5, 1.5])
  with pytest.raises(ValueError, match="grid"):
    diagnostics.delta_family(model, STATES, [0.5, 0.25])
  with pytest.raises(ValueError, match="grid"):
    diagnostics.delta_family(model, STATES, [0.0, 0.5])
  with pytest.raises(ValueError, match="batch_size"):
    diagnostics.delta_family(model, STATES, GRID4, batch_size=0)
  with pytest.raises(ValueError, match="observations"):
    diagnostics.delta_family(model, STATES[:0], GRID4)
  flat = keras.Model(model.inputs, ops.sum(model.outputs[0], axis=-1))  # [B, K]: not [B, K, A]
  with pytest.raises(ValueError, match=r"\[B, K, A\]"):
    diagnostics.delta_family(flat, STATES, GRID4)


def test_td_target_scale_by_hand():
  # V(s', delta) = 2 S' + 1.5 delta. gamma = 0.5, grid [0.25, 0.75].
  # Transition 1: r = 1, not terminal, S' = 1 -> 1 + 0.5 (2 + 1.5 delta) = 2.1875, 2.5625.
  # Transition 2: r = -5, terminal -> |-5| = 5 at both deltas.
  # Mean over 4 entries: (2.1875 + 2.5625 + 5 + 5) / 4 = 3.6875.
  model = additive_q_model([1.0, 2.0], [0.5, 1.5])
  batches = [
      dict(observation=STATES[:1], action=np.array([0], np.int32),
           reward=np.array([1.0], np.float32), next_observation=STATES[:1],
           terminal=np.array([0.0], np.float32)),
      dict(observation=STATES[1:2], action=np.array([1], np.int32),
           reward=np.array([-5.0], np.float32), next_observation=STATES[1:2],
           terminal=np.array([1.0], np.float32)),
  ]
  got = diagnostics.td_target_scale(model, batches, [0.25, 0.75], gamma=0.5)
  assert got == pytest.approx(3.6875, rel=1e-6)
  with pytest.raises(ValueError, match="no transitions"):
    diagnostics.td_target_scale(model, [], [0.25, 0.75], gamma=0.5)
  with pytest.raises(ValueError, match="gamma"):
    diagnostics.td_target_scale(model, batches, [0.25, 0.75], gamma=1.5)


# ------------------------------------------------------------------------------ ROC AUC
def test_roc_auc_by_hand_with_ties():
  # neg [1, 2, 3], pos [2, 4]; pairs (pos, neg): (2,1) 1, (2,2) 0.5, (2,3) 0, (4,*) 1 + 1 + 1
  # -> (1 + 0.5 + 0 + 3) / 6 = 0.75.
  assert diagnostics.roc_auc([1, 2, 3], [2, 4]) == pytest.approx(0.75)
  assert diagnostics.roc_auc([1, 2], [3, 4, 5]) == 1.0
  assert diagnostics.roc_auc([3, 4, 5], [1, 2]) == 0.0
  assert diagnostics.roc_auc([7, 7], [7, 7, 7]) == 0.5
  # neg [0, 1, 1], pos [1]: (1,0) 1, (1,1) 0.5, (1,1) 0.5 -> 2 / 3.
  assert diagnostics.roc_auc([0, 1, 1], [1]) == pytest.approx(2 / 3)


def test_roc_auc_rejects_empty_and_non_finite():
  with pytest.raises(ValueError, match="scores_negative"):
    diagnostics.roc_auc([], [1.0])
  with pytest.raises(ValueError, match="scores_positive"):
    diagnostics.roc_auc([1.0], [])
  with pytest.raises(ValueError, match="finite"):
    diagnostics.roc_auc([1.0, np.nan], [2.0])
  with pytest.raises(ValueError, match="finite"):
    diagnostics.roc_auc([1.0], [np.inf])


def test_count_separation_summaries():
  out = diagnostics.count_separation([1, 2, 3, 4, 5], [10.0, 20.0])
  assert out["auc"] == 1.0
  # Linear percentiles of [1..5]: position q/100 * 4 -> p10 = 1.4, median 3, p90 = 4.6.
  assert out["seen"] == pytest.approx(
      {"mean": 3.0, "median": 3.0, "p10": 1.4, "p90": 4.6, "min": 1.0, "max": 5.0, "n": 5})
  assert out["unseen"]["median"] == pytest.approx(15.0)  # midway between 10 and 20
  assert out["unseen"]["p10"] == pytest.approx(11.0)
  with pytest.raises(ValueError, match="inv_unseen"):
    diagnostics.count_separation([1.0], [])


# ------------------------------------------------------------------------------ counts
def one_hot_counts():
  """States 0, 1, 2 visited 1, 2, 4 times (|D| = 7); feature 3 is a direction never seen."""
  visits = np.array([1, 2, 4, 0])
  states = np.repeat(np.arange(4), visits)                                  # [7]
  np.random.default_rng(0).shuffle(states)
  phi = np.eye(4, dtype=np.float32)[states]                                 # [7, 4]
  est = counts.LinearInverseCounts(4, dataset_size=len(states), ridge=1e-6, decay=None)
  for chunk in np.array_split(phi, 3):                                      # 3 minibatches
    est.update(tf.constant(chunk))
  est.refresh()
  return est, phi


def test_one_hot_counts_separation_spectrum_and_trace_identity():
  est, phi = one_hot_counts()
  # |D| C = diag(1, 2, 4, 0): n(s)^-1 = 1 / (n(s) + 1e-6) ~ 1/n(s); the unseen direction has
  # 1 / 1e-6, capped at 1.
  inv = est.inverse_count(tf.eye(4)).numpy()
  np.testing.assert_allclose(inv, [1.0, 0.5, 0.25, 1.0], rtol=1e-5)
  assert inv[0] < 1.0  # seen once: 1 / (1 + 1e-6), just below the cap

  inv_seen = est.inverse_count(tf.constant(phi)).numpy()                    # dataset rows
  sep = diagnostics.count_separation(inv_seen, inv[3:])
  assert sep["auc"] == 1.0
  assert sep["seen"]["n"] == 7 and sep["unseen"]["n"] == 1
  # Rows: 1 x 1, 2 x 0.5, 4 x 0.25 -> sorted [.25 x4, .5 x2, 1]; median = 0.25.
  assert sep["seen"]["median"] == pytest.approx(0.25, rel=1e-5)
  assert sep["seen"]["mean"] == pytest.approx(3.0 / 7.0, rel=1e-5)  # (1 + 1 + 1) / 7

  spec = diagnostics.count_spectrum(est)
  np.testing.assert_allclose(spec["eigenvalues"], [4.0, 2.0, 1.0, 0.0], atol=1e-5)
  np.testing.assert_allclose(spec["top_eigenvalues"], [4.0, 2.0, 1.0, 0.0], atol=1e-5)
  assert spec["ridge"] == pytest.approx(1e-6)
  assert spec["num_above_ridge"] == 3
  assert spec["feature_dim"] == 4
  assert spec["trace"] == pytest.approx(7.0, rel=1e-5)
  # sum_i n_i / (n_i + 1e-6) over the 3 seen states ~ 3.
  assert spec["effective_rank"] == pytest.approx(3.0, abs=1e-5)
  # Trace identity: |D| * mean over the data of phi^T (|D| C + lambda I)^-1 phi
  #   = tr((|D| C + lambda I)^-1 |D| C) = effective rank.
  m = diagnostics.mean_inverse_count_times_size(est, phi)
  assert m == pytest.approx(spec["effective_rank"], abs=1e-4)


def test_trace_identity_on_random_features_with_a_large_ridge():
  # Dense features, ridge comparable to the eigenvalues: the identity is not a one-hot accident.
  rng = np.random.default_rng(3)
  phi = (rng.normal(size=(200, 5)) * np.array([3.0, 1.0, 0.3, 0.1, 0.03])).astype(np.float32)
  est = counts.LinearInverseCounts(5, dataset_size=200, ridge=20.0, decay=None)
  est.update(tf.constant(phi))
  est.refresh()
  spec = diagnostics.count_spectrum(est)
  lam = np.linalg.eigvalsh(phi.astype(np.float64).T @ phi)                  # |D| C = Phi^T Phi
  assert spec["effective_rank"] == pytest.approx(np.sum(lam / (lam + 20.0)), rel=1e-4)
  assert spec["num_above_ridge"] == int(np.sum(lam > 20.0))
  assert 1 < spec["num_above_ridge"] < 5
  m = diagnostics.mean_inverse_count_times_size(est, phi)
  assert m == pytest.approx(spec["effective_rank"], rel=1e-4)


def test_count_spectrum_prefers_effective_ridge():
  # A stand-in estimator whose precision uses ridge 2 (e.g. relative to the feature scale).
  fake = types.SimpleNamespace(second_moment=np.diag([0.5, 0.25]).astype(np.float32),
                               dataset_size=8.0, ridge=1.0, effective_ridge=lambda: 2.0)
  spec = diagnostics.count_spectrum(fake)
  # |D| C = diag(4, 2); 4 / (4 + 2) + 2 / (2 + 2) = 2/3 + 1/2.
  assert spec["ridge"] == 2.0
  assert spec["effective_rank"] == pytest.approx(2 / 3 + 1 / 2)
  assert spec["num_above_ridge"] == 1  # 4 > 2; 2 is not
  with pytest.raises(ValueError, match="counts"):
    diagnostics.count_spectrum(object())


def test_count_spectrum_of_the_exact_gram():
  # The dataset's Gram diag(2, 4, 0) (3 rows), absolute ridge 1: effective rank 2/3 + 4/5.
  est = counts.LinearInverseCounts(3, dataset_size=3, ridge=1.0, gram_source="exact")
  est.refresh_exact([tf.constant([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])])
  spec = diagnostics.count_spectrum(est)
  np.testing.assert_allclose(spec["eigenvalues"], [4.0, 2.0, 0.0], atol=1e-6)
  assert spec["effective_rank"] == pytest.approx(2 / 3 + 4 / 5, rel=1e-6)


def test_mean_inverse_count_times_size_uses_the_raw_estimate_when_available():
  # A normalized inverse_count (e.g. divided by its running mean) would break the comparison
  # with the effective rank, so the raw estimate is used when the estimator offers one.
  fake = types.SimpleNamespace(dataset_size=10.0,
                               raw_inverse_count=lambda phi: tf.fill([tf.shape(phi)[0]], 0.2),
                               inverse_count=lambda phi: tf.fill([tf.shape(phi)[0]], 1.0))
  assert diagnostics.mean_inverse_count_times_size(fake, np.ones((3, 2))) == pytest.approx(2.0)
  del fake.raw_inverse_count
  assert diagnostics.mean_inverse_count_times_size(fake, np.ones((3, 2))) == pytest.approx(10.0)


# ------------------------------------------------------------------------------ unseen states
def test_shuffled_pixels_keep_each_frames_pixels_per_channel():
  rng = np.random.default_rng(4)
  obs = (rng.random((6, 10, 10, 4)) < 0.3).astype(np.uint8)
  out = diagnostics.unseen_observations(obs, np.random.default_rng(5), kind="shuffled_pixels")
  assert out.shape == obs.shape and out.dtype == np.uint8
  # Same multiset of values per frame and channel ...
  np.testing.assert_array_equal(np.sort(out.reshape(6, 100, 4), axis=1),
                                np.sort(obs.reshape(6, 100, 4), axis=1))
  # ... and of channel vectors per frame (one permutation per frame, shared by its channels).
  for f in range(6):
    np.testing.assert_array_equal(np.unique(out[f].reshape(100, 4), axis=0, return_counts=True)[1],
                                  np.unique(obs[f].reshape(100, 4), axis=0, return_counts=True)[1])
  assert not np.array_equal(out, obs)
  # Frames without a channel axis [S, H, W] too.
  gray = rng.integers(0, 256, size=(3, 8, 8)).astype(np.uint8)
  out = diagnostics.unseen_observations(gray, 0)
  np.testing.assert_array_equal(np.sort(out.reshape(3, -1), axis=1),
                                np.sort(gray.reshape(3, -1), axis=1))
  with pytest.raises(ValueError, match="shuffled_pixels"):
    diagnostics.unseen_observations(np.zeros((4, 5)), 0, kind="shuffled_pixels")
  with pytest.raises(ValueError, match="kind"):
    diagnostics.unseen_observations(obs, 0, kind="blur")


def test_noise_observations_match_dtype_and_range():
  # Binary MinAtar-like grids with channel occupancies 0, 1, and in between: the noise keeps
  # the all-zero and all-one channels exactly (Bernoulli(0), Bernoulli(1)).
  rng = np.random.default_rng(6)
  obs = np.zeros((20, 10, 10, 3), np.uint8)
  obs[..., 1] = 1
  obs[..., 2] = rng.random((20, 10, 10)) < 0.5
  out = diagnostics.unseen_observations(obs, np.random.default_rng(7), kind="noise")
  assert out.shape == obs.shape and out.dtype == np.uint8
  assert set(np.unique(out)) <= {0, 1}
  assert np.all(out[..., 0] == 0) and np.all(out[..., 1] == 1)
  assert abs(out[..., 2].mean() - obs[..., 2].mean()) < 0.05
  # Float data: uniform in the data's range.
  floats = rng.uniform(-1.0, 2.0, size=(50, 6)).astype(np.float32)
  out = diagnostics.unseen_observations(floats, 8, kind="noise")
  assert out.dtype == np.float32 and out.shape == floats.shape
  assert out.min() >= floats.min() and out.max() <= floats.max()
  # Non-binary integer frames: integers in [min, max].
  frames = rng.integers(10, 200, size=(4, 8, 8, 2)).astype(np.uint8)
  out = diagnostics.unseen_observations(frames, 9, kind="noise")
  assert out.dtype == np.uint8 and out.min() >= frames.min() and out.max() <= frames.max()


# ------------------------------------------------------------------------------ belief
def record(episode, log_belief, deltas=(), run=0):
  return EpisodeRecord(run=run, episode=episode, return_=0.0, raw_score=0.0, length=len(deltas),
                       deltas=list(deltas), map_delta=math.nan, log_belief=log_belief)


def test_belief_trace_and_movement_by_hand():
  uniform = np.full(4, -np.log(4.0), np.float32)
  peaked = np.array([-60.0, -60.0, 0.0, -60.0], np.float32)               # ~ one-hot at 0.625
  p = np.array([0.1, 0.2, 0.3, 0.4])
  unnormalized = np.log(p) + 3.0                                            # logits, not normalized
  records = [record(0, uniform, deltas=[0.125, 0.875]), record(1, None),  # no belief: skipped
             record(2, unnormalized), record(3, peaked, deltas=[0.625])]
  trace = diagnostics.belief_trace(records, GRID4)
  assert [t["episode"] for t in trace] == [0, 2, 3]
  # Uniform: entropy log 4, mean of the grid, acted deltas averaged.
  assert trace[0]["entropy"] == pytest.approx(np.log(4.0), rel=1e-6)
  assert trace[0]["expected_delta"] == pytest.approx(0.5, rel=1e-6)
  assert trace[0]["mean_acted_delta"] == pytest.approx(0.5)
  # p = [.1, .2, .3, .4]: E[delta] = .0125 + .075 + .1875 + .35 = 0.625;
  # entropy -sum p log p; MAP at the largest p (delta 0.875); no acted deltas -> nan.
  assert trace[1]["expected_delta"] == pytest.approx(0.625, rel=1e-6)
  assert trace[1]["entropy"] == pytest.approx(-np.sum(p * np.log(p)), rel=1e-6)
  assert trace[1]["map_delta"] == pytest.approx(0.875)
  assert math.isnan(trace[1]["mean_acted_delta"])
  # ~ one-hot: entropy ~ 0, E[delta] = 0.625 = the MAP.
  assert trace[2]["entropy"] == pytest.approx(0.0, abs=1e-20)
  assert trace[2]["expected_delta"] == pytest.approx(0.625, rel=1e-6)
  assert trace[2]["map_delta"] == pytest.approx(0.625)

  move = diagnostics.belief_movement(trace, GRID4)
  assert move == pytest.approx({
      "prior_expected_delta": 0.5, "final_expected_delta": 0.625, "max_abs_shift": 0.125,
      "prior_entropy": np.log(4.0), "final_entropy": 0.0, "min_entropy": 0.0, "episodes": 3},
      abs=1e-6)
  with pytest.raises(ValueError, match="trace"):
    diagnostics.belief_movement([], GRID4)
  with pytest.raises(ValueError, match="log_belief"):
    diagnostics.belief_trace([record(0, np.zeros(3, np.float32))], GRID4)


# ------------------------------------------------------------------------------ summary, files
def test_summarize_flattens_and_omits_missing_parts():
  family = {"spread": 0.5, "spread_raw": np.float32(1.125), "monotone_fraction": 1.0,
            "action_gap": 2.0}
  separation = diagnostics.count_separation([1, 2, 3], [4.0])
  spectrum = {"effective_rank": np.float64(3.0)}
  movement = {"max_abs_shift": 0.125, "final_entropy": 0.0, "prior_entropy": np.log(4.0)}
  out = diagnostics.summarize(family, separation, spectrum, movement, mean_inv_count_x_size=2.9)
  assert out == pytest.approx({
      "family_spread": 0.5, "family_spread_raw": 1.125, "lemma1_fraction": 1.0,
      "action_gap": 2.0, "count_auc": 1.0, "inv_count_seen_median": 2.0,
      "inv_count_unseen_median": 4.0, "effective_rank": 3.0, "mean_inv_count_x_size": 2.9,
      "belief_max_shift": 0.125, "belief_final_entropy": 0.0,
      "belief_prior_entropy": np.log(4.0)})
  assert all(type(v) is float for v in out.values())
  only = diagnostics.summarize(None, None, None, movement)
  assert set(only) == {"belief_max_shift", "belief_final_entropy", "belief_prior_entropy"}
  assert diagnostics.summarize(None, None, None, None) == {}


def test_writers_create_files(tmp_path):
  family = diagnostics.delta_family(additive_q_model([1.0, 2.0], [0.5, 1.5]), STATES, GRID4)
  png = tmp_path / "family.png"
  diagnostics.plot_delta_family(str(png), family, num_states=2)
  assert png.stat().st_size > 0
  trace = diagnostics.belief_trace(
      [record(e, np.log(np.array([0.1, 0.2, 0.3, 0.4]) + 0.1 * e), run=e // 2) for e in range(4)],
      GRID4)
  csv_path = tmp_path / "belief.csv"
  diagnostics.write_belief_csv(str(csv_path), trace)
  with open(csv_path) as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 4
  assert float(rows[0]["expected_delta"]) == pytest.approx(trace[0]["expected_delta"], rel=1e-5)
  assert rows[3]["run"] == "1" and rows[3]["episode"] == "3"
  belief_png = tmp_path / "belief.png"
  diagnostics.plot_belief(str(belief_png), trace)
  assert belief_png.stat().st_size > 0


def test_greedy_action_stats_by_hand():
  """Q(s, a, delta) = table[s, a] (no delta dependence), 4 states, 3 actions.
  Greedy actions [2, 2, 2, 0]: the most common (2) covers 3 of 4 states -> mode share 0.75.
  Data actions [2, 1, 1, 0]: greedy agrees at states 0 and 3 -> 0.5; the data's most
  frequent action (1) is 2 of 4 -> 0.5."""
  table = np.array([[0.0, 1.0, 2.0], [0.0, 0.5, 3.0], [1.0, 0.0, 1.5], [4.0, 0.0, 1.0]],
                   np.float32)

  def q_model(inputs, training=False):
    del training
    s = np.argmax(np.asarray(inputs["observation"]), axis=-1)        # one-hot -> state
    k = np.asarray(inputs["delta"]).shape[1]
    return np.repeat(table[s][:, None, :], k, axis=1)              # [B, K, A]
  stats = policy_diagnostics.greedy_action_stats(q_model, np.eye(4, dtype=np.float32), [2, 1, 1, 0],
                                          delta=0.5, num_actions=3)
  assert stats == {"greedy_mode_share": 0.75, "behaviour_agreement": 0.5,
                   "behaviour_mode_share": 0.5}
  with pytest.raises(ValueError, match="3 actions for 4 observations"):
    policy_diagnostics.greedy_action_stats(q_model, np.eye(4, dtype=np.float32), [2, 1, 1], 0.5, 3)


def test_family_action_stats_by_hand():
  """A family built to have a known answer: 4 one-hot states, grid (0.25, 0.5, 0.75), 2 actions,
  Q(s, a, delta_k) = 1 for the chosen greedy action and 0 for the other.
  Greedy actions per state along the grid: s0 (0, 1, 1), s1 (1, 0, 1), s2 (0, 0, 0),
  s3 (1, 1, 1); data actions (1, 0, 0, 0).
  differs_ends: only s0 -> 1/4; differs_any: s0 and s1 -> 2/4.
  agreement: k0 greedy (0, 1, 0, 1) -> s2 only, 1/4; k1 (1, 0, 0, 1) -> s0, s1, s2, 3/4;
  k2 (1, 1, 0, 1) -> s0, s2, 2/4. Mode shares: 0.5, 0.5, 0.75; the data's: 3/4.
  CQL gap: log(1 + e) - 1 = 0.31326 where the data action is greedy, log(1 + e) = 1.31326
  where not: k0 (3 x 1.31326 + 0.31326) / 4, k1 (3 x 0.31326 + 1.31326) / 4, k2 the mean of
  two of each."""
  grid = np.array([0.25, 0.5, 0.75], np.float32)
  greedy = np.array([[0, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 1]])
  table = np.eye(2, dtype=np.float32)[greedy]                        # [S, K, A]

  def q_model(inputs, training=False):
    del training
    np.testing.assert_allclose(np.asarray(inputs["delta"])[0], grid)
    return table[np.argmax(np.asarray(inputs["observation"]), axis=-1)]
  stats = policy_diagnostics.family_action_stats(
      q_model, np.eye(4, dtype=np.float32), [1, 0, 0, 0], grid, num_actions=2, batch_size=3)
  lse = math.log(1 + math.e)
  assert stats["differs_ends"] == 0.25 and stats["differs_any"] == 0.5
  assert stats["agreement"] == [0.25, 0.75, 0.5]
  assert stats["greedy_mode_share"] == [0.5, 0.5, 0.75]
  assert stats["behaviour_mode_share"] == 0.75
  np.testing.assert_allclose(stats["cql_gap"], [(3 * lse + lse - 1) / 4,
                                                (3 * (lse - 1) + lse) / 4,
                                                (2 * lse + 2 * (lse - 1)) / 4], rtol=1e-6)
  summary = policy_diagnostics.family_summary(stats)
  assert summary["family_differs_ends"] == 0.25 and summary["family_agreement_hi"] == 0.5
  assert summary["family_greedy_mode_share_lo"] == 0.5
  # A delta-free Q (a baseline's contract model) has no family: nothing differs.
  flat = policy_diagnostics.family_action_stats(
      lambda inputs, training=False: np.repeat(table[:, :1], 3, axis=1)[
          np.argmax(np.asarray(inputs["observation"]), -1)],
      np.eye(4, dtype=np.float32), [1, 0, 0, 0], grid, num_actions=2)
  assert flat["differs_ends"] == 0.0 and flat["differs_any"] == 0.0
  with pytest.raises(ValueError, match="3 actions for 4 observations"):
    policy_diagnostics.family_action_stats(q_model, np.eye(4, dtype=np.float32), [1, 0, 0],
                                           grid, num_actions=2)
  with pytest.raises(ValueError, match="sorted strictly increasing"):
    policy_diagnostics.family_action_stats(q_model, np.eye(4, dtype=np.float32), [1, 0, 0, 0],
                                           grid[::-1], num_actions=2)
