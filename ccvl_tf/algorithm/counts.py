"""Inverse state-visitation estimates n(s)^-1 for the CCVL regularizer weight.

More in docs/agent.md "Module notes", `ccvl_tf/algorithm/counts.py`.
"""
from __future__ import annotations

from typing import Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

RIDGE_MODES = ("absolute", "relative")
NORMALIZATIONS = ("none", "mean", "batch")


class LinearInverseCounts(tf.Module):
  """n(s)^-1 ~ min(1, phi^T (|D| C + ridge I)^-1 phi) with a running C = E[phi phi^T]; online
  (`start_online`) |D| C becomes |D_off| C_off + n_on C_on (module notes)."""

  def __init__(self, feature_dim: int, dataset_size: float, ridge: float = 1.0,
               decay: Optional[float] = None, ridge_mode: str = "absolute",
               normalization: str = "none", normalization_decay: float = 0.99,
               name: str = "linear_inverse_counts"):
    """
    Args:
      feature_dim: D, the width of phi(s).
      dataset_size: |D|, the number of transitions in the offline dataset (Phi's rows).
      ridge: lambda > 0 added to the diagonal (an unseen direction gets n^-1 = |phi|^2/lambda).
      decay: None for a cumulative mean of phi phi^T over everything seen; a float in (0, 1)
        for an exponential moving average with that decay per update (forgets old features).
      ridge_mode: 'absolute' (lambda = ridge) or 'relative' (lambda = ridge * trace(|D| C) / D).
      normalization: 'none', 'mean' (divide by the running data mean of n(s)^-1) or 'batch'
        (by the mean over the batch given; online, by the running mean frozen offline).
      normalization_decay: decay of that running mean (per update).
    """
    super().__init__(name=name)
    if int(feature_dim) != feature_dim or feature_dim < 1:
      raise ValueError(f"feature_dim must be an integer >= 1, got {feature_dim!r}")
    if not dataset_size > 0:
      raise ValueError(f"dataset_size must be > 0, got {dataset_size!r}")
    if not ridge > 0:
      raise ValueError(f"ridge must be > 0, got {ridge!r}")
    if decay is not None and not 0.0 < decay < 1.0:
      raise ValueError(f"decay must be None or in (0, 1), got {decay!r}")
    if ridge_mode not in RIDGE_MODES:
      raise ValueError(f"ridge_mode must be one of {RIDGE_MODES}, got {ridge_mode!r}")
    if normalization not in NORMALIZATIONS:
      raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    if not 0.0 < normalization_decay < 1.0:
      raise ValueError(f"normalization_decay must be in (0, 1), got {normalization_decay!r}")
    self.ridge_mode = ridge_mode
    self.normalization = normalization
    self.normalization_decay = float(normalization_decay)
    self.feature_dim = int(feature_dim)
    self.dataset_size = float(dataset_size)
    self.ridge = float(ridge)
    self.decay = decay
    d = self.feature_dim
    # C = E[phi phi^T], running; [D, D].
    self.second_moment = tf.Variable(tf.zeros([d, d]), trainable=False, name="second_moment")
    # Number of feature vectors folded into C so far (float64 to count past 2^24 exactly).
    self.num_seen = tf.Variable(tf.constant(0.0, tf.float64), trainable=False, name="num_seen")
    # Cached (|D| C + lambda I)^-1, [D, D]; starts at the prior (ridge I)^-1 (relative mode: I,
    # until the first refresh gives C a scale).
    init = 1.0 / self.ridge if ridge_mode == "absolute" else 1.0
    self.precision = tf.Variable(tf.eye(d) * init, trainable=False, name="precision")
    # The lambda of the cached precision (what refresh() used).
    self.ridge_used = tf.Variable(1.0 / init, trainable=False, name="ridge_used")
    # Running (EMA) mean of the raw n(s)^-1 over training batches, TFP's moving mean with
    # zero-debiasing; used by normalization='mean' and reported by the diagnostics.
    self.mean_inverse = tf.Variable(0.0, trainable=False, name="mean_inverse")
    self.mean_inverse_var = tf.Variable(0.0, trainable=False, name="mean_inverse_var")
    self.mean_inverse_debias = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                           name="mean_inverse_debias")
    # Online mode (start_online): the leading rows of a batch that are online transitions.
    self.online_rows: Optional[int] = None
    self.samples_per_insert: Optional[float] = None

  @property
  def online(self) -> bool:
    """Whether `start_online` was called (|D| and C follow the online data)."""
    return self.online_rows is not None

  def start_online(self, online_rows: int, samples_per_insert: float) -> None:
    """From now on n(s)^-1 follows the data the learner trains on (module notes).

    Creates the online variables (C_on `online_moment`, the feature vectors folded into it
    `online_seen`, n_on `online_size`); call it after restoring an offline checkpoint (which
    has none of them) and before restoring an online one (which has them). A tf.function that
    traced `update` before must be traced again.

    Args:
      online_rows: how many leading rows of every batch given to `update` are online
        transitions (the rest, if any, are offline data).
      samples_per_insert: SPI of the replay: n_on grows by online rows / SPI per update.
    """
    if self.online:
      raise ValueError("start_online was already called")
    if int(online_rows) != online_rows or online_rows < 1:
      raise ValueError(f"online_rows must be an integer >= 1, got {online_rows!r}")
    if not samples_per_insert > 0:
      raise ValueError(f"samples_per_insert must be > 0, got {samples_per_insert!r}")
    d = self.feature_dim
    self.online_moment = tf.Variable(tf.zeros([d, d]), trainable=False, name="online_moment")
    self.online_seen = tf.Variable(tf.constant(0.0, tf.float64), trainable=False,
                                   name="online_seen")
    self.online_size = tf.Variable(tf.constant(0.0, tf.float64), trainable=False,
                                   name="online_size")
    self.online_rows, self.samples_per_insert = int(online_rows), float(samples_per_insert)

  def total_size(self) -> tf.Tensor:
    """|D| in force: |D_off| offline, |D_off| + n_on online (float32 scalar)."""
    size = tf.constant(self.dataset_size, tf.float32)
    if self.online:
      size += tf.cast(self.online_size, tf.float32)
    return size

  def gram(self) -> tf.Tensor:
    """The estimate of Phi^T Phi [D, D]: |D| C offline, |D_off| C_off + n_on C_on online."""
    g = self.dataset_size * self.second_moment
    if self.online:
      g += tf.cast(self.online_size, tf.float32) * self.online_moment
    return g

  def _fold(self, phi: tf.Tensor, moment: tf.Variable, seen: tf.Variable) -> None:
    """Folds phi [B, D] (B may be 0) into the running mean `moment` of phi phi^T."""
    b = tf.cast(tf.shape(phi)[0], tf.float64)
    batch_moment = (tf.matmul(phi, phi, transpose_a=True)
                    / tf.cast(tf.maximum(b, 1.0), tf.float32))         # [D, D]
    # Cumulative mean: C <- C + (batch mean - C) * B / (n + B).
    rate = tf.cast(b / tf.maximum(seen + b, 1.0), tf.float32)
    if self.decay is not None:
      # EMA, but a plain mean while fewer than 1/(1-decay) updates' worth have been seen.
      rate = tf.where(b > 0, tf.maximum(rate, 1.0 - self.decay), 0.0)
    moment.assign_add(rate * (batch_moment - moment))
    seen.assign_add(b)

  def update(self, phi: tf.Tensor, raw_inverse_count: Optional[tf.Tensor] = None) -> None:
    """Folds a batch of features phi [B, D] into C (no gradient flows into phi).

    `raw_inverse_count` [B]: `raw_inverse_count(phi)` under the current precision, if the
    caller already has it (the agent's objective does); computed here otherwise (offline only:
    online the normalization is frozen).

    Online (`start_online`): the first `online_rows` rows into C_on and n_on += their number /
    SPI; the others (offline data) into C_off; the normalization's running mean is not updated.
    """
    phi = tf.stop_gradient(tf.cast(phi, tf.float32))                   # [B, D]
    if self.online:
      self._fold(phi[:self.online_rows], self.online_moment, self.online_seen)
      self.online_size.assign_add(
          tf.cast(tf.shape(phi[:self.online_rows])[0], tf.float64) / self.samples_per_insert)
      self._fold(phi[self.online_rows:], self.second_moment, self.num_seen)
      return
    # The raw n(s)^-1 of this batch under the current precision, into the running mean.
    raw = (self.raw_inverse_count(phi) if raw_inverse_count is None
           else tf.stop_gradient(raw_inverse_count))                  # [B]
    tfp.stats.assign_moving_mean_variance(
        raw, self.mean_inverse, self.mean_inverse_var,
        zero_debias_count=self.mean_inverse_debias, decay=self.normalization_decay, axis=0)
    self._fold(phi, self.second_moment, self.num_seen)

  def effective_ridge(self) -> tf.Tensor:
    """lambda for the current C: `ridge` ('absolute') or ridge * trace(`gram()`) / D
    ('relative', floored at 1e-12 so that the Gram matrix stays positive definite)."""
    if self.ridge_mode == "absolute":
      return tf.constant(self.ridge, tf.float32)
    mean_eig = tf.linalg.trace(self.gram()) / self.feature_dim
    return tf.maximum(self.ridge * mean_eig, 1e-12)

  def refresh(self) -> None:
    """Recomputes the cached precision (`gram()` + lambda I)^-1 (one D x D Cholesky solve)."""
    d = self.feature_dim
    ridge = self.effective_ridge()
    gram = self.gram() + ridge * tf.eye(d)                             # [D, D]
    chol = tf.linalg.cholesky(gram)
    self.precision.assign(tf.linalg.cholesky_solve(chol, tf.eye(d)))
    self.ridge_used.assign(ridge)

  def raw_inverse_count(self, phi: tf.Tensor) -> tf.Tensor:
    """min(1, phi^T P phi) for phi [B, D] -> [B] (before any normalization)."""
    phi = tf.stop_gradient(tf.cast(phi, tf.float32))                   # [B, D]
    quad = tf.reduce_sum(tf.matmul(phi, self.precision) * phi, axis=-1)  # [B, D] -> [B]
    return tf.minimum(tf.maximum(quad, 0.0), 1.0)

  def inverse_count(self, phi: tf.Tensor) -> tf.Tensor:
    """n(s)^-1 for phi [B, D] -> [B], no gradient.

    normalization='none': min(1, phi^T P phi). 'mean': that divided by its running data mean
    (before the first update, by the batch's own mean; online, frozen at its offline value).
    'batch': divided by the mean over the states given (a training batch: mean 1 on every
    batch, so n(s)^-1 spreads alpha over the batch's states without changing its scale);
    online, by the running mean frozen at its offline value, as 'mean'.
    """
    return self.normalize(self.raw_inverse_count(phi))

  def normalize(self, raw: tf.Tensor) -> tf.Tensor:
    """The normalization of `inverse_count` applied to raw n(s)^-1 [B] -> [B], no gradient."""
    if self.normalization == "mean" or (self.normalization == "batch" and self.online):
      mean = tf.where(self.mean_inverse_debias > 0, self.running_mean_inverse_count(),
                      tf.reduce_mean(raw))
      raw = raw / tf.maximum(mean, 1e-12)
    elif self.normalization == "batch":
      raw = raw / tf.maximum(tf.reduce_mean(raw), 1e-12)             # mean 1 on every batch
    return tf.stop_gradient(raw)

  def running_mean_inverse_count(self) -> tf.Tensor:
    """The zero-debiased running mean of the raw n(s)^-1 over the training batches (0 before
    the first update)."""
    mean, _ = tfp.stats.moving_mean_variance_zero_debiased(
        self.mean_inverse, self.mean_inverse_var, self.mean_inverse_debias,
        decay=self.normalization_decay)
    return tf.where(self.mean_inverse_debias > 0, mean, 0.0)


