"""Upper bounds Q_u(s, a, delta): the loss pieces of the paper's Sec. "Learning Lower- and
Upper-Bounds" (Eq. upper update), for ccvl_tf/agents/ccvl_bounds_agent.py.

The lower bound's pieces (TD, the CQL gap, CCVL's L_j and the max over j) are in
ccvl_tf/algorithm/losses.py and ccvl_tf/algorithm/readings/, whose docstrings name the paper's
symbols; this module mirrors them for Q_u
(min over j, the bonus added, or a CQL-like term with the opposite preference). Shapes: B
batch, N deltas per transition, M pairs per delta, A actions. Pure functions, no state.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.algorithm.losses import gather_actions, td_loss, validate_alpha
from ccvl_tf.algorithm.readings import paper  # the lower bound's pieces Q_u reuses
from ccvl_tf.algorithm.readings.bound import confidence_weight

# ---- upper bounds Q_u(s, a, delta) (paper Sec. "Learning Lower- and Upper-Bounds") ----------
# Reading of Eq. (upper update) for the regularized (neural) form; see docs/online.md.
#  * Eq. (upper update) is Eq. (update) mirrored: max_{delta_1, delta_2} becomes
#    min_{delta_1, delta_2} and the anti-exploration bonus flips sign (an upper bound *adds*
#    the uncertainty). The regularized form of the lower bound, Eq. (cql update), penalizes
#    max_pi E_pi Q - E_D Q (+ entropy): CQL(H)'s logsumexp_a Q - Q(s, a_D) >= 0.
#  * Applying that same regularizer to Q' = -Q_u (the lower-bound machinery on the negated
#    values, which turns the inner max_pi into a min_pi) gives
#        Q_u(s, a_D, delta) - softmin_a Q_u(s, a, delta),   softmin = -logsumexp(-Q)   (>= 0),
#    i.e. -(min_pi [E_pi Q_u - H(pi)] - E_D Q_u): the CQL term with the opposite sign, with the
#    policy minimizing instead of maximizing. It pushes the *lowest* (OOD) actions UP and the
#    data action down, and is bounded below by 0, like CQL's. This is UPPER_REGULARIZERS[0],
#    the default.
#  * The literal opposite sign, -(logsumexp_a Q_u - Q_u(s, a_D)) ('neg_logsumexp'), pushes the
#    *largest* action up with a gradient that tends to 1 (softmax weight) as it grows: unbounded
#    below, the OOD Q-values diverge linearly (tests/test_bounds_agent.py shows it on a bandit).
#    Kept as an option for comparison only.
UPPER_REGULARIZERS = ("softmin", "neg_logsumexp")
PAIR_REDUCTIONS = ("min", "max")
# The objective of Q_u: 'bonus' (Eq. upper update as printed, the bonus *added*; the default,
# see ccvl_upper_bonus_loss) or 'regularized' (the CQL-like term of UPPER_REGULARIZERS above).
UPPER_OBJECTIVES = ("bonus", "regularized")


def upper_gap(q_values: tf.Tensor, actions: tf.Tensor, kind: str = "softmin"
              ) -> Tuple[tf.Tensor, tf.Tensor]:
  """The upper-bound regularizer R_u per state and delta, and Q_u(s, a_D).

  Args:
    q_values: Q_u(s, ., delta) [B, ..., A].
    actions: dataset actions a_D [B].
    kind: 'softmin': Q_u(s, a_D) - softmin_a Q_u(s, a) = Q_u(s, a_D) + logsumexp_a(-Q_u) >= 0;
      'neg_logsumexp': -(logsumexp_a Q_u(s, a) - Q_u(s, a_D)) <= 0 (literal sign flip).

  Returns:
    (R_u [B, ...], q_sa [B, ...]).
  """
  q_sa = gather_actions(q_values, actions)                       # [B, ...]
  if kind == "softmin":
    gap = q_sa + tf.reduce_logsumexp(-q_values, axis=-1)          # [B, ...], >= 0
  elif kind == "neg_logsumexp":
    gap = q_sa - tf.reduce_logsumexp(q_values, axis=-1)           # [B, ...], <= 0
  else:
    raise ValueError(f"upper regularizer must be one of {UPPER_REGULARIZERS}, got {kind!r}")
  return gap, q_sa


def min_over_pairs(pair_losses: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """min_j L_j over the M pairs: [B, N, M] -> ([B, N], argmin j [B, N] int32)."""
  return (tf.reduce_min(pair_losses, axis=-1),
          tf.argmin(pair_losses, axis=-1, output_type=tf.int32))


def ccvl_upper_loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor,
                    delta_1: tf.Tensor, inverse_count: tf.Tensor, alpha: float,
                    td_loss_type: str = "squared", huber_kappa: float = 1.0,
                    regularizer: str = "softmin", pair_reduction: str = "min"
                    ) -> Dict[str, tf.Tensor]:
  """The upper-bound objective, Eq. (upper update) in the regularized form (see above).

    L^u_j = alpha sqrt(log(1/delta_{j,1}) n(s)^-1) R_u(s, delta)
            + TD(Q_u(s,a_D,delta) - r - gamma (1-terminal) max_a' Qbar_u(s',a',delta_{j,2}))
    loss  = mean over B and N of min_j L^u_j   (pair_reduction='min': the min_{delta_1,
            delta_2} of Eq. upper update; 'max' mirrors the lower bound's max_j instead)

  Args:
    q_values: Q_u(s, ., delta) [B, N, A] (online upper network).
    actions: a_D [B] (indices).
    target: [B, N, M] TD targets from the upper target network at delta_{j,2}.
    delta_1: [B, N, M]; inverse_count: n(s)^-1 [B]; alpha >= 0.
    regularizer: one of UPPER_REGULARIZERS; pair_reduction: one of PAIR_REDUCTIONS.

  Returns:
    dict like readings/paper.py `loss` ('argmax_j' holds the selected j for either reduction).
  """
  validate_alpha(alpha)
  if pair_reduction not in PAIR_REDUCTIONS:
    raise ValueError(f"pair_reduction must be one of {PAIR_REDUCTIONS}, got {pair_reduction!r}")
  gap, q_sa = upper_gap(q_values, actions, regularizer)           # [B, N], [B, N]
  pair, reg, td = paper.pair_losses(q_sa, gap, target, delta_1, inverse_count, alpha,
                                    td_loss_type, huber_kappa)   # [B, N, M] each
  reduce = min_over_pairs if pair_reduction == "min" else paper.max_over_pairs
  sel, arg_j = reduce(pair)                                       # [B, N]
  return {"loss": tf.reduce_mean(sel), "pair_losses": pair, "max_losses": sel,
          "argmax_j": arg_j, "regularizer": reg, "td": td, "gap": gap, "q_sa": q_sa}


def ccvl_upper_bonus_loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor,
                          delta: tf.Tensor, inverse_count: tf.Tensor, alpha: float,
                          td_loss_type: str = "squared", huber_kappa: float = 1.0,
                          value_max: Optional[float] = None) -> Dict[str, tf.Tensor]:
  """Eq. (upper update) in its bonus form (the paper's own upper-bound update):

    Q_u(s, a_D, delta) <- min_{delta_1, delta_2 <= delta} B^ Q_u(s, a_D, delta_2)
                          + alpha sqrt(log(1/delta_1) n(s)^-1)
    loss = mean_{B,N} TD(Q_u(s,a_D,delta) - y),   y = min(min_j y_j + w(delta), value_max)

  The min over delta_1 <= delta of the bonus is at delta_1 = delta (sqrt(log(1/delta_1)) falls
  as delta_1 grows); the min over delta_2 is taken over the candidate targets y_j (pair 0 at
  delta_2 = delta: readings.options.bootstrap_at_delta). The bonus is *added* (an upper bound
  adds the uncertainty; the printed equation's sign inside the square is the same typo as the
  lower bound's, see ccvl_tf/tabular/learners.py). No regularizer: nothing pushes actions the
  data never takes (the regularized forms' fixed point sends them to +inf, docs/online.md).
  `value_max`: a known upper limit of every return (e.g. r_max / (1 - gamma)); min(Q_u, V_max)
  is still an upper bound of Q*, and the cap keeps the optimistic max backup bounded.

  Args:
    q_values: Q_u(s, ., delta) [B, N, A].
    actions: a_D [B].
    target: candidate targets y_j = r + gamma (1 - terminal) max_a' Qbar_u(s', a', delta_{j,2})
      [B, N, M] (no gradient).
    delta: [B, N]; inverse_count: n(s)^-1 [B]; alpha >= 0.
    value_max: None or the cap of y.

  Returns:
    dict like readings/bound.py `loss`: 'loss'; 'target' y [B, N]; 'argmax_j' (the argmin j) [B, N];
    'regularizer' (0), 'td', 'gap' (Q_u(s, a_D) - softmin_a Q_u(s, a), reported only), 'q_sa',
    'weight' [B, N].
  """
  validate_alpha(alpha)
  gap, q_sa = upper_gap(q_values, actions, "softmin")            # [B, N], [B, N]
  weight = confidence_weight(delta, inverse_count, alpha)        # [B, N]
  y = tf.reduce_min(target, axis=-1) + weight                    # [B, N, M] -> [B, N]
  if value_max is not None:
    y = tf.minimum(y, float(value_max))
  y = tf.stop_gradient(y)
  td = td_loss(q_sa - y, td_loss_type, huber_kappa)              # [B, N]
  return {"loss": tf.reduce_mean(td), "target": y,
          "argmax_j": tf.argmin(target, axis=-1, output_type=tf.int32),
          "regularizer": tf.zeros_like(td), "td": td, "gap": gap, "q_sa": q_sa,
          "weight": weight}
