# Over ~500 lines on purpose: every exact learner here iterates the same empirical model to its
# fixed point (_iterate, _regularized_fixed_point, the exact arg-mins), and the family
# statistics read the Q(s, a, delta) arrays those learners return.
"""Exact tabular offline learners on the empirical MDP of a dataset.

More in docs/library.md "Module notes", `ccvl_tf/tabular/learners.py`.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ccvl_tf.algorithm.constants import BONUS_COUNTS, SUPPORT_MARGIN  # shared with the network
from ccvl_tf.tabular.dataset import Transitions

NEG_INF = -np.inf


class EmpiricalModel(NamedTuple):
  """Counts and the empirical MDP of a dataset.

  n_sa [S, A], n_s [S], r_hat [S, A] (mean reward), p_cont [S, A, S'] (mean of
  (1 - terminal) * 1[s' = .]; a row sums to 1 - the empirical termination probability).
  """
  n_sa: np.ndarray
  n_s: np.ndarray
  r_hat: np.ndarray
  p_cont: np.ndarray

  @property
  def seen_sa(self) -> np.ndarray:
    return self.n_sa > 0

  @property
  def seen_s(self) -> np.ndarray:
    return self.n_s > 0

  def backup(self, v: np.ndarray, gamma: float) -> np.ndarray:
    """B^ applied to state values v [..., S] -> [..., S, A] (0 where (s, a) is unseen)."""
    s, a = self.r_hat.shape
    # [..., S'] @ [S', S*A] -> [..., S*A] -> [..., S, A]  (a BLAS matmul, not an einsum)
    flat = np.matmul(v, self.p_cont.reshape(s * a, s).T)
    return self.r_hat + gamma * flat.reshape(v.shape[:-1] + (s, a))


def counts(data: Transitions, num_states: int, num_actions: int) -> tuple:
  """Exact visitation counts (n(s, a) [S, A], n(s) [S]) of a dataset."""
  n_sa = np.zeros((num_states, num_actions), np.int64)
  np.add.at(n_sa, (np.asarray(data.state), np.asarray(data.action)), 1)
  return n_sa, n_sa.sum(axis=1)


def empirical_model(data: Transitions, num_states: int, num_actions: int) -> EmpiricalModel:
  """The empirical MDP of `data` (a single dataset, arrays [N])."""
  if np.ndim(data.state) != 1:
    raise ValueError(f"expected one dataset with arrays [N], got shape {np.shape(data.state)}")
  s, a = np.asarray(data.state), np.asarray(data.action)
  for name, x, hi in (("state", s, num_states), ("action", a, num_actions),
                      ("next_state", np.asarray(data.next_state), num_states)):
    if x.size and (x.min() < 0 or x.max() >= hi):
      raise ValueError(f"dataset {name} values must be in [0, {hi}), got [{x.min()}, {x.max()}]")
  n_sa, n_s = counts(data, num_states, num_actions)
  denom = np.maximum(n_sa, 1).astype(np.float64)
  r_sum = np.zeros((num_states, num_actions))
  np.add.at(r_sum, (s, a), np.asarray(data.reward, np.float64))
  p_cont = np.zeros((num_states, num_actions, num_states))
  np.add.at(p_cont, (s, a, np.asarray(data.next_state)), 1.0 - np.asarray(data.terminal, np.float64))
  return EmpiricalModel(n_sa, n_s, r_sum / denom, p_cont / denom[..., None])


def _check_alpha(alpha):
  if not np.all(np.asarray(alpha) >= 0) or not np.all(np.isfinite(alpha)):
    raise ValueError(f"alpha must be >= 0 and finite, got {alpha!r}")


def check_deltas(deltas) -> np.ndarray:
  deltas = np.asarray(deltas, np.float64)
  if deltas.ndim != 1 or deltas.size < 1:
    raise ValueError(f"deltas must be a non-empty 1-D grid, got shape {deltas.shape}")
  if not np.all((deltas > 0) & (deltas < 1)):
    raise ValueError(f"every delta must be in (0, 1), got {deltas.tolist()}")
  if np.any(np.diff(deltas) <= 0):
    raise ValueError(f"the delta grid must be strictly increasing, got {deltas.tolist()}")
  return deltas


def _iterate(step, q0, tol, max_iters, name):
  q = q0
  for _ in range(max_iters):
    q_new = step(q)
    finite = np.isfinite(q_new)
    if np.array_equal(finite, np.isfinite(q)) and np.max(
        np.abs(np.where(finite, q_new - np.where(finite, q, 0), 0)), initial=0) < tol:
      return q_new
    q = q_new
  raise RuntimeError(f"{name} did not converge to {tol} in {max_iters} iterations")


def _state_values(q):
  """max_a Q(s, a) over [..., S, A] (-inf only if every action is -inf)."""
  return q.max(axis=-1)


# ----------------------------------------------------------------------------------------------
# Bonus updates: Eq. (anti_exploration) and Eq. (update)
# ----------------------------------------------------------------------------------------------
def anti_exploration_q(model: EmpiricalModel, gamma: float, alpha: float,
                       tol: float = 1e-8, max_iters: int = 10_000) -> np.ndarray:
  """Q-learning with anti-exploration bonuses, Eq. (anti_exploration):
  Q^{k+1}(s, a) = B^ Q^k(s, a) - alpha * sqrt(1 / (n(s, a) ^ 1)). Returns Q [S, A]."""
  _check_alpha(alpha)
  bonus = alpha * np.sqrt(1.0 / np.maximum(model.n_sa, 1))
  step = lambda q: model.backup(_state_values(q), gamma) - bonus
  return _iterate(step, np.zeros(model.n_sa.shape), tol, max_iters, "anti-exploration")


def _bonus_counts(model: EmpiricalModel, counts) -> np.ndarray:
  """n ^ 1 of the bonus, [S, A]: n(s, a) by default, or `counts` broadcast to [S, A] (e.g.
  n(s)[:, None], the state count the neural agents use)."""
  n = model.n_sa if counts is None else np.broadcast_to(np.asarray(counts, np.float64),
                                                        model.n_sa.shape)
  return np.maximum(n, 1)


def ccvl_bonus_q(model: EmpiricalModel, gamma: float, alpha, deltas,
                 tol: float = 1e-8, max_iters: int = 10_000, counts=None) -> np.ndarray:
  """CCVL with explicit bonuses, Eq. (update), on a sorted delta grid:

    Q^{k+1}(s, a, delta) = max_{delta2 <= delta} B^ Q^k(s, a, delta2)
                           - alpha * sqrt(log(1 / delta1*) / (n(s, a) ^ 1)),

  where the max over delta1 <= delta of -alpha*sqrt(log(1/delta1)/n) is attained at delta1 = delta
  (the bonus shrinks as delta1 grows), and the max over delta2 is taken over the grid points
  <= delta (a running max along the grid), which makes Q nondecreasing in delta (Lemma 1).

  Args:
    alpha: a scalar, or an array [C] of alphas solved together (returns [C, K, S, A]).
    deltas: the sorted grid [K].
    counts: None (n(s, a), Theorem 1) or counts broadcast to [S, A] for the bonus, e.g.
      model.n_s[:, None] (the state visitation n(s) of the neural agents).
  Returns:
    Q [K, S, A] (or [C, K, S, A] for an array alpha).
  """
  _check_alpha(alpha)
  deltas = check_deltas(deltas)
  alpha_arr = np.atleast_1d(np.asarray(alpha, np.float64))
  # bonus [C, K, S, A] = alpha * sqrt(log(1/delta) / (n ^ 1))
  bonus = (alpha_arr[:, None, None, None]
           * np.sqrt(np.log(1.0 / deltas)[None, :, None, None]
                     / _bonus_counts(model, counts)[None, None]))

  def step(q):  # q [C, K, S, A]
    b = model.backup(_state_values(q), gamma)  # [C, K, S, A]: B^ Q(., ., delta2) for every delta2
    return np.maximum.accumulate(b, axis=1) - bonus  # max over delta2 <= delta, minus the bonus

  q = _iterate(step, np.zeros(bonus.shape), tol, max_iters, "CCVL (bonus)")
  return q if np.ndim(alpha) else q[0]


def ccvl_upper_bonus_q(model: EmpiricalModel, gamma: float, alpha: float, deltas,
                       value_max: float, tol: float = 1e-8, max_iters: int = 10_000,
                       counts=None) -> np.ndarray:
  """The upper bound of Eq. (upper update) with explicit bonuses, on a sorted delta grid:

    Q_u^{k+1}(s, a, delta) = min( min_{delta2 <= delta} B^ Q_u^k(s, a, delta2)
                                  + alpha * sqrt(log(1 / delta) / (n ^ 1)),  value_max )

  Eq. (update) mirrored: the bonus is added, the max over delta_1, delta_2 becomes a min (the
  bonus is smallest at delta_1 = delta; the min over delta2 is a running min along the grid,
  which makes Q_u nonincreasing in delta). Pairs never seen in the data get the optimistic
  prior `value_max` (the largest possible return, which bounds Q* there), and every value is
  capped at it (min(Q_u, V_max) still bounds Q* from above).

  Args:
    deltas: the sorted grid [K]; value_max: the largest possible return;
    counts: as ccvl_bonus_q (None: n(s, a)).
  Returns:
    Q_u [K, S, A].
  """
  _check_alpha(alpha)
  deltas = check_deltas(deltas)
  if not np.isfinite(value_max):
    raise ValueError(f"value_max must be finite, got {value_max!r}")
  # bonus [K, S, A] = alpha * sqrt(log(1/delta) / (n ^ 1))
  bonus = float(alpha) * np.sqrt(np.log(1.0 / deltas)[:, None, None]
                                 / _bonus_counts(model, counts)[None])
  unseen = ~model.seen_sa  # [S, A]

  def step(q):  # q [K, S, A]
    b = model.backup(_state_values(q), gamma)  # [K, S, A]: B^ Q_u(., ., delta2) per delta2
    q_new = np.minimum(np.minimum.accumulate(b, axis=0) + bonus, value_max)
    return np.where(unseen, value_max, q_new)

  return _iterate(step, np.full(bonus.shape, float(value_max)), tol, max_iters,
                  "CCVL upper (bonus)")


# ----------------------------------------------------------------------------------------------
# Regularized updates: Eq. (cql) and Eq. (cql update)
# ----------------------------------------------------------------------------------------------
def _regularized_argmin(weight, beta, seen, target, q0, newton_steps):
  """Per state, the exact minimizer over q in R^A of

      weight * (logsumexp_a q_a - sum_a beta_a q_a) + 1/2 sum_a beta_a (q_a - target_a)^2

  (the CQL(H) objective of one state divided by n(s): beta = n(s, a) / n(s), the max over pi
  with entropy regularizer R(pi) = H(pi) gives the logsumexp). Actions with beta_a = 0 are
  pushed to -inf when weight > 0 and keep q0 when weight = 0. Strictly convex in the seen
  actions, so Newton's method converges; at the optimum
      q_a = target_a - weight * (softmax(q)_a / beta_a - 1)      (Kumar et al. 2020, Thm 3.2).

  Shapes: weight [..., S], beta/seen [S, A], target/q0 [..., S, A].
  """
  w = weight[..., None]  # [..., S, 1]
  pos = w > 0
  unseen = ~seen
  eye = np.eye(beta.shape[-1])
  blocked = unseen[..., :, None] | unseen[..., None, :]  # [S, A, A]: rows/cols of unseen actions

  def objective(q):
    z = np.where(seen, q, NEG_INF)
    m = z.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    lse = m[..., 0] + np.log(np.maximum(np.exp(z - m).sum(-1), 1e-300))
    quad = 0.5 * (beta * np.where(seen, q - target, 0.0) ** 2).sum(-1)
    return weight * (lse - (beta * np.where(seen, q, 0.0)).sum(-1)) + quad

  q = np.where(seen & np.isfinite(q0), q0, target)
  for _ in range(newton_steps):
    z = np.where(seen, q, NEG_INF)
    z = z - np.where(seen.any(-1, keepdims=True), z.max(axis=-1, keepdims=True), 0.0)
    p = np.where(seen, np.exp(z), 0.0)
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    grad = np.where(seen, w * (p - beta) + beta * (q - target), 0.0)
    hess = (w[..., None] * (p[..., :, None] * eye - p[..., :, None] * p[..., None, :])
            + beta[..., :, None] * eye)
    hess = np.where(blocked, eye, hess)  # unseen actions: identity rows/cols, zero gradient
    step = np.linalg.solve(hess, grad[..., None])[..., 0]
    # Damped Newton: halve the step where the objective would increase.
    f0, t = objective(q), np.ones(weight.shape)
    for _ in range(20):
      worse = objective(q - t[..., None] * step) > f0 + 1e-15
      if not worse.any():
        break
      t = np.where(worse, 0.5 * t, t)
    q = q - t[..., None] * step
  q = np.where(seen, q, np.where(pos, NEG_INF, q0))
  return q


def _max_gap_argmin(weight, beta, seen, target, q0):
  """Per state, the exact minimizer over q in R^A of

      weight * (max_a q_a - sum_a beta_a q_a) + 1/2 sum_a beta_a (q_a - target_a)^2

  (the hard-max gap: Eq. cql update with R(pi) = 0, where max_pi E_pi Q is max_a Q). For a
  fixed v = max_a q_a each seen action solves its own quadratic under q_a <= v, so
  q_a = min(target_a + w, v); v is the root of the nondecreasing piecewise-linear

      g(v) = w + sum_a beta_a min(v - target_a - w, 0),

  found exactly: with c = target + w sorted in decreasing order, g(c_(1)) = w >= 0 and the
  root lies on the piece where the top k actions are capped, v = (sum_k beta T - w (1 - B_k)) /
  B_k, B_k the top k's data share. v falls from max_a T (w = 0) to E_beta T (large w), so V is
  nonincreasing in w. Unseen actions (beta = 0) only enter the max: -inf when weight > 0, q0
  when weight = 0 (as `_regularized_argmin`).

  Shapes: weight [..., S], beta/seen [S, A], target/q0 [..., S, A].
  """
  w = weight[..., None]                                           # [..., S, 1]
  c = np.where(seen, target + w, NEG_INF)                         # [..., S, A]
  order = np.argsort(-c, axis=-1)                                 # decreasing c
  c_sorted = np.take_along_axis(c, order, -1)
  beta_b = np.broadcast_to(beta, c.shape)
  b_sorted = np.take_along_axis(beta_b, order, -1)
  t_sorted = np.take_along_axis(np.where(seen, target, 0.0), order, -1)
  cum_b = np.cumsum(b_sorted, -1)                                 # B_k [..., S, A]
  cum_bc = np.cumsum(b_sorted * np.where(np.isfinite(c_sorted), c_sorted, 0.0), -1)
  # g at each breakpoint c_(k): w - sum_{j < k} beta_(j) (c_(j) - c_(k)), nonincreasing in k.
  prev_b = cum_b - b_sorted
  prev_bc = cum_bc - b_sorted * np.where(np.isfinite(c_sorted), c_sorted, 0.0)
  g = w - (prev_bc - prev_b * np.where(np.isfinite(c_sorted), c_sorted, 0.0))
  valid = np.isfinite(c_sorted) & (g >= 0)
  k = np.maximum(valid.sum(-1, keepdims=True) - 1, 0)             # index of the last g >= 0
  b_k = np.take_along_axis(cum_b, k, -1)                          # [..., S, 1]
  bt_k = np.take_along_axis(np.cumsum(b_sorted * t_sorted, -1), k, -1)
  with np.errstate(invalid="ignore", divide="ignore"):
    v = (bt_k - w * (1.0 - b_k)) / b_k                            # [..., S, 1]
  q = np.minimum(target + w, v)
  pos = w > 0
  return np.where(seen, q, np.where(pos, NEG_INF, q0))


GAPS = ("logsumexp", "max")


def _regularized_fixed_point(model, gamma, weight, deltas_axis, tol, max_iters, newton_steps,
                             name, gap="logsumexp", outer_max=False):
  seen_sa = model.seen_sa
  beta = model.n_sa / np.maximum(model.n_s, 1)[:, None]  # pi_beta^(a|s), [S, A]
  seen_s = model.seen_s

  def step(q):
    v = _state_values(np.where(seen_s[:, None], q, 0.0))  # unvisited states keep value 0
    target = model.backup(v, gamma)  # [..., S, A]
    if deltas_axis is not None:  # max over delta2 <= delta along the grid
      target = np.maximum.accumulate(target, axis=deltas_axis)
    if gap == "max":
      q_new = _max_gap_argmin(weight, beta, seen_sa, target, q)
    else:
      q_new = _regularized_argmin(weight, beta, seen_sa, target, q, newton_steps)
    if outer_max:  # Q(s, a, delta) = max_{delta' <= delta} of the per-delta solutions
      q_new = np.maximum.accumulate(q_new, axis=deltas_axis)
    return np.where(seen_s[:, None], q_new, 0.0)

  q0 = np.zeros(weight.shape + (model.n_sa.shape[1],))
  return _iterate(step, q0, tol, max_iters, name)


def cql_q(model: EmpiricalModel, gamma: float, alpha: float, tol: float = 1e-8,
          max_iters: int = 10_000, newton_steps: int = 3) -> np.ndarray:
  """Tabular CQL(H), Eq. (cql): each iterate exactly minimizes
  alpha (E_{s~D} logsumexp_a Q(s, a) - E_{s,a~D} Q(s, a)) + 1/2 E_D (Q - B^ Q^k)^2. Q [S, A]."""
  _check_alpha(alpha)
  weight = np.full(model.n_s.shape, float(alpha))
  return _regularized_fixed_point(model, gamma, weight, None, tol, max_iters, newton_steps, "CQL")


# The readings of the confidence family (docs/agent.md "The confidence family"). Regularized,
# Eq. (cql update): the gap of the regularizer and whether the outer max over delta_1, delta_2 <=
# delta is taken over the per-delta *solutions* ('+monotone': a running max along the grid,
# Lemma 1 by construction). Bonus, Eq. (update) with the state count n(s): 'bonus' alone, or
# with a gap whose weight w0 does not depend on delta ('bonus+logsumexp', 'bonus+max'), which
# pushes the actions the data never takes down without undoing the order the bonus gives;
# 'bonus-sa': the bonus with Eq. (update)'s own count n(s, a) (the network: n(s) pi_beta(a|s)).
# The bonus's counts (BONUS_COUNTS) and SUPPORT_MARGIN: ccvl_tf/algorithm/constants.py, shared
# with the network.
READINGS = ("logsumexp", "max", "logsumexp+monotone", "max+monotone", "bonus",
            "bonus+logsumexp", "bonus+max", "bonus-sa")
# w0 of the gapped bonus readings when none is given: the most favourable of {0.1, 0.3, 1} on
# the exact gridworld (docs/family_choice.md; larger w0 ties or inflates more).
DEFAULT_GAP_WEIGHT = 0.1


class Reading(NamedTuple):
  """A parsed reading: form 'regularized' (Eq. cql update) or 'bonus' (Eq. update); gap
  'logsumexp', 'max' or None (the bonus alone); monotone: the outer max over the per-delta
  solutions (regularized readings only); counts: the bonus's count, 'state' (n(s)) or
  'state_action' (n(s, a))."""
  form: str
  gap: Optional[str]
  monotone: bool
  counts: str = "state"


def parse_reading(reading: str) -> Reading:
  """'max+monotone' -> Reading('regularized', 'max', True); 'bonus+max' -> Reading('bonus',
  'max', False); ValueError naming the reading otherwise."""
  if reading not in READINGS:
    raise ValueError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
  if reading == "bonus-sa":
    return Reading("bonus", None, False, "state_action")
  head, _, tail = reading.partition("+")
  if head == "bonus":
    return Reading("bonus", tail or None, False)
  return Reading("regularized", head, bool(tail))


def ccvl_regularized_q(model: EmpiricalModel, gamma: float, alpha, deltas,
                       tol: float = 1e-8, max_iters: int = 10_000,
                       newton_steps: int = 3, reading: str = "logsumexp") -> np.ndarray:
  """CCVL with the regularizer, Eq. (cql update), on a sorted delta grid. Q [K, S, A].

  Each iterate exactly minimizes, per delta,
    alpha * sqrt(log(1/delta1) / (n(s) ^ 1)) * (E_{s~D} gap(Q) - E_{s,a~D} Q)
    + 1/2 E_D (Q(s, a, delta) - max_{delta2 <= delta} B^ Q^k(s, a, delta2))^2,
  with gap = logsumexp_a Q (R(pi) the entropy: CQL(H)) or max_a Q (R = 0), by `reading`.

  The max over delta1 <= delta: read literally as a max of the *loss*, it is unbounded (the
  gap term is >= 0, so the loss grows without bound as delta1 -> 0). We read it as the paper's
  proof of Lemma 1 does, as a max over the resulting bounds: delta1 = delta (the smallest
  penalty the confidence delta allows) and, with '+monotone', the iterate at delta is the
  running max of the per-delta solutions over the grid points delta' <= delta. The max over
  delta2 is the running max of the backed-up targets along the grid, as in `ccvl_bonus_q`.

  Args:
    alpha: a scalar, or an array [C] solved together (returns [C, K, S, A]).
    reading: one of READINGS.
  """
  _check_alpha(alpha)
  deltas = check_deltas(deltas)
  parsed = parse_reading(reading)
  if parsed.form != "regularized":
    raise ValueError(f"ccvl_regularized_q solves the regularized readings; {reading!r} is a "
                     f"bonus reading (ccvl_bonus_gap_q, or family_q for any reading)")
  gap, monotone = parsed.gap, parsed.monotone
  alpha_arr = np.atleast_1d(np.asarray(alpha, np.float64))
  # weight [C, K, S] = alpha * sqrt(log(1/delta) / (n(s) ^ 1))
  weight = alpha_arr[:, None, None] * np.sqrt(
      np.log(1.0 / deltas)[None, :, None] / np.maximum(model.n_s, 1)[None, None, :])
  q = _regularized_fixed_point(model, gamma, weight, 1, tol, max_iters, newton_steps,
                               f"CCVL (regularized, {reading})", gap, monotone)
  return q if np.ndim(alpha) else q[0]


def ccvl_bonus_gap_q(model: EmpiricalModel, gamma: float, alpha, deltas, gap=None,
                     gap_weight: float = DEFAULT_GAP_WEIGHT, tol: float = 1e-8,
                     max_iters: int = 10_000, newton_steps: int = 3,
                     support_threshold: float = 0.0, counts: str = "state") -> np.ndarray:
  """CCVL with the bonus of Eq. (update) on the state count n(s), optionally with a gap whose
  weight w0 does not depend on delta, on a sorted delta grid. Q [K, S, A] ([C, K, S, A] for
  an array alpha).

  With T(s, a, delta) = max_{delta2 <= delta} B^ Q^k(s, a, delta2) - alpha sqrt(log(1/delta) /
  (n(s) ^ 1)) (n(s, a) in place of n(s) with counts='state_action'), each iterate is, per
  state and delta,
    gap None:  Q = T on the data's actions; an action the data never takes at s has no lower
               bound there (-inf);
    gap set:   argmin_q w0 (gap(q) - sum_a beta_a q_a) + 1/2 sum_a beta_a (q_a - T_a)^2, with
               gap = logsumexp_a q or max_a q and beta = n(s, a) / n(s) (unseen actions: -inf).
  T is nondecreasing in delta (a running max minus a bonus that shrinks as delta grows) and
  each per-state solution is nondecreasing in every T_a, so Q is nondecreasing in delta at
  every iterate (Lemma 1) without a max over the solutions. With gap None or 'max', V <=
  max_a T, so V never exceeds the largest return; logsumexp can raise the data's favourite
  action above its target (by less than w0).

  Args:
    alpha: the bonus weight, a scalar or an array [C] solved together.
    gap: None, 'logsumexp' or 'max'.
    gap_weight: w0 >= 0 (used only with a gap).
    support_threshold: tau in [0, 1): an action is in the data's support at s when
      n(s, a) > tau max_a' n(s, a') (tau = 0: every action the data takes there). Outside it
      the data gives no lower bound: the iterates treat such an action as -inf, and the
      returned Q puts it SUPPORT_MARGIN below the smallest supported value at that state and
      delta (ranked last, nondecreasing in delta, finite Bellman errors).
    counts: 'state' (n(s)) or 'state_action' (n(s, a), Eq. update's own count).
  """
  _check_alpha(alpha)
  _check_alpha(gap_weight)
  deltas = check_deltas(deltas)
  if gap not in (None,) + GAPS:
    raise ValueError(f"gap must be None or one of {', '.join(GAPS)}, got {gap!r}")
  if not 0.0 <= support_threshold < 1.0:
    raise ValueError(f"support_threshold must be in [0, 1), got {support_threshold!r}")
  alpha_arr = np.atleast_1d(np.asarray(alpha, np.float64))
  seen_s = model.seen_s
  seen_sa = model.n_sa > support_threshold * model.n_sa.max(axis=1, keepdims=True)  # [S, A]
  beta = model.n_sa / np.maximum(model.n_s, 1)[:, None]              # pi_beta^(a|s), [S, A]
  if counts not in BONUS_COUNTS:
    raise ValueError(f"counts must be one of {', '.join(BONUS_COUNTS)}, got {counts!r}")
  # bonus [C, K, S, 1 or A] = alpha * sqrt(log(1/delta) / (n ^ 1)), n = n(s) or n(s, a)
  n = (np.maximum(model.n_s, 1)[:, None] if counts == "state"
       else np.maximum(model.n_sa, 1)).astype(np.float64)             # [S, 1] or [S, A]
  bonus = (alpha_arr[:, None, None, None]
           * np.sqrt(np.log(1.0 / deltas)[None, :, None, None] / n[None, None]))
  weight = np.full(bonus.shape[:-2] + (model.n_sa.shape[0],), float(gap_weight))  # w0 [C, K, S]

  def step(q):  # q [C, K, S, A]
    v = _state_values(np.where(seen_s[:, None], q, 0.0))           # unvisited states: 0
    target = np.maximum.accumulate(model.backup(v, gamma), axis=1) - bonus
    if gap is None or gap_weight == 0:
      q_new = np.where(seen_sa, target, NEG_INF)
    elif gap == "max":
      q_new = _max_gap_argmin(weight, beta, seen_sa, target, q)
    else:
      q_new = _regularized_argmin(weight, beta, seen_sa, target, q, newton_steps)
    return np.where(seen_s[:, None], q_new, 0.0)

  q = _iterate(step, np.zeros(bonus.shape[:-2] + model.n_sa.shape), tol, max_iters,
               f"CCVL (bonus, gap {gap})")
  floor = np.where(seen_sa, q, np.inf).min(-1, keepdims=True) - SUPPORT_MARGIN  # [C, K, S, 1]
  q = np.where(seen_sa | ~seen_s[:, None], q, floor)
  return q if np.ndim(alpha) else q[0]


def family_q(model: EmpiricalModel, gamma: float, alpha, deltas, reading: str,
             gap_weight: float = DEFAULT_GAP_WEIGHT, **kwargs) -> np.ndarray:
  """The exact family Q(s, a, delta) [K, S, A] ([C, K, S, A] for an array alpha) of any of
  READINGS: ccvl_regularized_q for the regularized ones, ccvl_bonus_gap_q (w0 = gap_weight)
  for the bonus ones."""
  parsed = parse_reading(reading)
  if parsed.form == "bonus":
    return ccvl_bonus_gap_q(model, gamma, alpha, deltas, parsed.gap, gap_weight,
                            counts=parsed.counts, **kwargs)
  return ccvl_regularized_q(model, gamma, alpha, deltas, reading=reading, **kwargs)


TIE_TOL = 1e-6  # values within this of the maximum are tied greedy actions


def greedy_varies(q_delta: np.ndarray, tol: float = TIE_TOL) -> np.ndarray:
  """bool [S]: whether the greedy action changes along the grid at each state of a family
  Q [K, S, A], tie-aware: some two grid deltas have disjoint greedy action sets (actions within
  `tol` of the maximum), so a switch between tied actions does not count."""
  q = np.asarray(q_delta, np.float64)
  top = q >= q.max(-1, keepdims=True) - tol                       # [K, S, A] greedy sets
  out = np.zeros(q.shape[1], bool)
  for i in range(q.shape[0]):
    # disjoint with any later delta: no action in both sets  [K-i-1, S]
    out |= np.any(~np.any(top[i][None] & top[i + 1:], axis=-1), axis=0)
  return out


def v_at_min_delta(q_delta: np.ndarray, tol: float = TIE_TOL) -> np.ndarray:
  """bool [S]: V(s, delta) = max_a Q equals V(s, delta_min) (within `tol`) at every grid delta
  (the family is flat in value there)."""
  v = np.asarray(q_delta, np.float64).max(-1)                     # [K, S]
  return np.all(np.abs(v - v[:1]) <= tol, axis=0)


def family_stats(q_delta: np.ndarray, states: np.ndarray, tol: float = 1e-9) -> dict:
  """How a family Q(s, a, delta) [K, S, A] on a sorted grid behaves at `states` (a bool mask
  [S] or indices): the share of states whose V(s, .) = max_a Q(s, a, .) is nondecreasing step by
  step along the grid (Lemma 1 for V), the share where every action's Q(s, a, .) with a finite
  value is (Lemma 1), the share with V(delta_max) >= V(delta_min), max V, the share whose
  greedy action varies along the grid (`greedy_varies`, tie-aware) and the share whose V is
  its smallest-delta value at every delta (`v_at_min_delta`)."""
  q = np.asarray(q_delta, np.float64)[:, states]                  # [K, S', A]
  v = q.max(-1)                                                   # [K, S']
  with np.errstate(invalid="ignore"):
    dq = np.diff(q, axis=0)                                       # [K-1, S', A]
  dq = np.where(np.isfinite(q[1:]) & np.isfinite(q[:-1]), dq, 0.0)
  return {"states": int(v.shape[1]),
          "v_nondecreasing_share": float(np.mean(np.all(np.diff(v, axis=0) >= -tol, 0))),
          "q_nondecreasing_share": float(np.mean(np.all(dq >= -tol, axis=(0, 2)))),
          "v_end_ordered_share": float(np.mean(v[-1] >= v[0] - tol)),
          "v_max": float(v.max()),
          "greedy_varies_share": float(np.mean(greedy_varies(q))),
          "v_at_min_delta_share": float(np.mean(v_at_min_delta(q)))}


# ----------------------------------------------------------------------------------------------
# Using the learned Q(s, a, delta)
# ----------------------------------------------------------------------------------------------
def data_bellman_errors(q_delta: np.ndarray, data: Transitions, gamma: float) -> np.ndarray:
  """Mean squared Bellman error on the data for each grid delta, [K]:
  mean_i (Q(s_i, a_i, delta) - r_i - gamma (1 - t_i) max_a' Q(s'_i, a', delta))^2."""
  # Here: belief loads TensorFlow (~2.3 s to import); the tabular core stays numpy-only.
  from ccvl_tf.algorithm import belief  # pylint: disable=g-import-not-at-top
  s, a, s2 = np.asarray(data.state), np.asarray(data.action), np.asarray(data.next_state)
  q_sa = np.moveaxis(q_delta[:, s, a], 0, -1)  # [K, N] -> [N, K]
  next_v = np.moveaxis(_state_values(q_delta[:, s2]), 0, -1)  # [N, K]
  disc = gamma * (1.0 - np.asarray(data.terminal, np.float64))
  err = belief.bellman_sq_errors(q_sa, data.reward, disc, next_v).numpy()
  return err.mean(axis=0)


def fixed_delta_index(q_delta: np.ndarray, data: Transitions, gamma: float) -> int:
  """Fixed-CCVL: the grid index of the delta with the lowest mean Bellman error on `data`."""
  return int(np.argmin(data_bellman_errors(q_delta, data, gamma)))
