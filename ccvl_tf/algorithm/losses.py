"""Pure loss pieces: confidences, TD targets and losses, the CQL gap, DR3, and the baselines'
losses (CQL, REM, BC). CCVL's update is built from them in ccvl_tf/algorithm/readings/ (paper.py:
Eq. cql update as Algorithm 1 writes it).

More in docs/agent.md "Module notes", `ccvl_tf/algorithm/losses.py`.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

TD_LOSS_TYPES = ("squared", "huber")
# Sampled confidences are kept in [_EPS, 1 - _EPS] so log(1/delta_1) stays finite.
_EPS = 1e-6


def validate_delta(delta, name: str = "delta") -> np.ndarray:
  """Checks that every value of `delta` is strictly inside (0, 1); returns it as float32.

  Raises:
    ValueError naming the first offending value.
  """
  arr = np.asarray(delta, dtype=np.float64)
  bad = ~((arr > 0.0) & (arr < 1.0))  # also catches NaN
  if np.any(bad):
    raise ValueError(f"{name} must be in the open interval (0, 1), got {arr[bad].flat[0]!r}"
                     + (f" (in {arr.tolist()!r})" if arr.size > 1 else ""))
  return arr.astype(np.float32)


def validate_num_samples(num_deltas: int, num_pairs: int) -> None:
  """N (deltas per transition) and M (pairs per delta) must be integers >= 1."""
  for name, value in (("N (num_deltas)", num_deltas), ("M (num_pairs)", num_pairs)):
    if isinstance(value, bool) or int(value) != value or value < 1:
      raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def validate_alpha(alpha: float) -> None:
  """alpha, the regularizer weight, must be a finite number >= 0."""
  if not np.isfinite(alpha) or alpha < 0:
    raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")


def sample_confidences(batch_size, num_deltas: int, num_pairs: int,
                       seed: Optional[tf.Tensor] = None, fixed_delta: Optional[float] = None
                       ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Samples delta ~ U(0,1) [B, N] and delta_{j,1}, delta_{j,2} ~ U(0, delta) [B, N, M].

  Args:
    batch_size: B (Python int or scalar tensor).
    num_deltas: N.
    num_pairs: M.
    seed: optional stateless seed, int32 [2]; None uses the global generator.
    fixed_delta: None (delta ~ U(0, 1)), or every delta set to this value in (0, 1) (the
      pairs still ~ U(0, delta); the same random stream is drawn).

  Returns:
    (delta [B, N], delta_1 [B, N, M], delta_2 [B, N, M]), all in [1e-6, 1 - 1e-6].
  """
  validate_num_samples(num_deltas, num_pairs)
  shape_d = tf.stack([batch_size, num_deltas])                 # [2]: (B, N)
  shape_p = tf.stack([batch_size, num_deltas, 2 * num_pairs])  # [3]: (B, N, 2M)
  if seed is None:
    u = tf.random.uniform(shape_d)
    v = tf.random.uniform(shape_p)
  else:
    seeds = tf.random.experimental.stateless_split(seed, 2)
    u = tf.random.stateless_uniform(shape_d, seed=seeds[0])
    v = tf.random.stateless_uniform(shape_p, seed=seeds[1])
  delta = _EPS + (1.0 - 2.0 * _EPS) * u                  # [B, N] in (0, 1)
  if fixed_delta is not None:
    delta = tf.fill(tf.shape(delta), tf.constant(float(validate_delta(fixed_delta)), tf.float32))
  # U(0, delta): [B, N, 1] * [B, N, 2M] -> [B, N, 2M], floored at _EPS.
  pairs = tf.maximum(delta[:, :, None] * v, _EPS)
  delta_1, delta_2 = tf.split(pairs, 2, axis=-1)          # two [B, N, M]
  return delta, delta_1, delta_2


def td_targets(reward: tf.Tensor, terminal: tf.Tensor, gamma: float,
               next_q: tf.Tensor) -> tf.Tensor:
  """Bellman targets r + gamma (1 - terminal) max_a' Q(s', a', delta_2).

  Args:
    reward: r [B].
    terminal: 1.0 at a true episode end, [B].
    gamma: discount.
    next_q: target-network Q(s', ., delta_2) [B, K, A] for K confidences delta_2.

  Returns:
    [B, K], with no gradient (the target is a constant of the update).
  """
  next_v = tf.reduce_max(next_q, axis=-1)                          # [B, K, A] -> [B, K]
  discount = gamma * (1.0 - tf.cast(terminal, tf.float32))        # [B]
  target = tf.cast(reward, tf.float32)[:, None] + discount[:, None] * next_v  # [B, K]
  return tf.stop_gradient(target)


