"""Inverse state-visitation estimates n(s)^-1 for the CCVL regularizer weight.

More in docs/agent.md "Module notes", `ccvl_tf/algorithm/counts.py`.
"""
from __future__ import annotations

from typing import Dict, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

RIDGE_MODES = ("absolute", "relative")
NORMALIZATIONS = ("none", "mean", "batch")
# Where Phi^T Phi comes from: 'running' (|D| x a running E[phi phi^T] over training batches)
# or 'exact' (summed over the dataset's states at each refresh, `refresh_exact`).
GRAM_SOURCES = ("running", "exact")


def exact_gram(phi_batches):
  """(Phi^T Phi [D, D], number of rows n) summed over an iterable of feature batches [B_i, D]
  (float64 accumulation: 50,000 rows of features ~ 1 would lose digits in float32)."""
  gram, rows = None, 0
  for phi in phi_batches:
    phi = tf.cast(tf.stop_gradient(phi), tf.float64)                  # [B_i, D]
    part = tf.matmul(phi, phi, transpose_a=True)                      # [D, D]
    gram = part if gram is None else gram + part
    rows += int(phi.shape[0])
  if gram is None or rows == 0:
    raise ValueError("exact_gram needs at least one feature row, got none")
  return tf.cast(gram, tf.float32), rows


class LinearInverseCounts(tf.Module):
  """n(s)^-1 ~ min(1, phi^T (|D| C + ridge I)^-1 phi) with a running C = E[phi phi^T]; online
  (`start_online`) |D| C becomes |D_off| C_off + n_on C_on (module notes).

  gram_source='exact': Phi^T Phi is instead the dataset's own Gram matrix, summed over the
  features of its states at each refresh (`refresh_exact`), and n(s)^-1 = min(1, phi^T
  (Phi^T Phi + lambda I)^-1 phi) / m_0 with m_0 the mean of that raw n(s)^-1 over the dataset's
  states at the first exact refresh, frozen: alpha rescaled once to alpha / sqrt(m_0), so that
  the mean weight over the data starts where the batch normalization holds it (mean n(s)^-1 =
  1) and later follows the data's coverage instead of being renormalized per batch.
  """

  def __init__(self, feature_dim: int, dataset_size: float, ridge: float = 1.0,
               decay: Optional[float] = None, ridge_mode: str = "absolute",
               normalization: str = "none", normalization_decay: float = 0.99,
               gram_source: str = "running", name: str = "linear_inverse_counts"):
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
      gram_source: 'running' (|D| C from the training batches) or 'exact' (the dataset's
        Phi^T Phi given to `refresh_exact`; requires normalization='none', since its one
        rescaling by m_0 replaces the normalization).
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
    if gram_source not in GRAM_SOURCES:
      raise ValueError(f"gram_source must be one of {GRAM_SOURCES}, got {gram_source!r}")
    if gram_source == "exact" and normalization != "none":
      raise ValueError(
          f"gram_source='exact' rescales n(s)^-1 once by its dataset mean m_0 and takes no "
          f"other normalization: set normalization='none', got {normalization!r}")
    self.gram_source = gram_source
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
    # gram_source='exact': the dataset's Phi^T Phi of the last `refresh_exact` [D, D], and
    # m_0, the mean raw n(s)^-1 over the dataset at the first one (0 before it), both saved
    # with the checkpoint so that a resumed run weighs states as the uninterrupted one.
    if gram_source == "exact":
      self.exact_gram = tf.Variable(tf.zeros([d, d]), trainable=False, name="exact_gram")
      self.first_mean = tf.Variable(0.0, trainable=False, name="first_mean")
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
    if self.gram_source == "exact":
      raise ValueError("start_online: gram_source='exact' is an offline estimate (it sums "
                       "the offline dataset's features); use gram_source='running' online")
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
    """The estimate of Phi^T Phi [D, D]: |D| C offline, |D_off| C_off + n_on C_on online;
    gram_source='exact': the Phi^T Phi of the last `refresh_exact`."""
    if self.gram_source == "exact":
      return tf.identity(self.exact_gram)
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
    if self.gram_source == "running":   # 'exact': the Gram comes from refresh_exact only
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

  def refresh_exact(self, phi_batches) -> Dict[str, float]:
    """gram_source='exact': Phi^T Phi <- the sum of phi phi^T over `phi_batches` (an iterable
    of [B_i, D] features of the dataset's states, all of them or a uniform subsample; a
    subsample's sum is scaled by |D| / rows to the whole dataset's), then the cached precision
    (`refresh`). At the first call m_0 <- the mean of the raw n(s)^-1 over those rows under
    the new precision (frozen afterwards: alpha's one rescaling). Eager (not in tf.function).

    Returns {'rows', 'mean_raw' (this refresh's mean raw n(s)^-1 over the rows), 'first_mean'}.
    """
    if self.gram_source != "exact":
      raise ValueError(f"refresh_exact needs gram_source='exact', got {self.gram_source!r}")
    phis = [tf.cast(tf.stop_gradient(p), tf.float32) for p in phi_batches]
    gram, rows = exact_gram(phis)
    self.exact_gram.assign(gram * (self.dataset_size / rows))
    self.refresh()
    mean_raw = float(sum(float(tf.reduce_sum(self.raw_inverse_count(p))) for p in phis) / rows)
    if float(self.first_mean.numpy()) <= 0.0:
      self.first_mean.assign(max(mean_raw, 1e-12))
    return {"rows": rows, "mean_raw": mean_raw, "first_mean": float(self.first_mean.numpy())}

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
    online, by the running mean frozen at its offline value, as 'mean'. gram_source='exact':
    min(1, phi^T P phi) / m_0 (the class notes; before the first exact refresh, the raw value).
    """
    return self.normalize(self.raw_inverse_count(phi))

  def normalize(self, raw: tf.Tensor) -> tf.Tensor:
    """The normalization of `inverse_count` applied to raw n(s)^-1 [B] -> [B], no gradient."""
    if self.gram_source == "exact":
      m0 = self.first_mean
      return tf.stop_gradient(tf.where(m0 > 0.0, raw / tf.maximum(m0, 1e-12), raw))
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