class ExactInverseCounts(tf.Module):
  """Tabular n(s)^-1 = 1 / max(n(s), 1) from the dataset's integer states."""

  def __init__(self, states, num_states: int, name: str = "exact_inverse_counts"):
    """
    Args:
      states: int array of the dataset's states s (one per transition).
      num_states: S.
    """
    super().__init__(name=name)
    states = np.asarray(states)
    if int(num_states) != num_states or num_states < 1:
      raise ValueError(f"num_states must be an integer >= 1, got {num_states!r}")
    if states.size and (states.min() < 0 or states.max() >= num_states):
      raise ValueError(
          f"states must lie in [0, {num_states}), got range [{states.min()}, {states.max()}]")
    counts = np.bincount(states.astype(np.int64).ravel(), minlength=int(num_states))
    self.counts = counts
    self.table = tf.constant(1.0 / np.maximum(counts, 1.0), tf.float32)  # [S]

  def inverse_count(self, states: tf.Tensor) -> tf.Tensor:
    """1 / max(n(s), 1) for int states [B] -> [B]."""
    return tf.gather(self.table, tf.cast(states, tf.int32))

  def inverse_count_one_hot(self, observation: tf.Tensor) -> tf.Tensor:
    """The same from one-hot observations [B, S] (state = argmax) -> [B]."""
    return self.inverse_count(tf.argmax(observation, axis=-1, output_type=tf.int32))


