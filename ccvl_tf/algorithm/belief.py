"""The belief b(h) over a quantized confidence grid (paper Sec. "Confidence-Adaptive Policies").

More in docs/agent.md "Module notes", `ccvl_tf/algorithm/belief.py`.
"""
from __future__ import annotations

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf


def delta_grid(num_grid_deltas: int) -> np.ndarray:
  """The quantized confidences: midpoints of `num_grid_deltas` equal bins of (0, 1), float32 [K].

  Example: delta_grid(4) = [0.125, 0.375, 0.625, 0.875]. Midpoints keep every delta strictly
  inside (0, 1), where log(1/delta) is finite and positive.
  """
  if int(num_grid_deltas) != num_grid_deltas or num_grid_deltas < 1:
    raise ValueError(f"num_grid_deltas must be an integer >= 1, got {num_grid_deltas!r}")
  k = int(num_grid_deltas)
  return ((np.arange(k, dtype=np.float64) + 0.5) / k).astype(np.float32)


def uniform_log_belief(num_grid_deltas: int) -> np.ndarray:
  """log b_0: the uniform prior over the K grid deltas, float32 [K] (each -log K)."""
  if int(num_grid_deltas) != num_grid_deltas or num_grid_deltas < 1:
    raise ValueError(f"num_grid_deltas must be an integer >= 1, got {num_grid_deltas!r}")
  return np.full([int(num_grid_deltas)], -np.log(num_grid_deltas), dtype=np.float32)


def informed_log_prior(mean_sq_errors, temperature: float, num_transitions: float = 1.0):
  """An initial log-belief log b_0 [K] from the data's Bellman errors instead of the uniform one.

  log b_0(delta) = -num_transitions * e(delta) / T, normalized (logsumexp 0), with e(delta) the
  mean squared Bellman error on the data (the errors that choose Fixed-CCVL's delta) and T the
  belief's temperature: the belief after `num_transitions` transitions whose errors are the
  data's mean ones (num_transitions = |D|: the surrogate likelihood of the whole data set).
  The argmax is Fixed-CCVL's delta whenever that is unique.

  Example: errors [1, 2], T = 2, one transition: log b_0 = [-0.5, -1] - logsumexp = [-0.474,
  -0.974].
  """
  e = np.asarray(mean_sq_errors, np.float64).reshape(-1)
  if e.size < 1 or not np.all(np.isfinite(e)) or np.any(e < 0):
    raise ValueError(f"mean_sq_errors must be finite and >= 0 for every grid delta, got {e!r}")
  if not (np.isfinite(temperature) and temperature > 0):
    raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
  if not (np.isfinite(num_transitions) and num_transitions > 0):
    raise ValueError(f"num_transitions must be a finite number > 0, got {num_transitions!r}")
  logits = -float(num_transitions) * e / float(temperature)  # [K]
  top = logits.max()
  return (logits - top - np.log(np.sum(np.exp(logits - top)))).astype(np.float32)


def bellman_sq_errors(q_sa, reward, discount, next_v):
  """Squared Bellman errors e(delta) of one transition for every grid delta.

  Args:
    q_sa: Q(s, a, delta) for the taken action, [..., K].
    reward: r, [...].
    discount: gamma * (1 - terminal), [...].
    next_v: max_a' Q(s', a', delta), [..., K].

  Returns:
    e(delta) = (Q(s,a,delta) - r - discount * max_a' Q(s',a',delta))^2, float32 [..., K].
  """
  q_sa = tf.convert_to_tensor(q_sa, tf.float32)
  next_v = tf.convert_to_tensor(next_v, tf.float32)
  reward = tf.convert_to_tensor(reward, tf.float32)[..., tf.newaxis]  # [..., 1]
  discount = tf.convert_to_tensor(discount, tf.float32)[..., tf.newaxis]  # [..., 1]
  return tf.square(q_sa - reward - discount * next_v)


def update_log_belief(log_belief, sq_errors, temperature):
  """One surrogate-likelihood step: log b(delta) <- log b(delta) - e(delta) / T, renormalized.

  Args:
    log_belief: current (normalized) log b, [..., K].
    sq_errors: e(delta) from `bellman_sq_errors`, [..., K].
    temperature: T > 0 (python float or scalar tensor).

  Returns:
    The new log-belief, normalized so that logsumexp over the grid axis is 0.
  """
  if isinstance(temperature, (int, float)) and not temperature > 0:
    raise ValueError(f"belief temperature must be > 0, got {temperature!r}")
  log_belief = tf.convert_to_tensor(log_belief, tf.float32)
  sq_errors = tf.convert_to_tensor(sq_errors, tf.float32)
  unnormalized = log_belief - sq_errors / tf.cast(temperature, tf.float32)
  return unnormalized - tf.reduce_logsumexp(unnormalized, axis=-1, keepdims=True)