def td_loss(td_error: tf.Tensor, loss_type: str = "squared", huber_kappa: float = 1.0
            ) -> tf.Tensor:
  """Elementwise TD loss: x^2 / 2 ('squared', the paper) or Huber_kappa(x) ('huber').

  Huber_kappa(x) = x^2 / 2 if |x| <= kappa else kappa (|x| - kappa / 2), equal to x^2/2 near 0.
  """
  if loss_type == "squared":
    return 0.5 * tf.square(td_error)
  if loss_type == "huber":
    abs_x = tf.abs(td_error)
    quad = tf.minimum(abs_x, huber_kappa)
    return 0.5 * tf.square(quad) + huber_kappa * (abs_x - quad)
  raise ValueError(f"td loss type must be one of {TD_LOSS_TYPES}, got {loss_type!r}")


def gather_actions(q_values: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
  """Q(s, a_D): q_values [B, ..., A] indexed by actions [B] -> [B, ...]."""
  one_hot = tf.one_hot(tf.cast(actions, tf.int32), tf.shape(q_values)[-1],
                       dtype=q_values.dtype)                     # [B, A]
  rank = len(q_values.shape)
  # [B, A] -> [B, 1, ..., 1, A] to broadcast over the middle (e.g. N) axes.
  one_hot = tf.reshape(one_hot, tf.concat(
      [tf.shape(one_hot)[:1], tf.ones([rank - 2], tf.int32), tf.shape(one_hot)[1:]], 0))
  return tf.reduce_sum(q_values * one_hot, axis=-1)            # [B, ...]


# The gap of Eq. (cql update)'s regularizer, max_pi E_pi Q + R(pi) - Q(s, a_D): 'logsumexp' with
# R(pi) the entropy (CQL(H)), 'max' with R = 0 (max_a Q). docs/agent.md "The confidence family".
GAPS = ("logsumexp", "max")


def validate_gap(gap: str) -> None:
  if gap not in GAPS:
    raise ValueError(f"gap must be one of {', '.join(GAPS)}, got {gap!r}")


def cql_gap(q_values: tf.Tensor, actions: tf.Tensor, gap: str = "logsumexp"
            ) -> Tuple[tf.Tensor, tf.Tensor]:
  """The regularizer's gap and Q(s, a_D): logsumexp_a Q(s, a) - Q(s, a_D) (CQL(H), the
  default) or max_a Q(s, a) - Q(s, a_D) (gap='max'); both >= 0.

  Args:
    q_values: Q(s, ., delta) [B, ..., A] (e.g. [B, N, A], or [B, A] for plain CQL).
    actions: dataset actions a_D, [B].
    gap: one of GAPS.

  Returns:
    (gap [B, ...], q_sa [B, ...]).
  """
  validate_gap(gap)
  q_sa = gather_actions(q_values, actions)                       # [B, ...]
  if gap == "max":
    return tf.reduce_max(q_values, axis=-1) - q_sa, q_sa         # [B, ...]
  return tf.reduce_logsumexp(q_values, axis=-1) - q_sa, q_sa     # [B, ...]


# How delta_1 enters the weight: log(1/delta_1) (Eq. cql update) or 1 (a constant in delta).
DELTA_WEIGHTS = ("sqrt_log", "constant")


def log_inverse_delta(delta: tf.Tensor, delta_weight: str = "sqrt_log") -> tf.Tensor:
  """log(1/delta) ('sqrt_log', the paper's) or 1 ('constant': the weight without delta),
  elementwise, same shape as `delta`."""
  if delta_weight not in DELTA_WEIGHTS:
    raise ValueError(f"delta_weight must be one of {', '.join(DELTA_WEIGHTS)}, got "
                     f"{delta_weight!r}")
  if delta_weight == "constant":
    return tf.ones_like(delta)
  return -tf.math.log(delta)


def dr3_penalty(phi: tf.Tensor, next_phi: tf.Tensor) -> tf.Tensor:
  """DR3 (Kumar et al. 2022) implicit-regularizer term mean_i |phi(s_i) . phi(s'_i)|.

  Multiply by the DR3 coefficient c and add to the loss. Both phi(s) and phi(s') come from the
  online network with gradients (as in DR3).

  Args:
    phi: phi(s) [B, D].
    next_phi: phi(s') [B, D].

  Returns:
    scalar.
  """
  return tf.reduce_mean(tf.abs(tf.reduce_sum(phi * next_phi, axis=-1)))  # [B, D] -> [B] -> ()


# ---- baselines: CQL, REM; shapes B batch, H heads, A actions ------------------------
def cql_loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor, alpha: float,
             td_loss_type: str = "huber", huber_kappa: float = 1.0) -> Dict[str, tf.Tensor]:
  """Discrete CQL(H) (Kumar et al. 2020, Eq. 4; the DR3 setup's CQL, without the DR3 term):

    loss = mean_B [ TD(Q(s, a_D) - y) + alpha * (logsumexp_a Q(s, a) - Q(s, a_D)) ]

  Args:
    q_values: online Q(s, .) [B, A].
    actions: a_D [B].
    target: y = r + gamma (1 - terminal) max_a' Q_target(s', a') [B] (td_targets(...)[:, 0]).
    alpha: CQL weight (>= 0).
    td_loss_type, huber_kappa: as td_loss (Huber in Dopamine / DR3).

  Returns:
    dict: 'loss' scalar; 'td', 'gap', 'q_sa' [B].
  """
  validate_alpha(alpha)
  gap, q_sa = cql_gap(q_values, actions)                        # [B], [B]
  td = td_loss(q_sa - tf.stop_gradient(target), td_loss_type, huber_kappa)  # [B]
  return {"loss": tf.reduce_mean(td + alpha * gap), "td": td, "gap": gap, "q_sa": q_sa}