class GrowingExactCounts(tf.Module):
  """Tabular n(s) that grows with online data: n(s) = n_D(s) + (online samples of s) / SPI.

  For online fine-tuning on a tabular task (the gridworld): the count starts at the offline
  dataset's n_D(s) and the learner adds the online part of every batch it trains on, divided
  by the replay's samples per insert (each inserted transition is sampled SPI times on average:
  the rate limiter holds that ratio), so n(s) estimates the transitions of s the learner has
  (offline + inserted online ones). n(s)^-1 = 1 / max(n(s), 1) (the paper's n wedge 1).
  The table is a tf.Variable, saved with the learner's checkpoint.
  """

  def __init__(self, states, num_states: int, name: str = "growing_exact_counts"):
    """
    Args:
      states: int array of the offline dataset's states s (one per transition).
      num_states: S.
    """
    super().__init__(name=name)
    base = ExactInverseCounts(states, num_states).counts                # validates, [S] int
    self.counts = tf.Variable(np.asarray(base, np.float32), trainable=False, name="counts")

  def inverse_count(self, states: tf.Tensor) -> tf.Tensor:
    """1 / max(n(s), 1) for int states [B] -> [B]."""
    return 1.0 / tf.maximum(tf.gather(self.counts, tf.cast(states, tf.int32)), 1.0)

  def inverse_count_one_hot(self, observation: tf.Tensor) -> tf.Tensor:
    """The same from one-hot observations [B, S] (state = argmax) -> [B]."""
    return self.inverse_count(tf.argmax(observation, axis=-1, output_type=tf.int32))

  def add_one_hot(self, observation, weight: float = 1.0) -> None:
    """n(s) += weight for each one-hot observation [B, S] (e.g. weight 1 / SPI)."""
    obs = tf.convert_to_tensor(observation, tf.float32)                  # [B, S]
    self.counts.assign_add(weight * tf.reduce_sum(obs, axis=0))          # [B, S] -> [S]
