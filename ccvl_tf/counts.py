"""Inverse state-visitation estimates n(s)^-1 for the CCVL regularizer weight.

The paper (Sec. "Practical Algorithm", after Donoghue et al.'s linear-value estimate) uses

    n(s)^-1  ~  phi(s)^T (Phi^T Phi)^-1 phi(s)

where phi(s) [D] are last-layer features (treated as constants: stop-gradient) and Phi [|D|, D]
stacks phi over the dataset. For one-hot features Phi^T Phi = diag(n(s)) and the estimate is
exactly 1/n(s). In Eq. (cql update) the count enters as n(s) wedge 1 = max(n(s), 1), so every
estimate here is capped at 1.

Phi^T Phi over the whole dataset is too costly to recompute from scratch each step and the
features move during training, so LinearInverseCounts keeps a running estimate of the
per-sample second moment C = E_D[phi phi^T] from the minibatches it sees (cumulative mean, or
an exponential moving average that forgets stale features), and uses
Phi^T Phi ~ |D| * C, with |D| the dataset size, plus a ridge term lambda I:

    n(s)^-1 ~ min(1, phi^T (|D| C + lambda I)^-1 phi).

The inverse (a D x D Cholesky solve) is cached in a variable and refreshed by refresh().

ExactInverseCounts is the tabular version: 1 / max(n(s), 1) from integer states.

TensorFlow Probability is not used: its running statistics
(tfp.experimental.stats.RunningCovariance/RunningMean) track a *centered* covariance in
immutable state objects, while this needs the uncentered second moment in tf.Variables that
tf.train.Checkpoint saves with the agent; it is two lines of plain TF.
"""
from __future__ import annotations

from typing import Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf


class LinearInverseCounts(tf.Module):
  """n(s)^-1 ~ min(1, phi^T (|D| C + ridge I)^-1 phi) with a running C = E[phi phi^T]."""

  def __init__(self, feature_dim: int, dataset_size: float, ridge: float = 1.0,
               decay: Optional[float] = None, name: str = "linear_inverse_counts"):
    """
    Args:
      feature_dim: D, the width of phi(s).
      dataset_size: |D|, the number of transitions in the offline dataset (Phi's rows).
      ridge: lambda > 0 added to the diagonal (an unseen direction gets n^-1 = |phi|^2/lambda).
      decay: None for a cumulative mean of phi phi^T over everything seen; a float in (0, 1)
        for an exponential moving average with that decay per update (forgets old features).
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
    self.feature_dim = int(feature_dim)
    self.dataset_size = float(dataset_size)
    self.ridge = float(ridge)
    self.decay = decay
    d = self.feature_dim
    # C = E[phi phi^T], running; [D, D].
    self.second_moment = tf.Variable(tf.zeros([d, d]), trainable=False, name="second_moment")
    # Number of feature vectors folded into C so far (float64 to count past 2^24 exactly).
    self.num_seen = tf.Variable(tf.constant(0.0, tf.float64), trainable=False, name="num_seen")
    # Cached (|D| C + ridge I)^-1, [D, D]; starts at the prior (ridge I)^-1.
    self.precision = tf.Variable(tf.eye(d) / self.ridge, trainable=False, name="precision")

  def update(self, phi: tf.Tensor) -> None:
    """Folds a batch of features phi [B, D] into C (no gradient flows into phi)."""
    phi = tf.stop_gradient(tf.cast(phi, tf.float32))                   # [B, D]
    b = tf.cast(tf.shape(phi)[0], tf.float64)
    batch_moment = tf.matmul(phi, phi, transpose_a=True) / tf.cast(b, tf.float32)  # [D, D]
    if self.decay is None:
      # Cumulative mean: C <- C + (batch mean - C) * B / (n + B).
      rate = tf.cast(b / (self.num_seen + b), tf.float32)
    else:
      # EMA, but a plain mean while fewer than 1/(1-decay) updates' worth have been seen.
      rate = tf.maximum(tf.cast(b / (self.num_seen + b), tf.float32), 1.0 - self.decay)
    self.second_moment.assign_add(rate * (batch_moment - self.second_moment))
    self.num_seen.assign_add(b)

  def refresh(self) -> None:
    """Recomputes the cached precision (|D| C + ridge I)^-1 (one D x D Cholesky solve)."""
    d = self.feature_dim
    gram = self.dataset_size * self.second_moment + self.ridge * tf.eye(d)  # [D, D]
    chol = tf.linalg.cholesky(gram)
    self.precision.assign(tf.linalg.cholesky_solve(chol, tf.eye(d)))

  def inverse_count(self, phi: tf.Tensor) -> tf.Tensor:
    """n(s)^-1 ~ min(1, phi^T P phi) for phi [B, D] -> [B], no gradient."""
    phi = tf.stop_gradient(tf.cast(phi, tf.float32))                   # [B, D]
    quad = tf.reduce_sum(tf.matmul(phi, self.precision) * phi, axis=-1)  # [B, D] -> [B]
    return tf.stop_gradient(tf.minimum(tf.maximum(quad, 0.0), 1.0))


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