def rem_weights(num_heads: int, seed: Optional[tf.Tensor] = None) -> tf.Tensor:
  """REM's random convex combination (Agarwal et al. 2020): alpha_k = u_k / sum_j u_j, u ~ U(0,1).

  As batch_rl's `random_stochastic_matrix(num_heads, num_cols=1)`: one draw per train step,
  shared by every transition of the batch. Returns [H] float32, nonnegative, summing to 1.
  `seed`: optional stateless seed int [2] (None: the global generator).
  """
  if isinstance(num_heads, bool) or int(num_heads) != num_heads or num_heads < 1:
    raise ValueError(f"num_heads must be an integer >= 1, got {num_heads!r}")
  shape = [int(num_heads)]
  u = (tf.random.uniform(shape) if seed is None
       else tf.random.stateless_uniform(shape, seed=seed))      # [H]
  return u / tf.reduce_sum(u)                                      # L1-normalized, [H]


def convex_combination(q_heads: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
  """sum_k alpha_k Q_k(s, .): q_heads [B, H, A], weights [H] (or [B, H]) -> [B, A]."""
  weights = tf.cast(weights, q_heads.dtype)
  if len(weights.shape) == 1:
    weights = weights[None]                                        # [H] -> [1, H]
  return tf.einsum("bha,bh->ba", q_heads,
                   tf.broadcast_to(weights, tf.shape(q_heads)[:2]))  # [B, A]


# ---- behaviour cloning: the anchor every offline table reports ---------------------
def bc_loss(logits: tf.Tensor, actions: tf.Tensor, logit_penalty: float = 0.0
            ) -> Dict[str, tf.Tensor]:
  """Discrete behaviour cloning: cross-entropy of pi(a | s) = softmax(logits) on the data's
  actions, plus `logit_penalty` * mean_{B, A} logits^2 (d3rlpy's DiscreteBC `beta`, which keeps
  the logits from growing without bound on a deterministic data action).

    loss = mean_B [ logsumexp_a l(s, a) - l(s, a_D) ] + beta * mean_{B, A} l(s, a)^2

  The first term is `cql_gap` of the logits: CQL's regularizer alone is behaviour cloning.

  Args:
    logits: l(s, .) [B, A].
    actions: a_D [B] (indices 0..A-1).
    logit_penalty: beta >= 0.

  Returns:
    dict: 'loss' scalar; 'cross_entropy' [B]; 'logit_l2' scalar; 'accuracy' scalar (share of
    the batch where argmax_a l(s, a) = a_D).
  """
  if not (np.isfinite(logit_penalty) and logit_penalty >= 0):
    raise ValueError(f"logit_penalty must be a finite number >= 0, got {logit_penalty!r}")
  ce, _ = cql_gap(logits, actions)                                 # [B]
  l2 = tf.reduce_mean(tf.square(logits))                           # [B, A] -> ()
  hit = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32),
                 tf.cast(actions, tf.int32))                       # [B]
  return {"loss": tf.reduce_mean(ce) + logit_penalty * l2, "cross_entropy": ce,
          "logit_l2": l2, "accuracy": tf.reduce_mean(tf.cast(hit, tf.float32))}
